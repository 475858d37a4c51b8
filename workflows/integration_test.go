package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/blob/local"
	"codectx/pkg/index"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue"
	"codectx/pkg/queue/natsq"
	"codectx/pkg/temporalserver"
	"codectx/workflows"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
)

// flaky is a blob driver whose HEAD swaps fail while failSwaps > 0. Each
// failed swap records the HEAD content at that moment.
type flaky struct {
	*blob.Bucket
	failSwaps atomic.Int32
	mu        sync.Mutex
	seen      [][]byte
}

func (f *flaky) Swap(ctx context.Context, key string, old, new []byte) error {
	if strings.HasPrefix(key, "heads/") && f.failSwaps.Add(-1) >= 0 {
		cur, _ := f.Bucket.Get(ctx, key)
		f.mu.Lock()
		f.seen = append(f.seen, cur)
		f.mu.Unlock()
		return errors.New("injected store failure")
	}
	return f.Bucket.Swap(ctx, key, old, new)
}

// fixture is a git repository with a work tree.
type fixture struct {
	dir  string
	repo *git.Repository
	n    int
}

func newFixture(t *testing.T, dir string) *fixture {
	t.Helper()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{dir: dir, repo: repo}
}

func (f *fixture) commit(t *testing.T, files map[string]string) string {
	t.Helper()
	wt, err := f.repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for p, content := range files {
		full := filepath.Join(f.dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	f.n++
	h, err := wt.Commit("commit "+string(rune('0'+f.n)), &git.CommitOptions{
		Author: &object.Signature{Name: "Test", Email: "test@example.com", When: time.Date(2025, 1, f.n, 0, 0, 0, 0, time.UTC)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// parseRunner is one parse worker process: its own queue connection.
type parseRunner struct {
	q      *natsq.Queue
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	paths  []string // files the hook saw
}

func (r *parseRunner) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.paths)
}

func startParse(t *testing.T, url string, store *blob.Bucket, cfg queue.Config, hook func(string)) *parseRunner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	q, err := natsq.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	r := &parseRunner{q: q, cancel: cancel, done: make(chan error, 1)}
	w := &pipeline.Workers{Store: store, Queue: q, ParseHook: func(p string) {
		r.mu.Lock()
		r.paths = append(r.paths, p)
		r.mu.Unlock()
		if hook != nil {
			hook(p)
		}
	}}
	go func() { r.done <- w.RunParse(ctx, cfg) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *parseRunner) stop(t *testing.T) {
	t.Helper()
	if r.done == nil {
		return
	}
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("parse worker: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("parse worker did not stop")
	}
	r.done = nil
	r.q.Close()
}

// waitCovered waits until n pushes of the repository are covered.
func waitCovered(ctx context.Context, t *testing.T, c client.Client, repo string, n int) workflows.RepoStatus {
	t.Helper()
	var (
		st  workflows.RepoStatus
		err error
	)
	for {
		st, err = workflows.Status(ctx, c, index.DefaultTenant, repo)
		if err == nil && st.Covered >= n {
			if st.LastError != "" {
				t.Fatalf("snapshot %d failed: %s", n, st.LastError)
			}
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for snapshot %d: status %+v, error %v", n, st, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func pushAndWait(ctx context.Context, t *testing.T, c client.Client, repo, commit string, n int) *workflows.SnapshotResult {
	t.Helper()
	if _, err := workflows.SignalPush(ctx, c, workflows.Push{Repo: repo, Location: repo, Commit: commit}); err != nil {
		t.Fatal(err)
	}
	st := waitCovered(ctx, t, c, repo, n)
	if st.Last == nil || st.Last.Commit != commit || st.LastCommit != commit {
		t.Fatalf("snapshot %d: status %+v, want commit %s", n, st, commit)
	}
	return st.Last
}

func assertHead(ctx context.Context, t *testing.T, store *blob.Bucket, repo, commit string, has, hasNot []string) {
	t.Helper()
	h, err := index.ReadHead(ctx, store, index.DefaultTenant, repo)
	if err != nil {
		t.Fatal(err)
	}
	if h.Commit != commit {
		t.Fatalf("HEAD at %s, want %s", h.Commit, commit)
	}
	seg, err := index.LoadHead(ctx, store, index.DefaultTenant, repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range has {
		if _, ok := seg.File(p); !ok {
			t.Errorf("segment of %s lacks %s", commit[:8], p)
		}
	}
	for _, p := range hasNot {
		if _, ok := seg.File(p); ok {
			t.Errorf("segment of %s has %s", commit[:8], p)
		}
	}
}

// TestPipeline runs the whole pipeline on an in-process Temporal server,
// embedded NATS and a local blob store.
func TestPipeline(t *testing.T) {
	pkgDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// Locations are relative to a temporary working directory, so recorded
	// histories hold no machine paths.
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	ts := newTestServer(temporaltest.WithT(t))
	c := ts.GetDefaultClient()
	q, natsURL := startQueue(ctx, t)
	base := tempStore(t)
	fl := &flaky{Bucket: base}
	store := blob.NewBucket(fl)

	acts := &workflows.Activities{Store: store, Queue: q, CacheDir: t.TempDir(), BatchSize: 2, ParseTimeout: time.Minute, PollInterval: 50 * time.Millisecond, TenantSnapshots: 1}
	ts.NewWorker(workflows.TaskQueue, func(r worker.Registry) { workflows.Register(r, acts) })
	cfg := queue.Config{AckWait: time.Second, MaxDeliver: 3, Workers: 2}
	gctx, gcancel := context.WithCancel(ctx)
	gdone := make(chan error, 1)
	go func() { gdone <- (&pipeline.Workers{Store: store, Queue: q}).RunGraph(gctx, cfg) }()
	defer func() { gcancel(); <-gdone }()

	const repo = "fx"
	fx := newFixture(t, repo)
	files := map[string]string{
		"go.mod":        "module example.com/fx\n\ngo 1.22\n",
		"main.go":       "package main\n\nimport \"example.com/fx/util\"\n\nfunc main() { util.Helper() }\n",
		"util/util.go":  "package util\n\n// Helper helps.\nfunc Helper() int { return 1 }\n",
		"tool.py":       "def hello(name):\n    return 'hello ' + name\n",
		"lib/models.py": "class Model:\n    def save(self):\n        pass\n",
	}
	all := []string{"go.mod", "main.go", "util/util.go", "tool.py", "lib/models.py"}

	p0 := startParse(t, natsURL, store, cfg, nil)

	t.Log("commit 1: everything is parsed and published")
	c1 := fx.commit(t, files)
	res := pushAndWait(ctx, t, c, repo, c1, 1)
	if res.Files != 5 || res.Parsed != 5 || res.Failed != 0 || res.Embed != workflows.EmbedSkipped {
		t.Errorf("snapshot 1 = %+v, want 5 files parsed", res)
	}
	assertHead(ctx, t, store, repo, c1, all, nil)

	t.Log("commit 2: a one-file change parses exactly one file")
	before := len(p0.seen())
	c2 := fx.commit(t, map[string]string{"util/util.go": "package util\n\n// Helper helps more.\nfunc Helper() int { return 2 }\n"})
	res = pushAndWait(ctx, t, c, repo, c2, 2)
	if got := p0.seen()[before:]; !slices.Equal(got, []string{"util/util.go"}) {
		t.Errorf("commit 2 parsed %v, want [util/util.go]", got)
	}
	if res.Parsed != 1 || res.Reused != 4 || res.Previous != c1 {
		t.Errorf("snapshot 2 = %+v, want 1 parsed, 4 reused, previous %s", res, c1)
	}
	assertHead(ctx, t, store, repo, c2, all, nil)
	if ok, _ := store.Exists(ctx, index.SegmentKey(index.DefaultTenant, repo, c1)); !ok {
		t.Error("GC removed the previous segment")
	}
	p0.stop(t)

	t.Log("commit 3: a parse worker killed mid-batch; its batch goes to another worker")
	entered, release := make(chan string, 1), make(chan struct{})
	pa := startParse(t, natsURL, store, queue.Config{AckWait: cfg.AckWait, MaxDeliver: cfg.MaxDeliver, Workers: 1}, func(p string) {
		select {
		case entered <- p:
		default:
		}
		<-release
	})
	c3 := fx.commit(t, map[string]string{"k1.go": "package main\n\nfunc K1() {}\n", "k2.go": "package main\n\nfunc K2() {}\n", "k3.go": "package main\n\nfunc K3() {}\n"})
	if _, err := workflows.SignalPush(ctx, c, workflows.Push{Repo: repo, Location: repo, Commit: c3}); err != nil {
		t.Fatal(err)
	}
	var blocked string
	select {
	case blocked = <-entered:
	case <-ctx.Done():
		t.Fatal("the first worker never got a batch")
	}
	pa.cancel()
	pa.q.Close() // no more heartbeats: the message times out
	const poison = "a_poison.py"
	pb := startParse(t, natsURL, store, cfg, func(p string) {
		if p == poison {
			panic("poisoned " + p)
		}
	})
	st := waitCovered(ctx, t, c, repo, 3)
	close(release)
	pa.stop(t)
	if st.Last.Commit != c3 || st.Last.Parsed != 3 || st.Last.Failed != 0 {
		t.Errorf("snapshot 3 = %+v, want 3 parsed", st.Last)
	}
	if !slices.Contains(pb.seen(), blocked) {
		t.Errorf("the second worker parsed %v, not the killed worker's %s", pb.seen(), blocked)
	}
	assertHead(ctx, t, store, repo, c3, append(all, "k1.go", "k2.go", "k3.go"), nil)

	t.Log("commit 4: a poison file is dead-lettered and left out")
	c4 := fx.commit(t, map[string]string{poison: "def bad():\n    pass\n", "b_ok.py": "def ok():\n    pass\n"})
	res = pushAndWait(ctx, t, c, repo, c4, 4)
	if !slices.Equal(res.FailedFiles, []string{poison}) || res.Failed != 1 || res.Parsed != 1 {
		t.Errorf("snapshot 4 = %+v, want %s failed and 1 parsed", res, poison)
	}
	assertHead(ctx, t, store, repo, c4, []string{"b_ok.py", "k1.go"}, []string{poison})
	dls, err := q.DeadLetters(ctx, pipeline.StageParse)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range dls {
		var b pipeline.ParseBatch
		if json.Unmarshal(d.Data, &b) == nil && len(b.Files) == 1 && b.Files[0].Path == poison {
			found = strings.Contains(d.Reason, "poisoned "+poison) && d.Deliveries == cfg.MaxDeliver
		}
	}
	if !found {
		t.Errorf("no dead letter for %s with its reason among %+v", poison, dls)
	}

	t.Log("commit 5: the store fails while HEAD moves; HEAD waits for it")
	fl.failSwaps.Store(2)
	c5 := fx.commit(t, map[string]string{"tool.py": "def hello(name):\n    return 'hi ' + name\n"})
	res = pushAndWait(ctx, t, c, repo, c5, 5)
	if n := fl.failSwaps.Load(); n >= 0 {
		t.Errorf("%d injected failures left, want all used", n+1)
	}
	if len(fl.seen) != 2 {
		t.Errorf("%d failed swaps, want 2", len(fl.seen))
	}
	for _, data := range fl.seen {
		var h index.Head
		if err := json.Unmarshal(data, &h); err != nil || h.Commit != c4 {
			t.Errorf("HEAD during the failure = %s, want commit %s", data, c4)
		}
	}
	if res.Previous != c4 {
		t.Errorf("snapshot 5 previous %s, want %s", res.Previous, c4)
	}
	assertHead(ctx, t, store, repo, c5, []string{"tool.py"}, []string{poison})

	t.Log("the published commit again: its HEAD left a file out, so only that file is tried again")
	res = pushAndWait(ctx, t, c, repo, c5, 6)
	if res.Skipped || res.Failed != 1 || res.Parsed != 0 || res.Reused != res.Files-1 {
		t.Errorf("snapshot 6 = %+v, want not skipped, the poison file tried again and failed, the rest reused", res)
	}

	t.Log("OrgWorkflow indexes a new repository and reconciles the old one")
	other := newFixture(t, "other")
	o1 := other.commit(t, map[string]string{"x.go": "package x\n\nfunc X() {}\n"})
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "org-test", TaskQueue: workflows.TaskQueue}, workflows.OrgWorkflow,
		workflows.OrgInput{Locations: []string{repo, "other"}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("org workflow: %v", err)
	}
	assertHead(ctx, t, store, "other", o1, []string{"x.go"}, nil)
	if st := waitCovered(ctx, t, c, repo, 7); st.Last.Skipped || st.Last.Failed != 1 || st.Last.Parsed != 0 {
		t.Errorf("org reconcile of %s = %+v, want the poison file tried again, nothing else parsed", repo, st.Last)
	}

	t.Log("reconcile schedule: created, then updated")
	in := workflows.OrgInput{Locations: []string{repo}}
	if err := workflows.EnsureReconcileSchedule(ctx, c, "reconcile-test", in, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := workflows.EnsureReconcileSchedule(ctx, c, "reconcile-test", in, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	desc, err := c.ScheduleClient().GetHandle(ctx, "reconcile-test").Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if iv := desc.Schedule.Spec.Intervals; len(iv) != 1 || iv[0].Every != 2*time.Hour {
		t.Errorf("schedule intervals %+v, want every 2h", iv)
	}
	pb.stop(t)

	if workflows.Updating() {
		workflows.RecordHistory(ctx, t, c, workflows.SnapshotWorkflowID(index.DefaultTenant, repo, 3, true), "", filepath.Join(pkgDir, "testdata", "snapshot_history.json"))
		// repo_history.json was recorded before the tenant lease and is
		// kept as it was.
		workflows.RecordHistory(ctx, t, c, workflows.RepoWorkflowID(index.DefaultTenant, repo), "", filepath.Join(pkgDir, "testdata", "repo_lease_history.json"))
		workflows.RecordHistory(ctx, t, c, workflows.LeaseWorkflowID(index.DefaultTenant), "", filepath.Join(pkgDir, "testdata", "lease_history.json"))
	}
}

// newTestServer is a Temporal test server with the dynamic configuration
// of `codectx up`'s embedded server (pkg/temporalserver), so that tests
// and benchmarks see its task latencies.
// startQueue starts an embedded NATS server for the test and connects to
// it; both end with the test. url is the server's, for more clients.
func startQueue(ctx context.Context, t *testing.T) (q *natsq.Queue, url string) {
	t.Helper()
	ns, err := natsq.StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	q, err = natsq.Connect(ctx, ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	return q, ns.URL()
}

// runWorkers runs the pipeline consumers runs with cfg until the returned
// stop is called: it cancels ctx (with cancel) and reports the errors of
// those that did not end because of it.
func runWorkers(ctx context.Context, t *testing.T, cancel func(), cfg queue.Config, runs ...func(context.Context, queue.Config) error) (stop func()) {
	done := make(chan error, len(runs))
	for _, run := range runs {
		go func() { done <- run(ctx, cfg) }()
	}
	return func() {
		cancel()
		for range runs {
			if err := <-done; err != nil && ctx.Err() == nil {
				t.Error(err)
			}
		}
	}
}

// tempStore is a local blob store in a directory of the test.
func tempStore(t *testing.T) *blob.Bucket {
	t.Helper()
	store, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return store
}

func newTestServer(opts ...temporaltest.TestServerOption) *temporaltest.TestServer {
	return temporaltest.NewServer(append(opts, temporaltest.WithBaseServerOptions(temporal.WithDynamicConfigClient(temporalserver.DynamicConfig())))...)
}
