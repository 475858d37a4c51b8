package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	"codectx/pkg/index"
	"codectx/pkg/pipeline"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// SignalPush sends a push to the repository's RepoWorkflow, starting it if
// it is not running (signal-with-start). An empty Tenant is
// index.DefaultTenant; an empty Repo is derived from Location.
func SignalPush(ctx context.Context, c client.Client, p Push) (runID string, err error) {
	if p.Tenant == "" {
		p.Tenant = index.DefaultTenant
	}
	if p.Repo == "" {
		p.Repo = pipeline.RepoName(p.Location)
	}
	if p.Location == "" || !index.ValidTenant(p.Tenant) || !index.ValidName(p.Repo) {
		return "", fmt.Errorf("push: need a location and valid tenant %q and repository %q", p.Tenant, p.Repo)
	}
	id := RepoWorkflowID(p.Tenant, p.Repo)
	run, err := c.SignalWithStartWorkflow(ctx, id, PushSignal, p,
		client.StartWorkflowOptions{ID: id, TaskQueue: TaskQueue},
		RepoWorkflow, p.Tenant, p.Repo, (*RepoCarry)(nil))
	if err != nil {
		return "", fmt.Errorf("push %s/%s: %w", p.Tenant, p.Repo, err)
	}
	return run.GetRunID(), nil
}

// Status queries the RepoWorkflow of tenant/repo.
func Status(ctx context.Context, c client.Client, tenant, repo string) (RepoStatus, error) {
	var st RepoStatus
	v, err := c.QueryWorkflow(ctx, RepoWorkflowID(tenant, repo), "", StatusQuery)
	if err != nil {
		return st, fmt.Errorf("status %s/%s: %w", tenant, repo, err)
	}
	if err := v.Get(&st); err != nil {
		return st, fmt.Errorf("status %s/%s: %w", tenant, repo, err)
	}
	return st, nil
}

// Progress asks the running SnapshotWorkflow child (RepoStatus.Child) how
// far it is. During the parse stage the counts of its WaitParse heartbeat,
// when it has recorded one, give the files parsed and failed so far.
func Progress(ctx context.Context, c client.Client, child string) (SnapshotProgress, error) {
	var p SnapshotProgress
	v, err := c.QueryWorkflow(ctx, child, "", ProgressQuery)
	if err != nil {
		return p, fmt.Errorf("progress of %s: %w", child, err)
	}
	if err := v.Get(&p); err != nil {
		return p, fmt.Errorf("progress of %s: %w", child, err)
	}
	if p.Stage != StageParse {
		return p, nil
	}
	d, err := c.DescribeWorkflowExecution(ctx, child, "")
	if err != nil {
		return p, fmt.Errorf("describe %s: %w", child, err)
	}
	for _, pa := range d.GetPendingActivities() {
		if pa.GetActivityType().GetName() != "WaitParse" || pa.GetHeartbeatDetails() == nil {
			continue
		}
		var hb ParseHeartbeat
		if err := converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &hb); err != nil || hb.Planned != p.Planned {
			continue // a heartbeat of another form (an older worker)
		}
		p.Failed = hb.Failed
		p.Parsed = max(0, hb.Planned-hb.Missing-hb.Failed)
	}
	return p, nil
}

// IndexRepoInput is the input of IndexRepo.
type IndexRepoInput struct {
	Tenant, Location string
}

// indexRepoTries is how many attempts of IndexRepo (its push refused or
// its snapshot failed) OrgWorkflow makes before it gives a repository up.
// An attempt its worker's stop cut short counts too, so after stops fewer
// failures are retried; orgAttempts bounds the stops.
const indexRepoTries = 3

// IndexRepo pushes the location's HEAD to its RepoWorkflow and waits,
// heartbeating, until a finished snapshot covers that push. It fails if
// that snapshot failed: retryably before attempt indexRepoTries, then for
// good. A stop of its worker ends the wait at once (errStopping): the
// next attempt waits for the same push (resumed).
func (a *Activities) IndexRepo(ctx context.Context, in IndexRepoInput) (RepoStatus, error) {
	st, err := a.indexRepo(ctx, in)
	var app *temporal.ApplicationError
	if err != nil && ctx.Err() == nil && !(errors.As(err, &app) && app.Type() == errWorkerStopping) &&
		activity.IsActivity(ctx) && activity.GetInfo(ctx).Attempt >= indexRepoTries {
		return st, temporal.NewNonRetryableApplicationError(err.Error(), "IndexRepoFailed", nil)
	}
	return st, err
}

func (a *Activities) indexRepo(ctx context.Context, in IndexRepoInput) (RepoStatus, error) {
	c := activity.GetClient(ctx)
	tenant := in.Tenant
	if tenant == "" {
		tenant = index.DefaultTenant
	}
	repo := pipeline.RepoName(in.Location)
	// want is the count of pushes received once this one was (0: not yet
	// known), recorded in the heartbeat: an attempt after one its worker's
	// stop cut short waits for the same push rather than pushing again,
	// which would cost the repository another snapshot (the one in
	// progress covers only what it had received when it began).
	want := resumed(ctx, c, tenant, repo)
	if want == 0 {
		if _, err := SignalPush(ctx, c, Push{Tenant: tenant, Repo: repo, Location: in.Location}); err != nil {
			return RepoStatus{}, err
		}
	}
	// Queries see every signal delivered before them, so the first answer's
	// Received counts this push.
	tick := time.NewTicker(a.poll())
	defer tick.Stop()
	for {
		st, err := Status(ctx, c, tenant, repo)
		if err == nil {
			if want == 0 {
				want = st.Received
			}
			if st.Covered >= want {
				if st.LastError != "" {
					return st, errors.New(st.LastError)
				}
				return st, nil
			}
		} // else: the workflow may not have run its first task yet
		activity.RecordHeartbeat(ctx, want)
		select {
		case <-ctx.Done():
			return RepoStatus{}, ctx.Err()
		case <-stopping(ctx):
			return RepoStatus{}, errStopping()
		case <-tick.C:
		}
	}
}

// resumed is the push count an earlier attempt of this IndexRepo recorded
// in its heartbeat, if the repository's workflow still counts it and has
// not yet answered it with a failure (a failed snapshot is pushed again);
// 0 means push.
func resumed(ctx context.Context, c client.Client, tenant, repo string) int {
	if !activity.IsActivity(ctx) || !activity.HasHeartbeatDetails(ctx) {
		return 0
	}
	var want int
	if err := activity.GetHeartbeatDetails(ctx, &want); err != nil || want <= 0 {
		return 0
	}
	st, err := Status(ctx, c, tenant, repo)
	if err != nil || st.Received < want || (st.Covered >= want && st.LastError != "") {
		return 0 // a new run of the workflow, or the push failed: push again
	}
	return want
}

// EnsureReconcileSchedule creates (or updates) the Temporal schedule id
// that runs OrgWorkflow(in) every interval, skipping a run while the
// previous one is still going.
func EnsureReconcileSchedule(ctx context.Context, c client.Client, id string, in OrgInput, every time.Duration) error {
	if every <= 0 {
		return fmt.Errorf("schedule %s: interval %v must be positive", id, every)
	}
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}}
	action := &client.ScheduleWorkflowAction{ID: id + "-org", Workflow: OrgWorkflow, Args: []any{in}, TaskQueue: TaskQueue}
	sc := c.ScheduleClient()
	_, err := sc.Create(ctx, client.ScheduleOptions{ID: id, Spec: spec, Action: action, Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP})
	if err == nil {
		return nil
	}
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return fmt.Errorf("schedule %s: %w", id, err)
	}
	err = sc.GetHandle(ctx, id).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(u client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := u.Description.Schedule
			s.Spec = &spec
			s.Action = action
			if s.Policy == nil {
				s.Policy = &client.SchedulePolicies{}
			}
			s.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
			return &client.ScheduleUpdate{Schedule: &s}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("schedule %s: update: %w", id, err)
	}
	return nil
}
