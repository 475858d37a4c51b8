package workflows_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"codectx/pkg/pipeline"
	"codectx/pkg/queue"
	"codectx/workflows"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"
)

// TestPipelineQueueWindowPoisonSplit: a dead-lettered batch of poison
// files is re-sent file by file to find the poison. Those files are the
// snapshot's batches too: they must wait for the window like any other,
// or a tenant whose files all fail holds 64 messages (each retried to
// its last delivery) per batch of its window in the parse queue, ahead
// of every other tenant's push. Every file is still reported left out.
func TestPipelineQueueWindowPoisonSplit(t *testing.T) {
	const files, batch, window = 24, 8, 1
	body := map[string]string{}
	for i := range files {
		body[fmt.Sprintf("bad%02d.go", i)] = fmt.Sprintf("package p\n\n// F%d is poison to the parser.\nfunc F%d() {}\n", i, i)
	}
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ts := newTestServer(temporaltest.WithT(t))
	c := ts.GetDefaultClient()
	q, _ := startQueue(ctx, t)
	store := tempStore(t)
	acts := &workflows.Activities{Store: store, Queue: q, CacheDir: t.TempDir(), PollInterval: 20 * time.Millisecond,
		BatchSize: batch, Window: window}
	ts.NewWorker(workflows.TaskQueue, func(r worker.Registry) { workflows.Register(r, acts) })
	var parsePeak peak
	var mu sync.Mutex
	tried := map[string]int{}
	in := newInQueue(q)
	cfg := queue.Config{AckWait: 10 * time.Second, Workers: 1, MaxDeliver: 1}
	w := &pipeline.Workers{Store: store, Queue: q, Wrap: in.wrap(cfg), ParseHook: func(p string) {
		parsePeak.see(ctx, in, pipeline.StageParse)
		mu.Lock()
		tried[p]++
		mu.Unlock()
		if strings.HasPrefix(p, "bad") {
			panic("poison")
		}
	}}
	wctx, wcancel := context.WithCancel(ctx)
	defer runWorkers(wctx, t, wcancel, cfg, w.RunParse, w.RunGraph)()

	fx := newFixture(t, "poison")
	commit := fx.commit(t, body)
	res := pushAndWait(ctx, t, c, "poison", commit, 1)
	if res.Failed != files {
		t.Errorf("snapshot = %+v, want all %d files reported left out", res, files)
	}
	mu.Lock()
	if len(tried) != files {
		t.Errorf("%d files tried, want %d", len(tried), files)
	}
	mu.Unlock()
	// Sampled in the one worker's handler, as in TestPipelineQueueWindow:
	// the bound is the window.
	if p := parsePeak.n.Load(); p > window {
		t.Errorf("parse queue peaked at %d messages with a window of %d: the poison split bypasses the window", p, window)
	}
	// Every message counted finished leaves the stream: the count left
	// out only what NATS had not yet removed.
	drained(ctx, t, q, pipeline.StageParse)
	t.Logf("parse queue peak %d; snapshot %+v", parsePeak.n.Load(), res)
}
