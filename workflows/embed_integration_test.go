package workflows_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/dense"
	"codectx/pkg/dense/densetest"
	"codectx/pkg/embed"
	"codectx/pkg/index"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue"
	"codectx/pkg/vector"
	vlocal "codectx/pkg/vector/local"
	"codectx/workflows"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"
)

// embedPipeline starts a Temporal test server with the activities and
// the parse, embed and graph workers over a fresh queue and store, with
// the fake embedder and the local vector store. The workers embed slowly
// when slow > 0. An hour between polls: a push completes only if the
// workers' notifications wake every wait, the embed wait's too (the
// polling fallback is TestPipelineEmbedRetry's). stop stops the workers.
func embedPipeline(ctx context.Context, t *testing.T, slow time.Duration) (client.Client, *blob.Bucket, *densetest.Words, *vlocal.Store, func()) {
	t.Helper()
	ts := newTestServer(temporaltest.WithT(t))
	q, _ := startQueue(ctx, t)
	store := tempStore(t)
	emb := &densetest.Words{}
	vs := vlocal.New(store, vlocal.Int8)
	acts := &workflows.Activities{Store: store, Queue: q, CacheDir: t.TempDir(), PollInterval: time.Hour, Embedder: emb, Vectors: vs}
	ts.NewWorker(workflows.TaskQueue, func(r worker.Registry) { workflows.Register(r, acts) })
	var wemb embed.Embedder = emb
	if slow > 0 {
		wemb = slowEmbedder{emb, slow}
	}
	wctx, wcancel := context.WithCancel(ctx)
	w := &pipeline.Workers{Store: store, Queue: q, Embedder: wemb}
	cfg := queue.Config{AckWait: time.Second, MaxDeliver: 3, Workers: 2}
	return ts.GetDefaultClient(), store, emb, vs, runWorkers(wctx, t, wcancel, cfg, w.RunParse, w.RunEmbed, w.RunGraph)
}

// TestPipelineEmbed runs the pipeline with an embedder: embed workers
// consume the embed stage, the snapshot's points land in the vector store,
// a one-file change embeds only its changed chunks, GC removes the points
// no kept snapshot references, and the waits are woken by the queue.
func TestPipelineEmbed(t *testing.T) {
	pkgDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	// 40 s: three pushes take about 3 s when the waits are woken, over a
	// minute when the embed wait sleeps until its activity is retried.
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	// The workers embed slowly: a wait's first look finds vectors missing.
	c, store, emb, vs, stop := embedPipeline(ctx, t, 200*time.Millisecond)
	defer stop()

	const repo = "emb"
	fx := newFixture(t, repo)
	c1 := fx.commit(t, map[string]string{
		"cart.go":   "package shop\n\n// Total adds up the prices of the items in the basket.\nfunc Total(prices []int) int {\n\tsum := 0\n\tfor _, p := range prices {\n\t\tsum += p\n\t}\n\treturn sum\n}\n",
		"mail.go":   "package shop\n\n// Notify sends an email message to the customer address.\nfunc Notify(address, message string) error {\n\treturn nil\n}\n",
		"sky.py":    "def forecast():\n    \"\"\"Predict rain and sunshine for tomorrow.\"\"\"\n    return 'rain'\n",
		"README.md": "# shop\n\nA tiny shop.\n",
	})
	res := pushAndWait(ctx, t, c, repo, c1, 1)
	if res.Embedded == 0 || res.EmbedReused != 0 || res.EmbedFailed != 0 || res.Points != res.Embedded || res.PointsAdded != res.Points {
		t.Fatalf("snapshot 1 = %+v, want every chunk embedded and stored", res)
	}
	col := dense.Collection(emb)
	f := vector.Filter{Tenant: index.DefaultTenant, Repos: []string{repo}}
	if pts, err := vs.List(ctx, col, f); err != nil || len(pts) != res.Points {
		t.Fatalf("store holds %d points (%v), want %d", len(pts), err, res.Points)
	}
	seg, err := index.LoadHead(ctx, store, index.DefaultTenant, repo)
	if err != nil {
		t.Fatal(err)
	}
	arm := &dense.Arm{Embedder: emb, Store: vs}
	ids, err := arm.Search(ctx, seg, "send an email message to the customer", 1)
	if err != nil || len(ids) != 1 || seg.Chunks[ids[0]].Name != "Notify" {
		t.Fatalf("dense search: %v %v, want Notify", ids, err)
	}
	first, embeddedTexts := res.Points, emb.Texts()

	c2 := fx.commit(t, map[string]string{"sky.py": "def forecast():\n    \"\"\"Predict snow and storms for the weekend.\"\"\"\n    return 'snow'\n"})
	res = pushAndWait(ctx, t, c, repo, c2, 2)
	// sky.py has a module chunk and a function chunk; only the function's text changed.
	if res.Embedded != 1 || res.EmbedReused != first-1 || res.PointsAdded != 1 || emb.Texts()-embeddedTexts != 1 {
		t.Fatalf("snapshot 2 = %+v (%d texts embedded), want 1 embedded and %d reused", res, emb.Texts()-embeddedTexts, first-1)
	}
	// GC keeps the previous snapshot's points: HEAD and its predecessor.
	if pts, _ := vs.List(ctx, col, f); len(pts) != first+1 {
		t.Fatalf("after snapshot 2 the store holds %d points, want %d", len(pts), first+1)
	}
	c3 := fx.commit(t, map[string]string{"cart.go": "package shop\n\n// Total adds up the prices.\nfunc Total(prices []int) int { return 0 }\n"})
	res = pushAndWait(ctx, t, c, repo, c3, 3)
	if res.Embedded != 1 {
		t.Fatalf("snapshot 3 = %+v, want 1 embedded", res)
	}
	// The first snapshot is collected: its forecast point goes.
	if pts, _ := vs.List(ctx, col, f); len(pts) != first+1 {
		t.Fatalf("after snapshot 3 the store holds %d points, want %d (c2's and c3's)", len(pts), first+1)
	}
	if workflows.Updating() {
		workflows.RecordHistory(ctx, t, c, workflows.SnapshotWorkflowID(index.DefaultTenant, repo, 1, true), "", filepath.Join(pkgDir, "testdata", "snapshot_embed_history.json"))
	}
}

// slowEmbedder embeds after a delay.
type slowEmbedder struct {
	embed.Embedder
	delay time.Duration
}

func (s slowEmbedder) Embed(ctx context.Context, texts []string, kind embed.Kind) ([][]float32, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Embedder.Embed(ctx, texts, kind)
}

// TestReindexRestoresVectors loses the vector store's points of a
// published snapshot (a volume lost, a collection dropped) and reindexes
// the same commit: the snapshot is skipped (HEAD is complete at it), but
// its points are written again from the embedding cache, and a chunk
// whose cached vector is gone too is embedded again, alone. A reindex
// with nothing lost writes nothing.
func TestReindexRestoresVectors(t *testing.T) {
	pkgDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	c, store, emb, vs, stop := embedPipeline(ctx, t, 0)
	defer stop()

	const repo = "lost"
	fx := newFixture(t, repo)
	c1 := fx.commit(t, map[string]string{
		"cart.go": "package shop\n\n// Total adds up the prices of the items in the basket.\nfunc Total(prices []int) int {\n\tsum := 0\n\tfor _, p := range prices {\n\t\tsum += p\n\t}\n\treturn sum\n}\n",
		"mail.go": "package shop\n\n// Notify sends an email message to the customer address.\nfunc Notify(address, message string) error {\n\treturn nil\n}\n",
		"sky.py":  "def forecast():\n    \"\"\"Predict rain and sunshine for tomorrow.\"\"\"\n    return 'rain'\n",
	})
	res := pushAndWait(ctx, t, c, repo, c1, 1)
	if res.Points == 0 || res.PointsAdded != res.Points {
		t.Fatalf("snapshot 1 = %+v, want its points stored", res)
	}
	n := res.Points
	col := dense.Collection(emb)
	f := vector.Filter{Tenant: index.DefaultTenant, Repos: []string{repo}}
	pts, err := vs.List(ctx, col, f)
	if err != nil || len(pts) != n {
		t.Fatalf("store holds %d points (%v), want %d", len(pts), err, n)
	}

	// The points are lost, and the cached vector of one chunk with them.
	if err := vs.Delete(ctx, col, f, nil); err != nil {
		t.Fatal(err)
	}
	if pts, err := vs.List(ctx, col, f); err != nil || len(pts) != 0 {
		t.Fatalf("after the loss the store holds %d points (%v), want none", len(pts), err)
	}
	if err := store.Delete(ctx, dense.CacheKey(col, index.DefaultTenant, pts[0].Payload.Hash)); err != nil {
		t.Fatal(err)
	}
	seg, err := index.LoadHead(ctx, store, index.DefaultTenant, repo)
	if err != nil {
		t.Fatal(err)
	}
	arm := &dense.Arm{Embedder: emb, Store: vs}
	if ids, err := arm.Search(ctx, seg, "send an email message to the customer", 1); err != nil || len(ids) != 0 {
		t.Fatalf("dense search after the loss: %v %v, want nothing", ids, err)
	}
	texts := emb.Texts() // the query's text counts too

	// A reindex (POST .../reindex: a push of the location's HEAD).
	reindex := func(k int) *workflows.SnapshotResult {
		t.Helper()
		if _, err := workflows.SignalPush(ctx, c, workflows.Push{Repo: repo, Location: repo}); err != nil {
			t.Fatal(err)
		}
		st := waitCovered(ctx, t, c, repo, k)
		if st.Last == nil || !st.Last.Skipped || st.Last.Commit != c1 {
			t.Fatalf("reindex %d: status %+v, want the published %s skipped", k, st, c1)
		}
		return st.Last
	}
	res = reindex(2)
	if got, err := vs.List(ctx, col, f); err != nil || len(got) != n {
		t.Fatalf("after the reindex the store holds %d points (%v), want %d", len(got), err, n)
	}
	if d := emb.Texts() - texts; d != 1 {
		t.Errorf("the reindex embedded %d texts, want 1 (the chunk whose cached vector was lost)", d)
	}
	ids, err := arm.Search(ctx, seg, "send an email message to the customer", 1)
	if err != nil || len(ids) != 1 || seg.Chunks[ids[0]].Name != "Notify" {
		t.Fatalf("dense search after the reindex: %v %v, want Notify", ids, err)
	}
	if res.Restored != n || res.Points != n || res.Embedded != 1 || res.EmbedReused != n-1 {
		t.Errorf("reindex = %+v, want %d points restored, 1 chunk embedded", res, n)
	}

	// Nothing lost: the reindex lists the points and writes nothing.
	texts = emb.Texts()
	res = reindex(3)
	if res.Restored != 0 || res.Points != n || res.PointsAdded != 0 || emb.Texts() != texts {
		t.Errorf("reindex with nothing lost = %+v, want %d points, none written", res, n)
	}

	// A snapshot without a vector set (published before an embedder was
	// configured) gets its points too.
	if err := vs.Delete(ctx, col, f, nil); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, workflows.VectorSetKey(index.DefaultTenant, repo, c1)); err != nil {
		t.Fatal(err)
	}
	res = reindex(4)
	if got, err := vs.List(ctx, col, f); err != nil || len(got) != n || res.Restored != n {
		t.Fatalf("reindex without a vector set = %+v: the store holds %d points (%v), want %d restored", res, len(got), err, n)
	}
	if ok, err := store.Exists(ctx, workflows.VectorSetKey(index.DefaultTenant, repo, c1)); err != nil || !ok {
		t.Errorf("vector set written again: %v %v", ok, err)
	}
	if workflows.Updating() {
		workflows.RecordHistory(ctx, t, c, workflows.SnapshotWorkflowID(index.DefaultTenant, repo, 1, true), "", filepath.Join(pkgDir, "testdata", "snapshot_vector_repair_history.json"))
	}
}
