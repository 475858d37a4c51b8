package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/blob/local"
	"codectx/pkg/dense"
	"codectx/pkg/dense/densetest"
	"codectx/pkg/index"
	"codectx/pkg/temporalserver"
	"codectx/pkg/vector"
	vlocal "codectx/pkg/vector/local"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
)

// temporalTest starts a Temporal test server with the project's dynamic
// configuration, and returns it with its default client.
func temporalTest(t *testing.T) (*temporaltest.TestServer, client.Client) {
	t.Helper()
	ts := temporaltest.NewServer(temporaltest.WithT(t), temporaltest.WithBaseServerOptions(temporal.WithDynamicConfigClient(temporalserver.DynamicConfig())))
	return ts, ts.GetDefaultClient()
}

// localStore is a local blob store in a temporary directory.
func localStore(t *testing.T) *blob.Bucket {
	t.Helper()
	store, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return store
}

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
	ts, c := temporalTest(t)
	store := localStore(t)
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

// listHold is a vector store whose first List of armed blocks until
// release: the point where a GC has read what to keep and listed the
// points it is about to prune.
type listHold struct {
	vector.Store
	reached, release chan struct{}
	once             sync.Once
}

func (h *listHold) List(ctx context.Context, c vector.Collection, f vector.Filter) ([]vector.Point, error) {
	pts, err := h.Store.List(ctx, c, f)
	h.once.Do(func() {
		close(h.reached)
		<-h.release
	})
	return pts, err
}

// TestGCOfADeletedRepositoryKeepsNewPoints: a GC whose repository was
// deleted, and indexed again under the same name, while it listed the
// vector points to prune removes none of them (they are the new
// repository's). Before, only the GC's start was checked, and the new
// repository lost its vectors.
func TestGCOfADeletedRepositoryKeepsNewPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ts, c := temporalTest(t)
	store := localStore(t)
	emb := &densetest.Words{N: 8}
	vs := &listHold{Store: vlocal.New(store, vlocal.Float32), reached: make(chan struct{}), release: make(chan struct{})}
	col := dense.Collection(emb)
	var pts []vector.Point
	for _, h := range []string{"h1", "h2", "h3"} {
		pts = append(pts, vector.Point{ID: vector.PointID("beta", "gcr", h), Vector: make([]float32, 8), Payload: vector.Payload{Tenant: "beta", Repo: "gcr", Hash: h}})
		pts[len(pts)-1].Vector[0] = 1
	}
	if err := vs.Upsert(ctx, col, pts); err != nil {
		t.Fatal(err)
	}
	a := &Activities{Store: store, Embedder: emb, Vectors: vs}
	owner := func(ctx workflow.Context) error { // a RepoWorkflow: starts a snapshot, runs until signalled
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:        RepoWorkflowID("beta", "gcr") + "@snapshot-c1",
			ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
		})
		if err := workflow.ExecuteChildWorkflow(cctx, "gc", GCInput{Tenant: "beta", Repo: "gcr"}).GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			return err
		}
		workflow.GetSignalChannel(ctx, "stop").Receive(ctx, nil)
		return nil
	}
	idle := func(ctx workflow.Context) error { // the repository indexed again
		workflow.GetSignalChannel(ctx, "stop").Receive(ctx, nil)
		return nil
	}
	var res GCResult
	gc := func(ctx workflow.Context, in GCInput) (GCResult, error) {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: &sdktemporal.RetryPolicy{MaximumAttempts: 1}})
		err := workflow.ExecuteActivity(actx, a.GC, in).Get(ctx, &res)
		return res, err
	}
	ts.NewWorker(TaskQueue, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(owner, workflow.RegisterOptions{Name: "owner"})
		r.RegisterWorkflowWithOptions(idle, workflow.RegisterOptions{Name: "idle"})
		r.RegisterWorkflowWithOptions(gc, workflow.RegisterOptions{Name: "gc"})
		r.RegisterActivity(a)
	})
	id := RepoWorkflowID("beta", "gcr")
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: TaskQueue}, "owner"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-vs.reached: // the GC listed the points
	case <-ctx.Done():
		t.Fatal("the GC never listed the points")
	}
	// DELETE ends the run; the repository is indexed again (a new run).
	if err := c.SignalWorkflow(ctx, id, "", "stop", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: TaskQueue}, "idle"); err != nil {
		t.Fatal(err)
	}
	defer c.SignalWorkflow(context.Background(), id, "", "stop", nil)
	close(vs.release)
	if err := c.GetWorkflow(ctx, id+"@snapshot-c1", "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	left, err := vs.Store.List(ctx, col, vector.Filter{Tenant: "beta", Repos: []string{"gcr"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != len(pts) || res.Points != 0 {
		t.Errorf("the GC pruned %d points and left %d of %d; want none pruned", res.Points, len(left), len(pts))
	}
}
