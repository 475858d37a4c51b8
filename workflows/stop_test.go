package workflows

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/pipeline"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
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
	ctx, ts, c := orgTest(t)
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
	run := startOrg(ctx, t, c, loc)
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
	// Stop once the server holds the push count IndexRepo heartbeats
	// (its first heartbeat is sent at once): the next attempt must wait
	// for that push, not push again.
	for !heldPushCount(ctx, t, c, run.GetID()) {
		if ctx.Err() != nil {
			t.Fatal("IndexRepo never heartbeated its push count")
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// heldPushCount reports whether the server holds, for a pending activity
// of the workflow (IndexRepo), heartbeat details with a known push count.
func heldPushCount(ctx context.Context, t *testing.T, c client.Client, id string) bool {
	t.Helper()
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return false
	}
	for _, pa := range d.GetPendingActivities() {
		var want, failed int
		if pa.GetHeartbeatDetails() != nil && converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &want, &failed) == nil && want > 0 {
			return true
		}
	}
	return false
}

// orgTest starts a Temporal test server for an org-index test (skipped
// under -short), with a context that ends within 2 minutes.
func orgTest(t *testing.T) (context.Context, *temporaltest.TestServer, client.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ts, c := temporalTest(t)
	return ctx, ts, c
}

// startOrg starts OrgWorkflow indexing loc for tenant "t".
func startOrg(ctx context.Context, t *testing.T, c client.Client, loc string) client.WorkflowRun {
	t.Helper()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: TaskQueue}, OrgWorkflow, OrgInput{Tenant: "t", Locations: []string{loc}})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// orgWorker runs OrgWorkflow, RepoWorkflow and the tenant lease on ts with
// snapshot as the SnapshotWorkflow, and the stop timeout of the roles.
func orgWorker(ts *temporaltest.TestServer, snapshot func(workflow.Context, SnapshotInput) (SnapshotResult, error)) worker.Worker {
	return ts.NewWorkerWithOptions(TaskQueue, func(r worker.Registry) { orgRegister(r, snapshot) },
		worker.Options{WorkerStopTimeout: 10 * time.Second})
}

// orgRegister registers what orgWorker runs on r.
func orgRegister(r worker.Registry, snapshot func(workflow.Context, SnapshotInput) (SnapshotResult, error)) {
	r.RegisterWorkflow(RepoWorkflow)
	r.RegisterWorkflow(TenantLeaseWorkflow)
	r.RegisterWorkflow(OrgWorkflow)
	r.RegisterWorkflowWithOptions(snapshot, workflow.RegisterOptions{Name: "SnapshotWorkflow"})
	r.RegisterActivity(&Activities{PollInterval: 50 * time.Millisecond})
}

// A repository whose every snapshot fails is tried indexRepoTries times by
// OrgWorkflow, not orgAttempts (the bound left for stops), and the org
// index fails naming it. Each snapshot takes a moment, so each attempt
// heartbeats before its failure and the SDK holds back the heartbeat that
// counts the failure: the count still reaches the next attempt.
func TestOrgIndexGivesUpAfterTries(t *testing.T) {
	ctx, ts, c := orgTest(t)
	var snapshots atomic.Int32
	orgWorker(ts, func(ctx workflow.Context, in SnapshotInput) (SnapshotResult, error) {
		if !workflow.IsReplaying(ctx) {
			snapshots.Add(1)
		}
		if err := workflow.Sleep(ctx, 300*time.Millisecond); err != nil {
			return SnapshotResult{}, err
		}
		return SnapshotResult{}, temporal.NewNonRetryableApplicationError("parse: the store is full", "Infra", nil)
	})
	const loc = "loc/broken"
	run := startOrg(ctx, t, c, loc)
	err := run.Get(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), loc) || !strings.Contains(err.Error(), "indexing failed") {
		t.Fatalf("org index: %v, want it failed for %s with its snapshot's (redacted) error", err, loc)
	}
	if n := snapshots.Load(); n != indexRepoTries {
		t.Errorf("%d snapshots of %s, want %d", n, loc, indexRepoTries)
	}
}

// Attempts of IndexRepo its worker's stops cut short do not count toward
// indexRepoTries: after two stops, a failed snapshot is retried and the
// org index succeeds (before, the third attempt's failure was final).
func TestOrgIndexRetriesAfterStops(t *testing.T) {
	ctx, ts, c := orgTest(t)
	var snapshots atomic.Int32
	start := func() worker.Worker {
		return orgWorker(ts, func(ctx workflow.Context, in SnapshotInput) (SnapshotResult, error) {
			// The first snapshot fails once the test releases it; the
			// side effect keeps the choice on replay on the next worker.
			var first bool
			if err := workflow.SideEffect(ctx, func(workflow.Context) any { return snapshots.Add(1) == 1 }).Get(&first); err != nil {
				return SnapshotResult{}, err
			}
			if !first {
				return SnapshotResult{Commit: "c-" + in.Repo}, nil
			}
			workflow.GetSignalChannel(ctx, "release").Receive(ctx, nil)
			return SnapshotResult{}, temporal.NewNonRetryableApplicationError("parse: the store is full", "Infra", nil)
		})
	}
	w := start()
	const loc = "loc/stopped"
	run := startOrg(ctx, t, c, loc)
	for attempt := int32(1); attempt <= 2; attempt++ {
		waitIndexAttempt(ctx, t, c, run.GetID(), attempt)
		w.Stop()
		w = start()
	}
	waitIndexAttempt(ctx, t, c, run.GetID(), 3)
	st, err := Status(ctx, c, "t", pipeline.RepoName(loc))
	if err != nil || st.Child == "" {
		t.Fatalf("no snapshot running: %+v, %v", st, err)
	}
	if err := c.SignalWorkflow(ctx, st.Child, "", "release", nil); err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("org index after two stops and one failed snapshot: %v", err)
	}
	if n := snapshots.Load(); n != 2 {
		t.Errorf("%d snapshots of %s, want 2 (the failed one, then its retry)", n, loc)
	}
}

// waitIndexAttempt waits until attempt of the IndexRepo of the org
// workflow id runs on a worker and a push count is recorded in its
// heartbeat (by it or an earlier attempt).
func waitIndexAttempt(ctx context.Context, t *testing.T, c client.Client, id string, attempt int32) {
	t.Helper()
	for {
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, pa := range d.GetPendingActivities() {
			var want int
			if pa.GetAttempt() == attempt && pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED && pa.GetHeartbeatDetails() != nil &&
				converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &want) == nil && want > 0 {
				time.Sleep(200 * time.Millisecond) // into its wait
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("attempt %d of IndexRepo never ran: %+v", attempt, d.GetPendingActivities())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An attempt of IndexRepo whose first status read failed records the
// push count once it knows it, in its first heartbeat: the SDK sends an
// attempt's first heartbeat at once and holds later ones back for 80% of
// the heartbeat timeout (48 s), so a count recorded after an unknown one
// reached the server only if the SDK's flush on the worker's stop beat
// the attempt's end (about half the runs), and never if the worker died.
// After the stop the server holds the count and the next attempt waits
// for the same push: one snapshot (two, before, when the count was lost).
func TestIndexRepoStatusFailsThenStop(t *testing.T) {
	ctx, ts, c := orgTest(t)
	var snapshots atomic.Int32
	snapshot := func(ctx workflow.Context, in SnapshotInput) (SnapshotResult, error) {
		if !workflow.IsReplaying(ctx) {
			snapshots.Add(1)
		}
		if err := workflow.Sleep(ctx, 3*time.Second); err != nil {
			return SnapshotResult{}, err
		}
		return SnapshotResult{Commit: "c-" + in.Repo}, nil
	}
	// The first attempt's first status read fails (its push is sent).
	fails := &failQueries{}
	fails.n.Store(1)
	spy := &beatSpy{}
	w := worker.New(ts.NewClientWithOptions(client.Options{Interceptors: []interceptor.ClientInterceptor{fails}}), TaskQueue,
		worker.Options{WorkerStopTimeout: 10 * time.Second, Interceptors: []interceptor.WorkerInterceptor{spy}})
	orgRegister(w, snapshot)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	const loc = "loc/unknown"
	run := startOrg(ctx, t, c, loc)
	// Stop once the attempt knows the push count (not once the server
	// holds it: that is what this test is about).
	for !slices.ContainsFunc(spy.list(), func(n int) bool { return n > 0 }) {
		if ctx.Err() != nil {
			t.Fatalf("IndexRepo never knew its push count: heartbeats %v", spy.list())
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.Stop()
	// Describe shows the heartbeat details the server holds.
	d, err := c.DescribeWorkflowExecution(ctx, run.GetID(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.GetPendingActivities()) == 0 {
		t.Fatal("no pending IndexRepo after the stop")
	}
	for _, pa := range d.GetPendingActivities() {
		var want int
		if err := converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &want); err != nil || want <= 0 {
			t.Errorf("after the stop the server holds push count %d (%v) for attempt %d, want the known count", want, err, pa.GetAttempt())
		}
	}
	beats := spy.list()
	if len(beats) == 0 || beats[0] <= 0 {
		t.Errorf("heartbeats of the first attempt %v, want the first a push count", beats)
	}
	orgWorker(ts, snapshot)
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("org index after the stop: %v", err)
	}
	if n := snapshots.Load(); n != 1 {
		t.Errorf("%d snapshots of %s, want 1", n, loc)
	}
}

// beatSpy is a worker interceptor that lists its activities' heartbeats
// (the first value of each).
type beatSpy struct {
	interceptor.WorkerInterceptorBase
	mu    sync.Mutex
	beats []int
}

func (s *beatSpy) list() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.beats)
}

func (s *beatSpy) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &spyInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, spy: s}
}

type spyInbound struct {
	interceptor.ActivityInboundInterceptorBase
	spy *beatSpy
}

func (i *spyInbound) Init(out interceptor.ActivityOutboundInterceptor) error {
	return i.Next.Init(&spyOutbound{ActivityOutboundInterceptorBase: interceptor.ActivityOutboundInterceptorBase{Next: out}, spy: i.spy})
}

type spyOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	spy *beatSpy
}

func (o *spyOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	if len(details) > 0 {
		if n, ok := details[0].(int); ok {
			o.spy.mu.Lock()
			o.spy.beats = append(o.spy.beats, n)
			o.spy.mu.Unlock()
		}
	}
	o.Next.RecordHeartbeat(ctx, details...)
}

// failQueries is a client interceptor failing the first n queries.
type failQueries struct {
	interceptor.ClientInterceptorBase
	n atomic.Int32
}

func (f *failQueries) InterceptClient(next interceptor.ClientOutboundInterceptor) interceptor.ClientOutboundInterceptor {
	return &failQueriesOut{ClientOutboundInterceptorBase: interceptor.ClientOutboundInterceptorBase{Next: next}, f: f}
}

type failQueriesOut struct {
	interceptor.ClientOutboundInterceptorBase
	f *failQueries
}

func (o *failQueriesOut) QueryWorkflow(ctx context.Context, in *interceptor.ClientQueryWorkflowInput) (converter.EncodedValue, error) {
	if o.f.n.Add(-1) >= 0 {
		return nil, errors.New("query failed (test)")
	}
	return o.Next.QueryWorkflow(ctx, in)
}

// lastBeat reads the heartbeat of an earlier IndexRepo worker, the push
// count alone, as that count and no failures.
func TestLastBeatReadsOldForm(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	read := func(ctx context.Context) ([]int, error) {
		b := lastBeat(ctx)
		return []int{b.want, b.failed}, nil
	}
	for _, tc := range []struct {
		details any
		want    []int
	}{{nil, []int{0, 0}}, {7, []int{7, 0}}} {
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivityWithOptions(read, activity.RegisterOptions{Name: "read"})
		if tc.details != nil {
			env.SetHeartbeatDetails(tc.details)
		}
		v, err := env.ExecuteActivity("read")
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		if err := v.Get(&got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("heartbeat %v read as (want, failed) %v, want %v", tc.details, got, tc.want)
		}
	}
}
