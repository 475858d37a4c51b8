package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"

	"codectx/pkg/blob/local"
	"codectx/pkg/index"
)

// BenchmarkPushLoad times what the query service does for the first query
// after a one-file push on a copy of $GOROOT/src: HEAD names a new shard
// list (one shard changed), the server has the previous snapshot loaded and
// queried, and the timed part is the query that loads the new snapshot and
// answers from it. It runs when CODECTX_BENCH_LOAD_GOROOT=1 (the first
// index takes minutes; CODECTX_BENCH_LOAD_DIR=dir keeps the copy and its
// store there for the next run); CODECTX_BENCH_LOAD_PROFILE=file writes a
// CPU profile, the timed part labelled stage=load.
func BenchmarkPushLoad(b *testing.B) {
	if os.Getenv("CODECTX_BENCH_LOAD_GOROOT") != "1" {
		b.Skip("set CODECTX_BENCH_LOAD_GOROOT=1")
	}
	ctx := context.Background()
	work := os.Getenv("CODECTX_BENCH_LOAD_DIR") // kept between runs when set
	if work == "" {
		work = b.TempDir()
	}
	dir := filepath.Join(work, "src")
	if _, err := os.Stat(dir); err != nil {
		if out, err := exec.Command("cp", "-r", filepath.Join(runtime.GOROOT(), "src"), dir).CombinedOutput(); err != nil {
			b.Fatalf("copy: %v: %s", err, out)
		}
	}
	store, err := local.Open(filepath.Join(work, "store"))
	if err != nil {
		b.Fatal(err)
	}
	build := func() {
		if _, err := index.Build(ctx, store, dir, index.Options{Name: "goroot"}); err != nil {
			b.Fatal(err)
		}
	}
	build()
	// The handler is called in this goroutine, so that the profile's
	// label covers the load and the search.
	h := (&Server{Store: store, Routes: QueryRoutes}).Handler()
	ask := func(q string) string {
		body, _ := json.Marshal(QueryRequest{Repo: "goroot", Query: q, Budget: 500})
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/query", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("query: %d %s", rec.Code, rec.Body.Bytes())
		}
		return rec.Body.String()
	}
	ask("ServeHTTP")
	file := filepath.Join(dir, "net", "http", "server.go")
	orig, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	if p := os.Getenv("CODECTX_BENCH_LOAD_PROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		marker := fmt.Sprintf("CodectxBenchLoad%d", i)
		if err := os.WriteFile(file, fmt.Appendf(slices.Clip(orig), "\nfunc %s() {}\n", marker), 0o644); err != nil {
			b.Fatal(err)
		}
		build()
		b.StartTimer()
		var out string
		pprof.Do(ctx, pprof.Labels("stage", "load"), func(context.Context) { out = ask(marker) })
		if !strings.Contains(out, marker) {
			b.Fatalf("the answer does not hold %s", marker)
		}
	}
}
