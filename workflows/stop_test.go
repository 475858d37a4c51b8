package workflows

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/pipeline"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"
)

// WaitParse and Graph, waiting on jobs that no worker takes, end as soon
// as their worker begins to stop, with an error Temporal retries: the
// SDK cancels their context only when its stop timeout has run out.
func TestWaitsEndWhenWorkerStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.go", i)), fmt.Appendf(nil, "package f\n\nfunc F%d() {}\n", i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	q := embeddedQueue(ctx, t)
	a := &Activities{Store: blob.NewMem(), Queue: q, PollInterval: time.Hour}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	v, err := env.ExecuteActivity(a.Snapshot, SnapshotInput{Tenant: "t", Repo: "r", Location: dir})
	if err != nil {
		t.Fatal(err)
	}
	var plan SnapshotPlan
	if err := v.Get(&plan); err != nil {
		t.Fatal(err)
	}
	waits := map[string]func(*testsuite.TestActivityEnvironment) error{
		"WaitParse": func(env *testsuite.TestActivityEnvironment) error {
			_, err := env.ExecuteActivity(a.WaitParse, ParseInput{Plan: plan, Run: "run"})
			return err
		},
		"Graph": func(env *testsuite.TestActivityEnvironment) error {
			_, err := env.ExecuteActivity(a.Graph, GraphInput{Job: pipeline.GraphJob{Tenant: "t", Repo: "r", Commit: plan.Commit, ManifestKey: plan.ManifestKey}, Run: "run"})
			return err
		},
	}
	for name, wait := range waits {
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivity(a)
		stop := make(chan struct{})
		env.SetWorkerStopChannel(stop)
		res := make(chan error, 1)
		go func() { res <- wait(env) }()
		time.Sleep(200 * time.Millisecond) // well into the wait: no result comes
		stopAt := time.Now()
		close(stop)
		select {
		case err := <-res:
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != errWorkerStopping || app.NonRetryable() {
				t.Errorf("%s after the worker's stop: %v, want a retryable %s error", name, err, errWorkerStopping)
			}
			t.Logf("%s ended %v after the worker's stop", name, time.Since(stopAt).Round(time.Millisecond))
		case <-time.After(5 * time.Second):
			t.Fatalf("%s still waiting 5s after its worker began to stop", name)
		}
	}
}

// IndexRepo, waiting in OrgWorkflow for a repository's snapshot, ends as
// soon as its worker begins to stop instead of holding the stop for the
// worker's stop timeout (10 s, as the roles and up set it); the org index
// still completes on the next worker, with no second snapshot.
func TestOrgIndexStopsPromptly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ts, c := temporalTest(t)
	var snapshots atomic.Int32
	start := func() worker.Worker {
		return orgWorker(ts, func(ctx workflow.Context, in SnapshotInput) (SnapshotResult, error) {
			if !workflow.IsReplaying(ctx) {
				snapshots.Add(1)
			}
			if err := workflow.Sleep(ctx, 3*time.Second); err != nil {
				return SnapshotResult{}, err
			}
			return SnapshotResult{Commit: "c-" + in.Repo}, nil
		})
	}
	w := start()
	const loc = "loc/one"
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: TaskQueue}, OrgWorkflow, OrgInput{Tenant: "t", Locations: []string{loc}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		st, err := Status(ctx, c, "t", pipeline.RepoName(loc))
		if err == nil && st.State == StateIndexing {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("never indexing: %+v, %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // IndexRepo polls the status
	stopAt := time.Now()
	w.Stop()
	took := time.Since(stopAt)
	t.Logf("worker stopped in %v", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("the worker's stop took %v while IndexRepo waited; want well under its 10 s stop timeout", took.Round(time.Millisecond))
	}
	start()
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("org index after the stop: %v", err)
	}
	// The next attempt waited for the same push: one snapshot, not a
	// second for a push made again.
	if n := snapshots.Load(); n != 1 {
		t.Errorf("%d snapshots of %s, want 1", n, loc)
	}
}

// orgWorker runs OrgWorkflow, RepoWorkflow and the tenant lease on ts with
// snapshot as the SnapshotWorkflow, and the stop timeout of the roles.
func orgWorker(ts *temporaltest.TestServer, snapshot func(workflow.Context, SnapshotInput) (SnapshotResult, error)) worker.Worker {
	return ts.NewWorkerWithOptions(TaskQueue, func(r worker.Registry) {
		r.RegisterWorkflow(RepoWorkflow)
		r.RegisterWorkflow(TenantLeaseWorkflow)
		r.RegisterWorkflow(OrgWorkflow)
		r.RegisterWorkflowWithOptions(snapshot, workflow.RegisterOptions{Name: "SnapshotWorkflow"})
		r.RegisterActivity(&Activities{PollInterval: 50 * time.Millisecond})
	}, worker.Options{WorkerStopTimeout: 10 * time.Second})
}

// A repository whose every snapshot fails is tried indexRepoTries times by
// OrgWorkflow, not orgAttempts (the bound left for stops), and the org
// index fails naming it.
func TestOrgIndexGivesUpAfterTries(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ts, c := temporalTest(t)
	var snapshots atomic.Int32
	orgWorker(ts, func(ctx workflow.Context, in SnapshotInput) (SnapshotResult, error) {
		if !workflow.IsReplaying(ctx) {
			snapshots.Add(1)
		}
		return SnapshotResult{}, temporal.NewNonRetryableApplicationError("parse: the store is full", "Infra", nil)
	})
	const loc = "loc/broken"
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: TaskQueue}, OrgWorkflow, OrgInput{Tenant: "t", Locations: []string{loc}})
	if err != nil {
		t.Fatal(err)
	}
	err = run.Get(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), loc) || !strings.Contains(err.Error(), "indexing failed") {
		t.Fatalf("org index: %v, want it failed for %s with its snapshot's (redacted) error", err, loc)
	}
	if n := snapshots.Load(); n != indexRepoTries {
		t.Errorf("%d snapshots of %s, want %d", n, loc, indexRepoTries)
	}
}
