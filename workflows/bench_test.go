package workflows_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/blob/local"
	"codectx/pkg/embed"
	"codectx/pkg/index"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue"
	"codectx/pkg/queue/natsq"
	"codectx/pkg/source"
	"codectx/pkg/testrepo"
	vlocal "codectx/pkg/vector/local"
	"codectx/workflows"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// env is the embedded stack of `codectx up`: an in-process Temporal
// server, NATS with JetStream, a local blob store, the orchestrator worker
// and parse and graph workers with the same settings as `up`.
type env struct {
	c     client.Client
	store *blob.Bucket
	stop  func()
	marks *marks // when the workers started and finished each job
}

func newEnv(b *testing.B) *env { return newDenseEnv(b, nil) }

// newDenseEnv is newEnv with an embedder (nil: none): embed workers as
// `up` runs them and the embedded vector store of `up`.
func newDenseEnv(b *testing.B, emb embed.Embedder) *env {
	b.Helper()
	ts := newTestServer()
	ns, err := natsq.StartEmbedded(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	q, err := natsq.Connect(ctx, ns.URL())
	if err != nil {
		b.Fatal(err)
	}
	store, err := local.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	acts := &workflows.Activities{Store: store, Queue: q, CacheDir: b.TempDir(), PollInterval: 100 * time.Millisecond} // as `up`
	mk := &marks{}
	w := &pipeline.Workers{Store: store, Queue: q, CacheDir: b.TempDir(), Wrap: mk.wrap}
	if emb != nil {
		acts.Embedder, acts.Vectors, w.Embedder = emb, vlocal.New(store, vlocal.Binary), emb
	}
	ts.NewWorker(workflows.TaskQueue, func(r worker.Registry) { workflows.Register(r, acts) })
	done := make(chan struct{}, 3)
	go func() { w.RunParse(ctx, queue.Config{Workers: runtime.GOMAXPROCS(0)}); done <- struct{}{} }()
	go func() { w.RunGraph(ctx, queue.Config{Workers: 1}); done <- struct{}{} }()
	workers := 2
	if emb != nil {
		workers++
		go func() { w.RunEmbed(ctx, queue.Config{Workers: runtime.GOMAXPROCS(0)}); done <- struct{}{} }()
	}
	return &env{c: ts.GetDefaultClient(), store: store, marks: mk, stop: func() {
		cancel()
		for range workers {
			<-done
		}
		q.Close()
		ns.Shutdown()
		ts.Stop()
	}}
}

// pushAndWaitHead signals a push and waits until HEAD points at commit
// (the moment a query sees the new snapshot).
func (e *env) pushAndWaitHead(b *testing.B, repo, location, commit string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if _, err := workflows.SignalPush(ctx, e.c, workflows.Push{Repo: repo, Location: location, Commit: commit}); err != nil {
		b.Fatal(err)
	}
	for {
		h, err := index.ReadHead(ctx, e.store, index.DefaultTenant, repo)
		if err == nil && (h.Commit == commit || (commit == "" && h.Commit != "")) {
			return
		}
		select {
		case <-ctx.Done():
			st, _ := workflows.Status(context.Background(), e.c, index.DefaultTenant, repo)
			b.Fatalf("push of %s not published: %+v", commit, st)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

var corpusDir = filepath.Join(runtime.GOROOT(), "src", "net", "http")

func corpusBytes(b *testing.B) int64 {
	snap, err := source.Open(context.Background(), corpusDir, source.Options{})
	if err != nil {
		b.Skipf("corpus: %v", err)
	}
	defer snap.Close()
	var n int64
	for _, f := range snap.Files {
		n += f.Size
	}
	return n
}

// BenchmarkColdIndexPipeline indexes $GOROOT/src/net/http through the
// distributed path (Temporal, NATS, parse and graph workers) with an
// empty parse cache. Compare MB/s with BenchmarkColdIndexLibrary.
func BenchmarkColdIndexPipeline(b *testing.B) {
	b.SetBytes(corpusBytes(b))
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := newEnv(b)
		b.StartTimer()
		e.pushAndWaitHead(b, "nethttp", corpusDir, "")
		b.StopTimer()
		e.stop()
		b.StartTimer()
	}
}

// BenchmarkColdIndexLibrary indexes the same files in-process with the
// same number of parse goroutines.
func BenchmarkColdIndexLibrary(b *testing.B) {
	b.SetBytes(corpusBytes(b))
	for i := 0; i < b.N; i++ {
		store, err := local.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := index.Build(context.Background(), store, corpusDir, index.Options{Name: "nethttp"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPushToQueryable measures, on the embedded stack, the time from a
// one-file push to the moment HEAD serves the new commit. Run it with
// -benchtime 10x for the p50 over 10 pushes.
func BenchmarkPushToQueryable(b *testing.B) {
	e := newEnv(b)
	defer e.stop()
	r := testrepo.New(b)
	first := r.Commit("initial", testrepo.Small)
	e.pushAndWaitHead(b, "shop", r.Dir, first)
	e.pushes(b, "shop", r.Dir, func(i int) string {
		return r.Commit(fmt.Sprintf("push %d", i), map[string]string{
			"price/price.go": fmt.Sprintf("package price\n\n// Lookup returns the price of a SKU.\nfunc Lookup(sku string) int { return %d }\n", i),
		})
	})
}

// BenchmarkPushToQueryableGOROOT is BenchmarkPushToQueryable on a copy of
// $GOROOT/src committed as one git repository (about 11,000 files), each
// push changing net/http/server.go. It runs when
// CODECTX_BENCH_PUSH_GOROOT=1 (the first index takes minutes); use
// -benchtime 5x.
func BenchmarkPushToQueryableGOROOT(b *testing.B) {
	if os.Getenv("CODECTX_BENCH_PUSH_GOROOT") != "1" {
		b.Skip("set CODECTX_BENCH_PUSH_GOROOT=1")
	}
	dir := filepath.Join(b.TempDir(), "src")
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=bench", "-c", "user.email=bench@codectx.invalid"}, args...)...).CombinedOutput()
		if err != nil {
			b.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("cp", "-r", filepath.Join(runtime.GOROOT(), "src"), dir).CombinedOutput(); err != nil {
		b.Fatalf("copy: %v: %s", err, out)
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "initial")
	e := newEnv(b)
	defer e.stop()
	e.pushAndWaitHead(b, "goroot", dir, git("rev-parse", "HEAD"))
	file := filepath.Join(dir, "net", "http", "server.go")
	orig, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	e.pushes(b, "goroot", dir, func(i int) string {
		if err := os.WriteFile(file, fmt.Appendf(slices.Clip(orig), "\nfunc benchPush%d() {}\n", i), 0o644); err != nil {
			b.Fatal(err)
		}
		git("commit", "-q", "-a", "-m", fmt.Sprintf("push %d", i))
		return git("rev-parse", "HEAD")
	})
}

// pushes times b.N pushes of the commits next makes, to HEAD moved, and
// logs the mean time of each step.
func (e *env) pushes(b *testing.B, repo, dir string, next func(i int) string) {
	lat := make([]time.Duration, 0, b.N)
	var ds []breakdown
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		commit := next(i)
		b.StartTimer()
		start := time.Now()
		e.pushAndWaitHead(b, repo, dir, commit)
		head := time.Now()
		lat = append(lat, head.Sub(start))
		b.StopTimer()
		ds = append(ds, e.pushBreakdown(b, repo, start, head))
		b.StartTimer()
	}
	b.StopTimer()
	meanBreakdown(b, ds)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Milliseconds()), "p95-ms")
}
