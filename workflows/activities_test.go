package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue"
	"codectx/pkg/queue/natsq"

	"go.temporal.io/sdk/testsuite"
)

// TestWaitParseResendsAndIsolatesPoison loses one batch (never published)
// whose files include a poison file: WaitParse re-sends the batch after
// ParseTimeout, splits it when it is dead-lettered, and fails only the
// poison file.
func TestWaitParseResendsAndIsolatesPoison(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"a.go": "package a\n\nfunc A() {}\n", "b.py": "def b():\n    pass\n",
		"c.go": "package a\n\nfunc C() {}\n", "d.py": "def d():\n    pass\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	q := embeddedQueue(ctx, t)
	store := blob.NewMem()
	a := &Activities{Store: store, Queue: q, BatchSize: 2, ParseTimeout: 300 * time.Millisecond, PollInterval: 20 * time.Millisecond}

	var aenv testsuite.WorkflowTestSuite
	env := aenv.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	v, err := env.ExecuteActivity(a.Snapshot, SnapshotInput{Tenant: "t", Repo: "r", Location: dir})
	if err != nil {
		t.Fatal(err)
	}
	var plan SnapshotPlan
	if err := v.Get(&plan); err != nil {
		t.Fatal(err)
	}
	if plan.Changed != 4 || plan.Batches != 2 || !pipeline.IsWorktree(plan.Commit) {
		t.Fatalf("plan = %+v, want 4 files in 2 batches of a worktree", plan)
	}
	in := ParseInput{Plan: plan, Run: "run1"}
	stored, err := a.readPlan(ctx, plan.PlanKey)
	if err != nil {
		t.Fatal(err)
	}
	// Only batch 0 reaches the queue: batch 1 is lost. WaitParse publishes
	// every batch not done, so the loss is made where the queue drops it:
	// an empty batch already holds batch 1's message ID (dedup).
	if err := a.publishBatch(ctx, stored, 0, stored.Batches[0], batchID(in, 0)); err != nil {
		t.Fatal(err)
	}
	if err := a.publishBatch(ctx, stored, 1, nil, batchID(in, 1)); err != nil {
		t.Fatal(err)
	}
	w := &pipeline.Workers{Store: store, Queue: q, ParseHook: func(p string) {
		if p == "c.go" {
			panic("poisoned")
		}
	}}
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.RunParse(wctx, queue.Config{AckWait: time.Second, MaxDeliver: 2}) }()
	defer func() { wcancel(); <-done }()

	v, err = env.ExecuteActivity(a.WaitParse, in)
	if err != nil {
		t.Fatal(err)
	}
	var out ParseOutcome
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	if out.Parsed != 3 || !slices.Equal(out.Failed, []string{"c.go"}) || out.Resent < 1 || out.Split != 1 {
		t.Errorf("outcome = %+v, want 3 parsed, c.go failed, a resend, one split", out)
	}

	// The graph stage builds the segment without the failed file.
	key, err := pipeline.BuildSegment(ctx, store, pipeline.GraphJob{Tenant: "t", Repo: "r", Commit: plan.Commit, ManifestKey: plan.ManifestKey, Failed: out.Failed})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Publish(ctx, PublishInput{Tenant: "t", Repo: "r", Commit: plan.Commit, Segment: key}); err != nil {
		t.Fatal(err)
	}
	data, err := store.Get(ctx, pipeline.ManifestKey("t", "r", plan.Commit))
	if err != nil || !json.Valid(data) {
		t.Fatalf("manifest: %v", err)
	}
	if len(out.LeftOut) != 1 || out.LeftOut[0].Path != "c.go" || !strings.Contains(out.LeftOut[0].Reason, "poisoned") {
		t.Errorf("left out = %+v, want c.go with its panic", out.LeftOut)
	}
	// Snapshot again: HEAD points at the commit but c.go was left out, so
	// the commit is planned again with only c.go to parse.
	v, err = env.ExecuteActivity(a.Snapshot, SnapshotInput{Tenant: "t", Repo: "r", Location: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Get(&plan); err != nil {
		t.Fatal(err)
	}
	if plan.Skipped || plan.Changed != 1 {
		t.Errorf("snapshot of an incomplete HEAD = %+v, want c.go planned again", plan)
	}
	// A complete HEAD is skipped.
	full, err := pipeline.BuildSegment(ctx, store, pipeline.GraphJob{Tenant: "t", Repo: "r", Commit: plan.Commit, ManifestKey: plan.ManifestKey})
	if err == nil {
		t.Fatalf("segment %s built although c.go has no parse result", full)
	}
	w.ParseHook = nil
	if err := a.publishBatch(ctx, stored, 9, stored.Batches[1], "again"); err != nil {
		t.Fatal(err)
	}
	for ok := false; !ok; time.Sleep(20 * time.Millisecond) {
		if ok, err = store.Exists(ctx, pipeline.ResultKey("t", stored.Batches[1][0])); err != nil || ctx.Err() != nil {
			t.Fatal(err, ctx.Err())
		}
	}
	if full, err = pipeline.BuildSegment(ctx, store, pipeline.GraphJob{Tenant: "t", Repo: "r", Commit: plan.Commit, ManifestKey: plan.ManifestKey}); err != nil {
		t.Fatal(err)
	}
	if full == key {
		t.Fatalf("the complete segment reuses the key %s of the one with c.go left out", key)
	}
	if _, err := a.Publish(ctx, PublishInput{Tenant: "t", Repo: "r", Commit: plan.Commit, Segment: full, Complete: true}); err != nil {
		t.Fatal(err)
	}
	v, err = env.ExecuteActivity(a.Snapshot, SnapshotInput{Tenant: "t", Repo: "r", Location: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Get(&plan); err != nil {
		t.Fatal(err)
	}
	if !plan.Skipped || plan.Segment != full {
		t.Errorf("snapshot of a complete HEAD = %+v, want skipped at %s", plan, full)
	}
}

// WaitParse and Graph wake on the queue's notification that their jobs
// finished: with an hour between polls they still return at once. A
// notification that never comes (results written without a consumer, or
// wake-ups off) leaves them to the poll, which still finds the results.
func TestWaitWakesAndFallsBackToPolling(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q := embeddedQueue(ctx, t)
	store := blob.NewMem()
	// Parsing takes a while: no result is in when a wait first looks.
	w := &pipeline.Workers{Store: store, Queue: q, ParseHook: func(string) { time.Sleep(50 * time.Millisecond) }}
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan error, 2)
	go func() { done <- w.RunParse(wctx, queue.Config{}) }()
	go func() { done <- w.RunGraph(wctx, queue.Config{}) }()
	defer func() { wcancel(); <-done; <-done }()

	var suite testsuite.WorkflowTestSuite
	// run executes the snapshot of dir, then its parse wait and graph
	// build with a, within limit; fanOut publishes the batches to the
	// workers, else they are parsed here, unannounced.
	run := func(a *Activities, dir string, fanOut bool, limit time.Duration) error {
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivity(a)
		v, err := env.ExecuteActivity(a.Snapshot, SnapshotInput{Tenant: "t", Repo: "r", Location: dir})
		if err != nil {
			return err
		}
		var plan SnapshotPlan
		if err := v.Get(&plan); err != nil {
			return err
		}
		if plan.Changed == 0 {
			return errors.New("nothing to parse")
		}
		in := ParseInput{Plan: plan, Run: "run"}
		if fanOut {
			if _, err := env.ExecuteActivity(a.FanOutParse, in); err != nil {
				return err
			}
		} else {
			stored, err := a.readPlan(ctx, plan.PlanKey)
			if err != nil {
				return err
			}
			for n, files := range stored.Batches {
				data, _ := json.Marshal(pipeline.ParseBatch{Tenant: "t", Repo: "r", Commit: plan.Commit, Location: dir, Batch: n, Files: files})
				if err := w.HandleParse(ctx, queue.Message{Data: data}); err != nil {
					return err
				}
			}
		}
		res := make(chan error, 1)
		go func() {
			if _, err := env.ExecuteActivity(a.WaitParse, in); err != nil {
				res <- fmt.Errorf("wait parse: %w", err)
				return
			}
			_, err := env.ExecuteActivity(a.Graph, GraphInput{Job: pipeline.GraphJob{Tenant: "t", Repo: "r", Commit: plan.Commit, ManifestKey: plan.ManifestKey}, Run: "run"})
			res <- err
		}()
		select {
		case err := <-res:
			return err
		case <-time.After(limit):
			return fmt.Errorf("not done within %v", limit)
		}
	}
	files := func(n int) string {
		dir := t.TempDir()
		for i := range n {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.go", i)), []byte(fmt.Sprintf("package f\n\nfunc F%d() {}\n", i)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	hour := &Activities{Store: store, Queue: q, BatchSize: 2, PollInterval: time.Hour}
	if err := run(hour, files(5), true, 30*time.Second); err != nil {
		t.Fatalf("woken waits: %v", err)
	}
	// Without the wake-up the same waits sleep until their polls. The
	// parse wait may find every result in at its first look (a loaded
	// machine starts it late); the graph wait cannot, since it publishes
	// the job itself and looks at once, so at least one poll passes.
	off := &Activities{Store: store, Queue: q, BatchSize: 2, PollInterval: 2 * time.Second, NoWake: true}
	start := time.Now()
	if err := run(off, files(6), true, 30*time.Second); err != nil {
		t.Fatalf("waits without wake-ups: %v", err)
	}
	if d := time.Since(start); d < off.PollInterval {
		t.Fatalf("waits without wake-ups took %v, less than a poll", d)
	}
	// Parse results no consumer announced: the poll finds them (the graph
	// job is the workers' and wakes its wait).
	poll := &Activities{Store: store, Queue: q, BatchSize: 2, PollInterval: 50 * time.Millisecond}
	if err := run(poll, files(7), false, 30*time.Second); err != nil {
		t.Fatalf("polling waits: %v", err)
	}
}

// embeddedQueue is a queue on an embedded NATS server of the test's own,
// both closed when the test ends.
func embeddedQueue(ctx context.Context, t *testing.T) *natsq.Queue {
	t.Helper()
	ns, err := natsq.StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	q, err := natsq.Connect(ctx, ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	return q
}
