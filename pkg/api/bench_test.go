package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/index"
)

var benchQueries = []string{
	"escape analysis of closures",
	"inline small functions cost budget",
	"(*Func).newValue",
	"how are phi nodes placed during ssa construction",
	"dead code elimination pass",
	"what depends on types2.Checker",
	"register allocation spill",
	"bounds check elimination",
	"typecheck generic instantiation",
	"write export data",
	"loop rotation",
	"devirtualize interface calls",
	"nil check elimination",
	"stack frame layout",
	"fix miscompilation in rewrite rules",
	"what changed recently in the inliner",
	"constant folding of shifts",
	"ir.Name escapes",
	"debug line numbers for statements",
	"walk range loops",
}

var (
	benchOnce  sync.Once
	benchStore *blob.Bucket
	benchErr   error
)

// benchServer serves $GOROOT/src/cmd/compile (about 10k chunks), indexed
// once, over real HTTP on loopback.
func benchServer(b *testing.B) string {
	benchOnce.Do(func() {
		benchStore = blob.NewMem()
		dir := filepath.Join(runtime.GOROOT(), "src", "cmd", "compile")
		_, benchErr = index.Build(context.Background(), benchStore, dir, index.Options{Name: "compile"})
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	ts := httptest.NewServer((&Server{Store: benchStore, Routes: QueryRoutes}).Handler())
	b.Cleanup(ts.Close)
	return ts.URL + "/v1/query"
}

// cpuTime is the user and system CPU time of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkQueryHTTP posts queries with 1 and 8 concurrent clients and
// reports the latency the clients see (p50, p95) beside the engine's own
// timings_us.total.
func BenchmarkQueryHTTP(b *testing.B) {
	for _, clients := range []int{1, 8} {
		b.Run(map[int]string{1: "clients=1", 8: "clients=8"}[clients], func(b *testing.B) {
			url := benchServer(b)
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
			ask := func(i int) (int, error) {
				body, _ := json.Marshal(QueryRequest{Repo: "compile", Query: benchQueries[i%len(benchQueries)]})
				resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					return 0, err
				}
				defer resp.Body.Close()
				data, err := io.ReadAll(resp.Body)
				if err != nil {
					return 0, err
				}
				var out struct {
					Timings map[string]int `json:"timings_us"`
				}
				if err := json.Unmarshal(data, &out); err != nil {
					return 0, err
				}
				return out.Timings["total"], nil
			}
			for i := range benchQueries { // load the segment, count each query's tokens once
				if _, err := ask(i); err != nil {
					b.Fatal(err)
				}
			}
			var (
				next   atomic.Int64
				mu     sync.Mutex
				lat    []time.Duration
				engine int
				wg     sync.WaitGroup
			)
			cpu0 := cpuTime()
			b.ResetTimer()
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1)) - 1
						if i >= b.N {
							return
						}
						t := time.Now()
						total, err := ask(i)
						if err != nil {
							b.Error(err)
							return
						}
						d := time.Since(t)
						mu.Lock()
						lat = append(lat, d)
						engine += total
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			// CPU per query (server and clients, this process) is what the
			// cores' sharing with other work does not change.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N)/1000, "cpu-ms/op")
			slices.Sort(lat)
			if len(lat) == 0 {
				return
			}
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
			b.ReportMetric(float64(engine)/float64(len(lat))/1000, "engine-ms")
		})
	}
}
