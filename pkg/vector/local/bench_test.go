package local_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"sort"
	"testing"
	"time"

	blobdir "codectx/pkg/blob/local"
	"codectx/pkg/vector"
	"codectx/pkg/vector/local"
)

// fill makes a store of n random 384-dimensional points in one repository.
func fill(b *testing.B, prec local.Precision, n int) (*local.Store, vector.Collection) {
	b.Helper()
	c := vector.Collection{Model: "bench", Dim: 384}
	// A bucket on disk: the shard's persisted copy is not in the heap.
	bk, err := blobdir.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	s := local.New(bk, prec)
	r := rand.New(rand.NewPCG(7, 8))
	pts := make([]vector.Point, n)
	for i := range pts {
		h := fmt.Sprintf("%040x", i)
		pts[i] = vector.Point{ID: vector.PointID("t", "r", h), Vector: randVec(r, 384), Payload: vector.Payload{Tenant: "t", Repo: "r", Hash: h}}
	}
	if err := s.Upsert(context.Background(), c, pts); err != nil {
		b.Fatal(err)
	}
	return s, c
}

// BenchmarkSearch100k is the dense arm's store cost: top 200 (the arm's
// depth, plus its slack) of 100k 384-dimensional vectors, the size of a
// large repository. It reports p50 and p95 over the iterations.
func BenchmarkSearch100k(b *testing.B) {
	for _, p := range []struct {
		name string
		prec local.Precision
	}{{"float32", local.Float32}, {"int8", local.Int8}} {
		b.Run(p.name, func(b *testing.B) {
			s, c := fill(b, p.prec, 100_000)
			r := rand.New(rand.NewPCG(9, 10))
			f := vector.Filter{Tenant: "t", Repos: []string{"r"}}
			var lat []time.Duration
			b.ResetTimer()
			for b.Loop() {
				q := randVec(r, 384)
				t := time.Now()
				if _, err := s.Search(context.Background(), c, q, 258, f); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t))
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
		})
	}
}

// BenchmarkMemory100k reports the heap held by 100k loaded vectors of 384
// dimensions with their ids and payloads (what the process's RSS grows
// by: the Go heap is the store's only allocation), for each precision.
func BenchmarkMemory100k(b *testing.B) {
	for _, p := range []struct {
		name string
		prec local.Precision
	}{{"float32", local.Float32}, {"int8", local.Int8}} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				runtime.GC()
				debug.FreeOSMemory()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				s, _ := fill(b, p.prec, 100_000)
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB/100k")
				runtime.KeepAlive(s)
			}
		})
	}
}
