package workflows_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/dense/densetest"
	"codectx/pkg/embed"
	"codectx/pkg/index"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue"
	vlocal "codectx/pkg/vector/local"
	"codectx/workflows"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"
)

// flakyEmbedder is an embedder that fails its next fails calls (all of them when
// fails < 0), then embeds with Words.
type flakyEmbedder struct {
	densetest.Words
	fails atomic.Int64
	calls atomic.Int64
}

func (f *flakyEmbedder) Embed(ctx context.Context, texts []string, k embed.Kind) ([][]float32, error) {
	f.calls.Add(1)
	if n := f.fails.Load(); n != 0 {
		if n > 0 {
			f.fails.Add(-1)
		}
		return nil, errors.New("embedder unavailable (503)")
	}
	return f.Words.Embed(ctx, texts, k)
}

// TestPipelineEmbedRetry: an embed batch that fails for an embedder that
// is down is retried with the infrastructure retry rules of the parse
// stage: an embedder that fails a few times and recovers gives a
// complete snapshot; one that never recovers fails the snapshot, and HEAD
// stays at the last good commit.
func TestPipelineEmbedRetry(t *testing.T) {
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ts := newTestServer(temporaltest.WithT(t))
	c := ts.GetDefaultClient()
	q, _ := startQueue(ctx, t)
	store := tempStore(t)
	emb := &flakyEmbedder{}
	acts := &workflows.Activities{Store: store, Queue: q, CacheDir: t.TempDir(), PollInterval: 50 * time.Millisecond,
		Embedder: emb, Vectors: vlocal.New(store, vlocal.Float32), InfraRetry: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}}
	ts.NewWorker(workflows.TaskQueue, func(r worker.Registry) { workflows.Register(r, acts) })
	wctx, wcancel := context.WithCancel(ctx)
	w := &pipeline.Workers{Store: store, Queue: q, Embedder: emb}
	// Two deliveries per message: a batch is dead-lettered after two
	// failed calls, and re-published twice, so six calls fail a snapshot.
	// Failures are nak'ed with Backoff; the ack wait only bounds a hang and
	// is long, so a loaded machine's slow call is never delivered twice
	// (the call counts below are exact).
	cfg := queue.Config{AckWait: 10 * time.Second, MaxDeliver: 2, Workers: 1, Backoff: []time.Duration{10 * time.Millisecond}}
	defer runWorkers(wctx, t, wcancel, cfg, w.RunParse, w.RunEmbed, w.RunGraph)()

	const repo = "flaky"
	fx := newFixture(t, repo)
	// Down for three calls: the first message is dead-lettered, its
	// re-publication fails once and then succeeds.
	emb.fails.Store(3)
	c1 := fx.commit(t, map[string]string{"cart.go": "package shop\n\n// Total adds up the prices.\nfunc Total(prices []int) int { return 0 }\n"})
	res := pushAndWait(ctx, t, c, repo, c1, 1)
	if res.Embedded == 0 || res.EmbedFailed != 0 || res.PointsAdded != res.Points || emb.calls.Load() != 4 {
		t.Fatalf("snapshot after 3 failed calls = %+v (%d calls), want every chunk embedded after 4 calls", res, emb.calls.Load())
	}

	// Down for good: the snapshot fails after the retries, HEAD stays.
	emb.fails.Store(-1)
	emb.calls.Store(0)
	c2 := fx.commit(t, map[string]string{"cart.go": "package shop\n\n// Total adds up the prices of the basket.\nfunc Total(prices []int) int { return 1 }\n"})
	if _, err := workflows.SignalPush(ctx, c, workflows.Push{Repo: repo, Location: repo, Commit: c2}); err != nil {
		t.Fatal(err)
	}
	var st workflows.RepoStatus
	var err error
	for {
		st, err = workflows.Status(ctx, c, index.DefaultTenant, repo)
		if err == nil && st.Covered >= 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for snapshot 2: %+v, %v", st, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if st.LastError == "" || !strings.Contains(st.LastError, "embedding did not finish") || st.LastCommit != c1 {
		t.Fatalf("status after an embedder down for good: %+v, want the snapshot failed in the embed stage and %s last", st, c1)
	}
	if emb.calls.Load() != 6 {
		t.Errorf("embedder called %d times, want 6 (2 deliveries x 3 rounds)", emb.calls.Load())
	}
	if h, err := index.ReadHead(ctx, store, index.DefaultTenant, repo); err != nil || h.Commit != c1 {
		t.Fatalf("HEAD after the failed snapshot: %+v (%v), want %s", h, err, c1)
	}
}
