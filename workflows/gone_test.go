package workflows

import (
	"context"
	"testing"
	"time"

	"codectx/pkg/blob/local"
	"codectx/pkg/index"
	"codectx/pkg/temporalserver"

	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
)

// TestPublishOfADeletedRepositoryLeavesNoHead: a Publish activity that
// moves HEAD after a DELETE ended the repository's workflow removes the
// HEAD again and fails; one whose repository's workflow runs keeps it.
// Before, a publish running as the workflow ended brought the deleted
// repository back: queryable, counted, and naming removed objects.
func TestPublishOfADeletedRepositoryLeavesNoHead(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ts := temporaltest.NewServer(temporaltest.WithT(t), temporaltest.WithBaseServerOptions(temporal.WithDynamicConfigClient(temporalserver.DynamicConfig())))
	c := ts.GetDefaultClient()
	store, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := &Activities{Store: store}
	owner := func(ctx workflow.Context) error { // a RepoWorkflow: runs until signalled
		workflow.GetSignalChannel(ctx, "stop").Receive(ctx, nil)
		return nil
	}
	publish := func(ctx workflow.Context, in PublishInput) error {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: &sdktemporal.RetryPolicy{MaximumAttempts: 1}})
		return workflow.ExecuteActivity(actx, a.Publish, in).Get(ctx, nil)
	}
	ts.NewWorker(TaskQueue, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(owner, workflow.RegisterOptions{Name: "owner"})
		r.RegisterWorkflowWithOptions(publish, workflow.RegisterOptions{Name: "publish"})
		r.RegisterActivity(a)
	})
	opts := func(id string) client.StartWorkflowOptions {
		return client.StartWorkflowOptions{ID: id, TaskQueue: TaskQueue}
	}
	if _, err := c.ExecuteWorkflow(ctx, opts(RepoWorkflowID("beta", "live")), "owner"); err != nil {
		t.Fatal(err)
	}
	defer c.SignalWorkflow(context.Background(), RepoWorkflowID("beta", "live"), "", "stop", nil)
	for _, tc := range []struct {
		repo string
		kept bool
	}{{"live", true}, {"deleted", false}} {
		seg := index.SegmentKey("beta", tc.repo, "c1")
		if err := store.Put(ctx, seg, []byte("segment")); err != nil {
			t.Fatal(err)
		}
		run, err := c.ExecuteWorkflow(ctx, opts(RepoWorkflowID("beta", tc.repo)+"@snapshot-c1"), "publish",
			PublishInput{Tenant: "beta", Repo: tc.repo, Commit: "c1", Segment: seg, Complete: true})
		if err != nil {
			t.Fatal(err)
		}
		err = run.Get(ctx, nil)
		has, herr := store.Exists(ctx, index.HeadKey("beta", tc.repo))
		if herr != nil {
			t.Fatal(herr)
		}
		switch {
		case tc.kept && (err != nil || !has):
			t.Errorf("%s (its workflow runs): publish %v, HEAD there %v; want it published", tc.repo, err, has)
		case !tc.kept && (err == nil || has):
			t.Errorf("%s (its workflow ended): publish %v, HEAD there %v; want an error and no HEAD", tc.repo, err, has)
		}
	}
}
