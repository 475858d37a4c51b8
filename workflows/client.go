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

// StatusOpen is Status, and whether the RepoWorkflow runs. Temporal
// answers queries of closed workflows too: the one a DELETE of its
// repository terminated goes on telling the deleted repository's last
// counts and commit (and where it was fetched from, which a reindex of it
// takes). One query when the workflow runs; a closed one is asked again.
func StatusOpen(ctx context.Context, c client.Client, tenant, repo string) (st RepoStatus, open bool, err error) {
	resp, err := c.QueryWorkflowWithOptions(ctx, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID: RepoWorkflowID(tenant, repo), QueryType: StatusQuery,
		QueryRejectCondition: enumspb.QUERY_REJECT_CONDITION_NOT_OPEN,
	})
	switch {
	case err != nil:
		return st, false, fmt.Errorf("status %s/%s: %w", tenant, repo, err)
	case resp.QueryRejected != nil:
		st, err = Status(ctx, c, tenant, repo)
		return st, false, err
	case resp.QueryResult == nil:
		return st, false, fmt.Errorf("status %s/%s: no answer", tenant, repo)
	}
	if err := resp.QueryResult.Get(&st); err != nil {
		return st, false, fmt.Errorf("status %s/%s: %w", tenant, repo, err)
	}
	return st, true, nil
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
	if p.Stage != StageParse && p.Stage != StageEmbed {
		return p, nil
	}
	d, err := c.DescribeWorkflowExecution(ctx, child, "")
	if err != nil {
		return p, fmt.Errorf("describe %s: %w", child, err)
	}
	for _, pa := range d.GetPendingActivities() {
		if pa.GetHeartbeatDetails() == nil {
			continue
		}
		switch pa.GetActivityType().GetName() {
		case "WaitParse":
			var hb ParseHeartbeat
			if err := converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &hb); err != nil || hb.Planned != p.Planned {
				continue // a heartbeat of another form (an older worker)
			}
			p.Failed = hb.Failed
			p.Parsed = max(0, hb.Planned-hb.Missing-hb.Failed)
			p.Quiet = hb.Quiet
		case "WaitEmbed":
			var hb map[string]int
			if err := converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &hb); err == nil {
				p.Quiet = hb["quiet"]
			}
		}
	}
	return p, nil
}

// IndexRepoInput is the input of IndexRepo.
type IndexRepoInput struct {
	Tenant, Location string
}

// indexRepoTries is how many failures of IndexRepo (its push refused or
// its snapshot failed) OrgWorkflow tries a repository for before it gives
// it up. The failures are counted in the heartbeat (indexBeat), not read
// off the attempt number: an attempt its worker's stop cut short (or one
// that timed out, its worker gone) is no failure of the repository, and
// orgAttempts bounds those.
const indexRepoTries = 3

// resumeTries bounds the status reads resumed makes before it pushes again.
const resumeTries = 5

// IndexRepo pushes the location's HEAD to its RepoWorkflow and waits,
// heartbeating, until a finished snapshot covers that push. It fails if
// that snapshot failed: retryably until its indexRepoTries-th failure,
// then for good. A stop of its worker ends the wait at once (errStopping):
// the next attempt waits for the same push (resumed).
func (a *Activities) IndexRepo(ctx context.Context, in IndexRepoInput) (RepoStatus, error) {
	b := lastBeat(ctx)
	st, err := a.indexRepo(ctx, in, &b)
	var app *temporal.ApplicationError
	if err == nil || ctx.Err() != nil || (errors.As(err, &app) && app.Type() == errWorkerStopping) {
		return st, err // a cancel stays a cancel; a stop is no failure
	}
	// Count the failure for the next attempt, which pushes again (want
	// 0). The SDK sends a heartbeat it holds back (see indexRepo) before
	// it reports the attempt's failure, so the count reaches the next
	// attempt (TestOrgIndexGivesUpAfterTries); only were its 48 s timer to
	// run out at that very moment could the count be lost, costing one
	// more try.
	b = indexBeat{failed: b.failed + 1}
	b.record(ctx)
	if b.failed >= indexRepoTries {
		return st, temporal.NewNonRetryableApplicationError(err.Error(), "IndexRepoFailed", nil)
	}
	return st, err
}

// indexBeat is what an attempt of IndexRepo records in its heartbeat for
// the next one: want, the count of pushes received once its push was (0:
// not known, push again), and failed, the attempts that failed so far.
// They are recorded as two values, want first: a worker of the earlier
// form, which recorded and reads want alone, reads this form's want, and
// its form reads here as no failures.
type indexBeat struct {
	want, failed int
}

func (b indexBeat) record(ctx context.Context) {
	activity.RecordHeartbeat(ctx, b.want, b.failed)
}

// lastBeat is the indexBeat an earlier attempt recorded (zero if none or
// unreadable).
func lastBeat(ctx context.Context) indexBeat {
	var b indexBeat
	if !activity.IsActivity(ctx) || !activity.HasHeartbeatDetails(ctx) {
		return b
	}
	if err := activity.GetHeartbeatDetails(ctx, &b.want, &b.failed); err != nil {
		return indexBeat{}
	}
	return b
}

func (a *Activities) indexRepo(ctx context.Context, in IndexRepoInput, b *indexBeat) (RepoStatus, error) {
	c := activity.GetClient(ctx)
	tenant := in.Tenant
	if tenant == "" {
		tenant = index.DefaultTenant
	}
	repo := pipeline.RepoName(in.Location)
	// want is recorded in the heartbeat: an attempt after one its worker's
	// stop cut short waits for the same push rather than pushing again,
	// which would cost the repository another snapshot (the one in
	// progress covers only what it had received when it began).
	b.want = resumed(ctx, c, tenant, repo, b.want, a.poll())
	if b.want == 0 {
		if _, err := SignalPush(ctx, c, Push{Tenant: tenant, Repo: repo, Location: in.Location}); err != nil {
			return RepoStatus{}, err
		}
	}
	// The SDK sends an attempt's first heartbeat at once but holds later
	// ones back for 80% of the heartbeat timeout (48 s), sending the last
	// when that runs out, on a stop of the worker or as the attempt ends.
	// A held heartbeat is lost if the worker dies, and often on a stop:
	// the SDK's flush on the stop races the attempt's end (a count held
	// after an unknown one was lost in half the runs of
	// TestIndexRepoStatusFailsThenStop). So the first heartbeat waits for
	// the push count, unless it is still unknown after half the heartbeat
	// timeout (status reads failing all along): then it goes without, so
	// that the attempt does not time out, and the count that follows is
	// held back as before.
	unknownBeat := time.Now().Add(halfBeat(ctx))
	// A status read in flight when the worker begins to stop is answered
	// by no one (the pollers that would answer it are this worker's, and
	// stopping) and held the stop for its whole timeout: the reads end
	// with the stop too.
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if ch := stopping(ctx); ch != nil {
		go func() {
			select {
			case <-ch:
				cancel()
			case <-qctx.Done():
			}
		}()
	}
	// Queries see every signal delivered before them, so the first answer's
	// Received counts this push.
	tick := time.NewTicker(a.poll())
	defer tick.Stop()
	for {
		st, err := Status(qctx, c, tenant, repo)
		if err == nil {
			if b.want == 0 {
				b.want = st.Received
			}
			if st.Covered >= b.want {
				if st.LastError != "" {
					return st, errors.New(st.LastError)
				}
				return st, nil
			}
		} // else: the workflow may not have run its first task yet
		if b.want > 0 || !time.Now().Before(unknownBeat) {
			b.record(ctx)
		}
		select {
		case <-ctx.Done():
			return RepoStatus{}, ctx.Err()
		case <-stopping(ctx):
			return RepoStatus{}, errStopping()
		case <-tick.C:
		}
	}
}

// halfBeat is half the heartbeat timeout of the activity of ctx (30 s
// without one).
func halfBeat(ctx context.Context) time.Duration {
	if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb > 0 {
		return hb / 2
	}
	return 30 * time.Second
}

// resumed is want, the push count an earlier attempt of this IndexRepo
// recorded, if the repository's workflow still counts it and has not yet
// answered it with a failure (a failed snapshot is pushed again); 0 means
// push. A failed status read is tried again (resumeTries, every wait)
// before it counts as a lost workflow: right after a worker's restart
// the read can fail, and the push it caused cost the repository a
// snapshot more (TestOrgIndexRetriesAfterStops saw 3 where 2 are due:
// the second push waited behind the failed first snapshot, and the
// attempt waiting on the first failed and pushed a third time).
func resumed(ctx context.Context, c client.Client, tenant, repo string, want int, wait time.Duration) int {
	if want <= 0 {
		return 0
	}
	st, err := Status(ctx, c, tenant, repo)
	for try := 1; err != nil && try < resumeTries; try++ {
		select {
		case <-ctx.Done():
			return 0
		case <-stopping(ctx):
			return want // the attempt ends; the next one resumes
		case <-time.After(wait):
		}
		st, err = Status(ctx, c, tenant, repo)
	}
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
