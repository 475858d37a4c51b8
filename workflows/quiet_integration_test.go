package workflows_test

import (
	"context"
	"testing"
	"time"

	"codectx/pkg/index"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue"
	"codectx/workflows"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"
)

// TestProgressQuiet: with no parse worker running, the snapshot's
// progress says how long its parse stage has seen no result (it showed
// an unchanging "parse" and nothing else); once a worker runs, the
// snapshot ends. The heartbeat that carries it reaches Temporal within
// 0.8 of the heartbeat timeout, so this takes about 20 s.
func TestProgressQuiet(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a heartbeat (about 20 s)")
	}
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ts := newTestServer(temporaltest.WithT(t))
	c := ts.GetDefaultClient()
	q, _ := startQueue(ctx, t)
	store := tempStore(t)
	acts := &workflows.Activities{Store: store, Queue: q, CacheDir: t.TempDir(), PollInterval: 50 * time.Millisecond}
	ts.NewWorker(workflows.TaskQueue, func(r worker.Registry) { workflows.Register(r, acts) })

	fx := newFixture(t, "quiet")
	commit := fx.commit(t, map[string]string{"a.go": "package a\n\n// A is a.\nfunc A() {}\n"})
	if _, err := workflows.SignalPush(ctx, c, workflows.Push{Repo: "quiet", Location: "quiet", Commit: commit}); err != nil {
		t.Fatal(err)
	}
	var p workflows.SnapshotProgress
	for p.Quiet < 5 {
		select {
		case <-ctx.Done():
			t.Fatalf("no parse worker: progress %+v; want the parse stage quiet for 5 s or more", p)
		case <-time.After(500 * time.Millisecond):
		}
		st, err := workflows.Status(ctx, c, index.DefaultTenant, "quiet")
		if err != nil || st.Child == "" {
			continue
		}
		if got, err := workflows.Progress(ctx, c, st.Child); err == nil {
			p = got
		}
	}
	if p.Stage != workflows.StageParse {
		t.Errorf("quiet progress %+v, want the parse stage", p)
	}
	w := &pipeline.Workers{Store: store, Queue: q}
	wctx, wcancel := context.WithCancel(ctx)
	defer runWorkers(wctx, t, wcancel, queue.Config{Workers: 1}, w.RunParse, w.RunEmbed, w.RunGraph)()
	waitCovered(ctx, t, c, "quiet", 1)
}
