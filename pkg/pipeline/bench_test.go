package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/blob/local"
	"codectx/pkg/index"
	"codectx/pkg/queue"
)

// BenchmarkGraphOneFile times the graph stage (BuildSegment) of a one-file
// change on a copy of $GOROOT/src indexed before, as the graph worker runs
// it after a push: the parse cache holds every file, HEAD names the
// previous snapshot's shard list. It runs when CODECTX_BENCH_GRAPH_GOROOT=1
// (the first index takes minutes); CODECTX_BENCH_GRAPH_PROFILE=file writes
// a CPU profile, the timed part labelled stage=graph.
func BenchmarkGraphOneFile(b *testing.B) {
	if os.Getenv("CODECTX_BENCH_GRAPH_GOROOT") != "1" {
		b.Skip("set CODECTX_BENCH_GRAPH_GOROOT=1")
	}
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "src")
	if out, err := exec.Command("cp", "-r", filepath.Join(runtime.GOROOT(), "src"), dir).CombinedOutput(); err != nil {
		b.Fatalf("copy: %v: %s", err, out)
	}
	store, err := local.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	w := &Workers{Store: store}
	// snapshot parses what changed in dir and returns its graph job.
	snapshot := func() GraphJob {
		snap, err := OpenSnapshot(ctx, "", dir, "", "")
		if err != nil {
			b.Fatal(err)
		}
		defer snap.Close()
		m, err := index.ReadManifest(ctx, snap, "t", "goroot", 0)
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		files := slices.Clone(snap.Files)
		for i := range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				var part = files[i*len(files)/runtime.GOMAXPROCS(0) : (i+1)*len(files)/runtime.GOMAXPROCS(0)]
				for len(part) > 0 {
					k := min(64, len(part))
					data, _ := json.Marshal(ParseBatch{Tenant: "t", Repo: "goroot", Commit: snap.Commit, Location: dir, Files: part[:k]})
					if err := w.HandleParse(ctx, queue.Message{Data: data}); err != nil {
						b.Error(err)
					}
					part = part[k:]
				}
			})
		}
		wg.Wait()
		mdata, _ := json.Marshal(m)
		mk := ManifestKey("t", "goroot", snap.Commit)
		if err := store.Put(ctx, mk, mdata); err != nil {
			b.Fatal(err)
		}
		return GraphJob{Tenant: "t", Repo: "goroot", Commit: snap.Commit, ManifestKey: mk}
	}
	publish := func(store *blob.Bucket, j GraphJob, key string) {
		data, err := store.Get(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if err := index.Publish(ctx, store, j.Tenant, j.Repo, j.Commit, key, data); err != nil {
			b.Fatal(err)
		}
	}
	j := snapshot()
	key, err := BuildSegment(ctx, store, j)
	if err != nil {
		b.Fatal(err)
	}
	publish(store, j, key)
	file := filepath.Join(dir, "net", "http", "server.go")
	orig, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	if p := os.Getenv("CODECTX_BENCH_GRAPH_PROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
		b.Cleanup(pprof.StopCPUProfile)
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if err := os.WriteFile(file, fmt.Appendf(slices.Clip(orig), "\nfunc benchPush%d() {}\n", i), 0o644); err != nil {
			b.Fatal(err)
		}
		j := snapshot()
		b.StartTimer()
		var key string
		var err error
		// Labelled: pprof -tagfocus stage=graph shows this part alone.
		pprof.Do(ctx, pprof.Labels("stage", "graph"), func(ctx context.Context) {
			key, err = BuildSegment(ctx, store, j)
		})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		publish(store, j, key)
		b.StartTimer()
	}
}
