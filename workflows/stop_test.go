package workflows

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/pipeline"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
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
