// Package workflows holds the Temporal workflows and activities of the
// indexing pipeline. RepoWorkflow is one long-lived workflow per repository:
// it receives push signals, coalesces them to the newest commit and runs one
// SnapshotWorkflow child at a time. SnapshotWorkflow takes one commit through
// snapshot, parse fan-out over the queue, graph build and the atomic HEAD
// switch, then collects garbage. OrgWorkflow indexes many repositories with
// bounded concurrency, optionally on a schedule. Workflows only orchestrate;
// every I/O happens in the methods of Activities.
package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"codectx/pkg/index"
	"codectx/pkg/pipeline"
	"codectx/pkg/source"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TaskQueue is the Temporal task queue of the indexing workers.
const TaskQueue = "codectx-index"

// Signal and query names of RepoWorkflow.
const (
	PushSignal  = "push"
	StatusQuery = "status"
	// ProgressQuery is the query of SnapshotWorkflow answering its
	// SnapshotProgress.
	ProgressQuery = "progress"
)

// Stages reported by SnapshotProgress.Stage, in order.
const (
	StageSnapshot = "snapshot" // opening the location, writing the manifest and plan
	StageParse    = "parse"    // parse fan-out and wait
	StageEmbed    = "embed"    // embedding the snapshot's chunks
	StageGraph    = "graph"    // graph build and segment
	StagePublish  = "publish"  // HEAD switch and GC
)

// SnapshotProgress is what a running SnapshotWorkflow has done so far (the
// "progress" query). Parsed and Failed are final once Stage is past parse;
// during parse the WaitParse heartbeat has the live counts (see
// ParseHeartbeat).
type SnapshotProgress struct {
	Stage   string
	Commit  string // "" until the snapshot stage resolves it
	Files   int    // files in the snapshot
	Planned int    // files to parse (no cached result)
	Reused  int    // files whose parse result was cached
	Parsed  int
	Failed  int
	// Lost: a snapshot of a commit already published found this many of
	// its vector points missing from the vector store (Stage
	// StageEmbed while it restores them).
	Lost int
	// Quiet is how long, in seconds, the parse or embed stage has seen
	// no result come in while some are still out: a stage no worker
	// consumes shows a stage that never moves, and nothing else (read
	// from the wait's heartbeat by Progress, not kept by the workflow).
	Quiet int
}

// ParseHeartbeat is the heartbeat detail WaitParse records each round.
type ParseHeartbeat struct {
	Planned int `json:"planned"`
	Missing int `json:"missing"`         // planned files without a result yet
	Failed  int `json:"failed"`          // files left out so far
	Quiet   int `json:"quiet,omitempty"` // seconds without a result (quiet)
}

// quiet measures how long a wait has seen the count of what it waits for
// stay the same while some is still out.
type quiet struct {
	left  int
	since time.Time
}

// see records left at now and returns the seconds it has not moved (0
// when it moved, or nothing is out).
func (q *quiet) see(left int, now time.Time) int {
	if left == 0 || left != q.left || q.since.IsZero() {
		q.left, q.since = left, now
		return 0
	}
	return int(now.Sub(q.since) / time.Second)
}

// States reported by RepoStatus.State.
const (
	StateIdle     = "idle"
	StateIndexing = "indexing"
)

// EmbedSkipped is SnapshotResult.Embed while no embedder exists.
const EmbedSkipped = "skipped: no embedder configured"

// snapshotsPerRun bounds the snapshots of one RepoWorkflow run before it
// continues as new (tests lower it).
var snapshotsPerRun = 50

// Register registers all workflows and activities on r.
func Register(r worker.Registry, a *Activities) {
	r.RegisterWorkflow(RepoWorkflow)
	r.RegisterWorkflow(SnapshotWorkflow)
	r.RegisterWorkflow(OrgWorkflow)
	r.RegisterWorkflow(TenantLeaseWorkflow)
	r.RegisterActivity(a)
}

// RepoWorkflowID is the workflow ID of the RepoWorkflow of tenant/repo.
func RepoWorkflowID(tenant, repo string) string { return "codectx/repo/" + tenant + "/" + repo }

// SnapshotWorkflowID is the workflow ID of the n-th SnapshotWorkflow child
// of tenant/repo's RepoWorkflow. It ends in "@snapshot-N": no repository
// name holds "@", so it is never another repository's RepoWorkflowID or
// child. Before childIDVersion it ended in "/snapshot-N", which the
// RepoWorkflow of a repository named "REPO/snapshot-N" had as its own ID
// (old is that form).
func SnapshotWorkflowID(tenant, repo string, n int, at bool) string {
	if !at {
		return fmt.Sprintf("%s/snapshot-%d", RepoWorkflowID(tenant, repo), n)
	}
	return fmt.Sprintf("%s@snapshot-%d", RepoWorkflowID(tenant, repo), n)
}

// Push asks for a repository to be indexed at a commit.
type Push struct {
	Tenant, Repo, Location string
	Commit                 string // "" = the location's HEAD
	// Forward (a webhook push) may not roll HEAD back: a commit that is
	// an ancestor of the published one is not published (a replayed or
	// late delivery). With Branch, the commit must be on the branch at the
	// location when the snapshot runs, and one behind or beside HEAD must
	// be its tip (a reset, an amend or a rebase, force-pushed). An
	// operator's index request leaves it unset and may move HEAD anywhere.
	Forward bool
	// Branch is the branch a Forward push moved ("" unknown).
	Branch string `json:",omitempty"`
}

// RepoCarry is the state a RepoWorkflow carries across continue-as-new.
type RepoCarry struct {
	Pending *Push
	// Queue holds webhook pushes of other commits that a newer-received
	// push would have replaced: a late or replayed delivery of an older
	// commit must not drop the newest one. Each runs after Pending and
	// publishes only if it moves HEAD forward (at most maxQueued).
	Queue      []Push
	Received   int // pushes received so far
	Covered    int // pushes covered by finished snapshots
	Snapshots  int // snapshots started so far (names the children)
	LastCommit string
	Last       *SnapshotResult
	LastError  string // what a tenant is told (PublicError)
	LastDetail string // the cause for an operator (Cause)
	Location   string // of the last push: what a reindex fetches
	// Rev is the revision a reindex indexes (RevOf the last push): its
	// branch, or the name it asked for; "" the location's HEAD.
	Rev string `json:",omitempty"`
}

// RepoStatus is the answer of the "status" query.
type RepoStatus struct {
	Tenant, Repo string
	State        string // StateIdle or StateIndexing
	Current      string // commit being indexed ("" = HEAD of the location)
	Pending      *Push  // newest push waiting for the current snapshot
	LastCommit   string // commit of the last finished snapshot
	Last         *SnapshotResult
	LastError    string // error of the last snapshot, "" if it succeeded: its public form (PublicError)
	LastDetail   string // the same error in full, for operators
	Received     int    // pushes received
	Covered      int    // pushes covered by finished snapshots
	Snapshots    int
	Location     string // of the last push received
	Rev          string // the revision a reindex indexes (RepoCarry.Rev)
	// Child is the workflow ID of the running SnapshotWorkflow ("" when
	// idle): query it for its SnapshotProgress.
	Child string
	// Lease is the token of the tenant's snapshot slot this repository
	// waits for (State StateQueued) or holds ("" = none).
	Lease string
}

// RepoWorkflow serialises the indexing of one repository. Pushes received
// while a snapshot runs are coalesced to the last one received; at most one
// SnapshotWorkflow child runs at a time. carry is nil when started, and the
// pending state when continued as new.
func RepoWorkflow(ctx workflow.Context, tenant, repo string, carry *RepoCarry) error {
	st := RepoCarry{}
	if carry != nil {
		st = *carry
	}
	state, current, child, lease := StateIdle, "", "", ""
	if err := workflow.SetQueryHandler(ctx, StatusQuery, func() (RepoStatus, error) {
		return RepoStatus{
			Tenant: tenant, Repo: repo, State: state, Current: current, Pending: st.Pending,
			LastCommit: st.LastCommit, Last: st.Last, LastError: st.LastError,
			LastDetail: st.LastDetail, Received: st.Received, Covered: st.Covered, Snapshots: st.Snapshots, Location: st.Location,
			Rev: st.Rev, Child: child, Lease: lease,
		}, nil
	}); err != nil {
		return err
	}
	log := workflow.GetLogger(ctx)
	ch := workflow.GetSignalChannel(ctx, PushSignal)
	queue := workflow.GetVersion(ctx, forwardQueueVersion, workflow.DefaultVersion, 1) == 1
	take := func(p Push) {
		st.Received++
		if queue && p.Forward && st.Pending != nil && st.Pending.Forward && st.Pending.Commit != "" && st.Pending.Commit != p.Commit {
			st.Queue = enqueue(st.Queue, *st.Pending)
		}
		st.Queue = slices.DeleteFunc(st.Queue, func(q Push) bool { return q.Commit == p.Commit })
		st.Pending = &p
		st.Location = p.Location
		st.Rev = RevOf(p)
	}
	drain := func() {
		var p Push
		for ch.ReceiveAsync(&p) {
			take(p)
			p = Push{}
		}
	}
	held, kept := false, 0 // a tenant slot is held; snapshots it was kept for
	for runs := 0; ; {
		var released workflow.Future // this snapshot's release of its slot, if it sent one
		if st.Pending == nil && len(st.Queue) > 0 {
			p := st.Queue[len(st.Queue)-1]
			st.Queue = st.Queue[:len(st.Queue)-1]
			st.Pending = &p
		}
		if st.Pending == nil {
			var p Push
			ch.Receive(ctx, &p)
			take(p)
		}
		drain()
		p := *st.Pending
		st.Pending = nil
		upto := st.Received - len(st.Queue) // queued pushes are not covered yet
		if workflow.GetVersion(ctx, tenantLeaseVersion, workflow.DefaultVersion, 1) == 1 {
			if held && kept < leaseKeep {
				kept++ // a push waited for the last snapshot: its slot goes on
			} else {
				// Pushes that arrive while the slot is awaited join
				// Pending: they are covered by the next snapshot, not this
				// one. A slot kept too long is not released: this request
				// (same owner) takes its place, behind those waiting.
				kept = 0
				state, current = StateQueued, p.Commit
				lease = fmt.Sprintf("%s/%d", workflow.GetInfo(ctx).WorkflowExecution.RunID, st.Snapshots)
				if held = waitLease(ctx, tenant, RepoWorkflowID(tenant, repo), lease, ch, take); !held {
					lease = ""
				}
			}
		}
		child = SnapshotWorkflowID(tenant, repo, st.Snapshots, workflow.GetVersion(ctx, childIDVersion, workflow.DefaultVersion, 1) == 1)
		state, current = StateIndexing, p.Commit
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: child})
		st.Snapshots++
		fut := workflow.ExecuteChildWorkflow(cctx, SnapshotWorkflow, SnapshotInput{Tenant: tenant, Repo: repo, Location: p.Location, Commit: p.Commit, Forward: p.Forward, Branch: p.Branch})
		done := false
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(fut, func(workflow.Future) { done = true })
		sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) {
			var p Push
			c.Receive(ctx, &p)
			take(p)
		})
		for !done {
			sel.Select(ctx)
		}
		var res SnapshotResult
		if err := fut.Get(ctx, &res); err != nil {
			log.Error("snapshot failed", "repo", repo, "commit", p.Commit, "error", err)
			st.LastError = PublicError(err)
			st.LastDetail = Cause(err)
		} else {
			st.LastError, st.LastDetail = "", ""
			st.Last = &res
			st.LastCommit = res.Commit
		}
		st.Covered = upto
		// Idle before the slot is given back: the next holder's
		// "indexing" never overlaps this one's.
		state, current, child = StateIdle, "", ""
		if held {
			// With a push waiting, the next snapshot keeps the slot (up
			// to leaseKeep in a row) instead of releasing it and asking
			// again: an update and a signal through the server ahead of
			// the next child's start.
			drain()
			if st.Pending == nil && len(st.Queue) == 0 {
				released = releaseLease(ctx, tenant, lease)
				held, lease = false, ""
			}
		}
		runs++
		if runs >= snapshotsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			// A release sent in the task that continues as new would be
			// dropped: the server delivers a signal only while its sender
			// runs, and this run has closed by then. The slot would stay
			// taken until the lease's next check of its holders, with the
			// tenant's other repositories waiting behind it.
			if released != nil && workflow.GetVersion(ctx, releaseDeliveredVersion, workflow.DefaultVersion, 1) == 1 {
				_ = released.Get(ctx, nil) // a failure is logged by releaseLease
			}
			drain()
			return workflow.NewContinueAsNewError(ctx, RepoWorkflow, tenant, repo, &st)
		}
	}
}

// SnapshotInput names one snapshot to index.
type SnapshotInput struct {
	Tenant, Repo, Location string
	Commit                 string // "" = HEAD
	Forward                bool   // see Push.Forward
	Branch                 string `json:",omitempty"` // see Push.Branch
}

// SnapshotResult describes an indexed snapshot.
type SnapshotResult struct {
	Commit      string
	Files       int       // files in the snapshot
	Parsed      int       // files parsed by this snapshot
	Reused      int       // files whose parse result was cached
	Failed      int       // files whose parse was dead-lettered as bad
	FailedFiles []string  // their paths, left out of the segment
	LeftOut     []LeftOut // the same files with the reason of each
	Segment     string    // segment key
	Skipped     bool      // HEAD already pointed at this commit (or, Behind, at a descendant)
	Behind      string    // a Forward push of this commit, behind the published Commit (see SnapshotPlan.Behind), was not published
	Embed       string    // what the embed stage did (EmbedSkipped, or counts)
	Embedded    int       // chunks embedded by this snapshot
	EmbedReused int       // chunks whose vector was cached
	EmbedFailed int       // chunks left without a vector (batch dead-lettered)
	Points      int       // vector points of the snapshot
	PointsAdded int       // of those, written by this snapshot
	Restored    int       // Skipped: points of the published snapshot the vector store had lost, written again
	Previous    string    // commit HEAD pointed at before
	Deleted     int       // objects removed by GC
}

// heartbeat is the HeartbeatTimeout of SnapshotWorkflow's task-queue
// activities other than Snapshot: they heartbeat (keepAlive, every 5 s),
// so a worker that dies mid-attempt is noticed within it and the attempt
// retried elsewhere, not only after StartToClose (minutes) has run out.
const heartbeat = 20 * time.Second

// Activity options of SnapshotWorkflow.
var (
	retry = &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second}

	snapshotOpts = workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Minute, HeartbeatTimeout: 30 * time.Second, RetryPolicy: &temporal.RetryPolicy{
		InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 5,
		NonRetryableErrorTypes: []string{errInvalid},
	}}
	shortOpts = workflow.ActivityOptions{StartToCloseTimeout: 5 * time.Minute, ScheduleToCloseTimeout: time.Hour, HeartbeatTimeout: heartbeat, RetryPolicy: retry}
	waitOpts  = workflow.ActivityOptions{StartToCloseTimeout: 6 * time.Hour, ScheduleToCloseTimeout: 12 * time.Hour, HeartbeatTimeout: heartbeat, RetryPolicy: retry}
	// Publish retries until the store works again, within ScheduleToClose.
	publishOpts = workflow.ActivityOptions{StartToCloseTimeout: time.Minute, ScheduleToCloseTimeout: time.Hour, HeartbeatTimeout: heartbeat, RetryPolicy: retry}
	// The local forms of shortOpts and publishOpts: the same timeouts and
	// retries, the attempts run by the workflow's worker.
	shortLocalOpts   = workflow.LocalActivityOptions{StartToCloseTimeout: 5 * time.Minute, ScheduleToCloseTimeout: time.Hour, RetryPolicy: retry}
	publishLocalOpts = workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute, ScheduleToCloseTimeout: time.Hour, RetryPolicy: retry}
	gcOpts           = workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Minute, HeartbeatTimeout: heartbeat, RetryPolicy: &temporal.RetryPolicy{
		InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 3,
	}}
)

// errInvalid is the application error type of inputs that no retry fixes.
const errInvalid = "InvalidInput"

// SnapshotWorkflow indexes one snapshot: snapshot, parse fan-out and wait,
// embed fan-out and wait (when an embedder is configured) and the
// snapshot's vector points, graph build, HEAD switch, GC.
func SnapshotWorkflow(ctx workflow.Context, in SnapshotInput) (SnapshotResult, error) {
	var a *Activities
	log := workflow.GetLogger(ctx)
	var res SnapshotResult
	if in.Tenant == "" {
		in.Tenant = index.DefaultTenant
	}
	// The progress query and the stage changes issue no commands: old
	// histories replay unchanged.
	prog := SnapshotProgress{Stage: StageSnapshot}
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (SnapshotProgress, error) { return prog, nil }); err != nil {
		return res, err
	}

	var plan SnapshotPlan
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, snapshotOpts), a.Snapshot, in).Get(ctx, &plan); err != nil {
		return res, stageError("snapshot "+in.Location, err)
	}
	res.Commit, res.Files, res.Reused = plan.Commit, plan.Files, plan.Reused
	prog = SnapshotProgress{Stage: StageParse, Commit: plan.Commit, Files: plan.Files, Planned: plan.Changed, Reused: plan.Reused}
	if plan.Skipped {
		res.Skipped, res.Segment, res.Behind = true, plan.Segment, plan.Behind
		if plan.Behind != "" {
			log.Warn("push of a commit behind the published one and not its branch's tip: HEAD kept", "repo", plan.Repo, "pushed", plan.Behind, "published", plan.Commit)
		} else {
			log.Info("snapshot already published", "repo", plan.Repo, "commit", plan.Commit)
			// The vector store is derived data: a reindex of the published
			// commit restores the points it lost. Histories recorded
			// before return here.
			if !plan.NoEmbedder && workflow.GetVersion(ctx, vectorRepairVersion, workflow.DefaultVersion, 1) == 1 {
				if err := restoreVectors(ctx, plan, &prog, &res); err != nil {
					return res, err
				}
			}
		}
		return res, nil
	}

	// Short steps run as local activities, in the workflow task that
	// follows the step before (no round trip through the server's task
	// queue), and the embed stage is not planned when the orchestrator has
	// no embedder. Histories recorded before replay the activities.
	local := workflow.GetVersion(ctx, localStepsVersion, workflow.DefaultVersion, 1) == 1
	// The waits for the parse and graph jobs first run briefly in local
	// activities (FanOutParseWait, GraphWait): a small snapshot is done
	// within them, without an activity through the task queue each; a
	// bigger one goes on in WaitParse and Graph as before.
	quick := local && workflow.GetVersion(ctx, localWaitsVersion, workflow.DefaultVersion, 1) == 1
	pin := ParseInput{Plan: plan, Run: workflow.GetInfo(ctx).WorkflowExecution.RunID}
	if plan.Changed > 0 {
		var fan workflow.Future
		var quickOut QuickParse
		switch {
		case quick:
			fan = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, shortLocalOpts), a.FanOutParseWait, pin)
		case local:
			fan = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, shortLocalOpts), a.FanOutParse, pin)
		default:
			fan = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, shortOpts), a.FanOutParse, pin)
		}
		var got any // FanOutParse has no result
		if quick {
			got = &quickOut
		}
		if err := fan.Get(ctx, got); err != nil {
			return res, stageError("fan out parse", err)
		}
		out := quickOut.Outcome
		if !quickOut.Done {
			if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, waitOpts), a.WaitParse, pin).Get(ctx, &out); err != nil {
				return res, stageError("wait for parse", err)
			}
		}
		res.Parsed, res.Failed, res.FailedFiles, res.LeftOut = out.Parsed, len(out.Failed), out.Failed, out.LeftOut
	}
	prog.Stage, prog.Parsed, prog.Failed = StageEmbed, res.Parsed, res.Failed

	if local && plan.NoEmbedder {
		res.Embed = EmbedSkipped
	} else if err := embedStage(ctx, plan, pin.Run, &res); err != nil {
		return res, err
	}

	prog.Stage = StageGraph
	gin := GraphInput{Job: pipeline.GraphJob{Tenant: plan.Tenant, Repo: plan.Repo, Commit: plan.Commit, ManifestKey: plan.ManifestKey, Failed: res.FailedFiles}, Run: pin.Run}
	if quick {
		if err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, shortLocalOpts), a.GraphWait, gin).Get(ctx, &res.Segment); err != nil {
			return res, stageError("graph", err)
		}
	}
	if res.Segment == "" {
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, waitOpts), a.Graph, gin).Get(ctx, &res.Segment); err != nil {
			return res, stageError("graph", err)
		}
	}

	prog.Stage = StagePublish
	var pub PublishResult
	pubIn := PublishInput{Tenant: plan.Tenant, Repo: plan.Repo, Commit: plan.Commit, Segment: res.Segment, Complete: len(res.FailedFiles) == 0}
	var pf workflow.Future
	if local {
		pf = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, publishLocalOpts), a.Publish, pubIn)
	} else {
		pf = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, publishOpts), a.Publish, pubIn)
	}
	if err := pf.Get(ctx, &pub); err != nil {
		return res, stageError("publish", err)
	}
	res.Previous = pub.Previous

	keep := []string{plan.Commit}
	if pub.Previous != "" && pub.Previous != plan.Commit {
		keep = append(keep, pub.Previous)
	}
	var gc GCResult
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, gcOpts), a.GC,
		GCInput{Tenant: plan.Tenant, Repo: plan.Repo, Keep: keep}).Get(ctx, &gc); err != nil {
		// HEAD has moved: a failed GC only leaves garbage for the next one.
		log.Warn("gc failed", "repo", plan.Repo, "error", err)
	}
	res.Deleted = gc.Deleted + gc.Points
	return res, nil
}

// embedVersion marks the change that made the embed stage run activities;
// histories recorded before it replay without them.
const embedVersion = "embed-stage"

// localStepsVersion marks SnapshotWorkflow runs whose fan-out and publish
// are local activities and which skip the embed stage's planning when the
// snapshot says the orchestrator has no embedder.
const localStepsVersion = "local-steps"

// localWaitsVersion marks SnapshotWorkflow runs that wait for the parse
// and graph jobs in local activities first (FanOutParseWait, GraphWait),
// and in WaitParse and Graph only when those did not see the jobs done.
const localWaitsVersion = "local-waits"

// forwardQueueVersion marks RepoWorkflow runs that queue webhook pushes of
// other commits instead of dropping all but the last received.
const forwardQueueVersion = "forward-queue"

// childIDVersion marks RepoWorkflow runs whose children are named
// "...@snapshot-N" (SnapshotWorkflowID).
const childIDVersion = "child-id"

// leaseKeep bounds the snapshots in a row that keep a tenant slot because
// a push was waiting when the one before ended; then the repository asks
// again, behind the tenant's others.
const leaseKeep = 8

// tenantLeaseVersion marks RepoWorkflow runs that take one of their
// tenant's snapshot slots (TenantLeaseWorkflow) before each snapshot.
const tenantLeaseVersion = "tenant-lease"

// releaseDeliveredVersion marks RepoWorkflow runs that, when they
// continue as new right after releasing their tenant slot, wait for the
// release to be delivered first.
const releaseDeliveredVersion = "release-delivered"

// maxQueued bounds RepoCarry.Queue; the oldest queued push goes first.
const maxQueued = 16

// enqueue adds p to q (once per commit), dropping the oldest beyond
// maxQueued.
func enqueue(q []Push, p Push) []Push {
	q = slices.DeleteFunc(q, func(x Push) bool { return x.Commit == p.Commit })
	q = append(q, p)
	if len(q) > maxQueued {
		q = q[len(q)-maxQueued:]
	}
	return q
}

// embedStage plans the embedding of the snapshot's chunks, fans the
// chunks without a cached vector out to the embed workers, waits for them
// and writes the snapshot's points to the vector store.
func embedStage(ctx workflow.Context, plan SnapshotPlan, run string, res *SnapshotResult) error {
	var a *Activities
	log := workflow.GetLogger(ctx)
	if workflow.GetVersion(ctx, embedVersion, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		res.Embed = EmbedSkipped
		return nil
	}
	var ep EmbedPlanResult
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, waitOpts), a.PlanEmbed, EmbedPlanInput{Plan: plan, Failed: res.FailedFiles}).Get(ctx, &ep); err != nil {
		return fmt.Errorf("plan embed: %w", err)
	}
	if ep.Skipped {
		res.Embed = EmbedSkipped
		log.Info("embed stage skipped: no embedder configured", "repo", plan.Repo, "commit", plan.Commit)
		return nil
	}
	ein := EmbedInput{Plan: plan, Embed: ep, Run: run}
	var out EmbedOutcome
	if ep.Batches > 0 {
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, shortOpts), a.FanOutEmbed, ein).Get(ctx, nil); err != nil {
			return fmt.Errorf("fan out embed: %w", err)
		}
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, waitOpts), a.WaitEmbed, ein).Get(ctx, &out); err != nil {
			return stageError("wait for embed", err)
		}
	}
	var vr VectorsResult
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, waitOpts), a.StoreVectors, ein).Get(ctx, &vr); err != nil {
		return fmt.Errorf("store vectors: %w", err)
	}
	res.Embedded, res.EmbedReused, res.EmbedFailed = out.Embedded, ep.Chunks-ep.Missing, out.Failed
	res.Points, res.PointsAdded = vr.Points, vr.Added
	res.Embed = fmt.Sprintf("%s: %d chunks, %d embedded, %d reused from cache", ep.Model, ep.Chunks, res.Embedded, res.EmbedReused)
	if out.Failed > 0 {
		res.Embed += fmt.Sprintf(", %d failed", out.Failed)
	}
	return nil
}

// vectorRepairVersion marks SnapshotWorkflow runs that, skipping a
// commit already published, check that the vector store holds its points
// and restore those it lost (restoreVectors).
const vectorRepairVersion = "vector-repair"

// restoreVectors makes the vector store hold the points of the published
// snapshot of plan (Skipped). One listing of the repository's points
// (CheckVectors) finds what is missing; only then does the embed stage
// run: it plans the snapshot's chunks, embeds those without a cached
// vector and writes the missing points from the cache. A snapshot without
// a vector set (published before an embedder was configured) gets its
// points the same way. Chunks whose embedding failed have no point: a
// reindex tries them again, as it parses again files left out.
func restoreVectors(ctx workflow.Context, plan SnapshotPlan, prog *SnapshotProgress, res *SnapshotResult) error {
	var a *Activities
	var chk VectorCheck
	if err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, shortLocalOpts), a.CheckVectors, plan).Get(ctx, &chk); err != nil {
		return stageError("check vectors", err)
	}
	if chk.Skipped {
		return nil
	}
	if !chk.NoSet && chk.Missing == 0 {
		res.Points = chk.Points
		res.Embed = fmt.Sprintf("vector store holds the snapshot's %d points", chk.Points)
		return nil
	}
	prog.Stage, prog.Lost = StageEmbed, chk.Missing
	workflow.GetLogger(ctx).Warn("vector points of the published snapshot missing: restoring them",
		"repo", plan.Repo, "commit", plan.Commit, "missing", chk.Missing, "points", chk.Points, "vector set", !chk.NoSet)
	if err := embedStage(ctx, plan, workflow.GetInfo(ctx).WorkflowExecution.RunID, res); err != nil {
		return err
	}
	res.Restored = res.PointsAdded
	if chk.NoSet {
		res.Embed = fmt.Sprintf("restored %d points (no vector set); %s", res.Restored, res.Embed)
	} else {
		res.Embed = fmt.Sprintf("restored %d of %d missing points; %s", res.Restored, chk.Missing, res.Embed)
	}
	return nil
}

// orgAttempts bounds the attempts of one repository's IndexRepo in
// OrgWorkflow: IndexRepo itself gives up after indexRepoTries failures,
// which it counts in its heartbeat; attempts its worker's stops cut short
// (or that timed out, their worker gone) are not failures, and this bounds
// them. (Options of an activity are not part of a workflow's history
// checks: runs begun with the earlier bound of 3 replay.)
const orgAttempts = 20

// OrgInput lists the repositories of a tenant to index.
type OrgInput struct {
	Tenant      string
	Locations   []string
	Concurrency int // repositories indexed at once; default 4
}

// OrgWorkflow indexes every location through its RepoWorkflow (so pushes
// and reconciliation never index one repository twice at once), at most
// Concurrency at a time. It fails, after trying all, if any failed.
func OrgWorkflow(ctx workflow.Context, in OrgInput) error {
	var a *Activities
	conc := in.Concurrency
	if conc <= 0 {
		conc = 4
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 24 * time.Hour, HeartbeatTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: orgAttempts,
		},
	})
	var errs []error
	sel := workflow.NewSelector(ctx)
	inflight := 0
	for _, loc := range in.Locations {
		if inflight == conc {
			sel.Select(ctx)
			inflight--
		}
		f := workflow.ExecuteActivity(actx, a.IndexRepo, IndexRepoInput{Tenant: in.Tenant, Location: loc})
		sel.AddFuture(f, func(f workflow.Future) {
			if err := f.Get(ctx, nil); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", loc, err))
			}
		})
		inflight++
	}
	for ; inflight > 0; inflight-- {
		sel.Select(ctx)
	}
	return errors.Join(errs...)
}

// Cause is the message of the innermost application error of err (the
// error an activity returned), without the Temporal wrappers around it
// (event IDs, run IDs, the chain repeated). Other errors (timeouts,
// cancellation) keep their own message.
func Cause(err error) string {
	var inner *temporal.ApplicationError
	for e := err; e != nil; e = errors.Unwrap(e) {
		if ae, ok := e.(*temporal.ApplicationError); ok {
			inner = ae
		}
	}
	if inner == nil {
		var te *temporal.TimeoutError
		if errors.As(err, &te) {
			return te.Error()
		}
		return err.Error()
	}
	return inner.Message()
}

// stageError names the stage of SnapshotWorkflow that failed and its
// cause, once.
func stageError(stage string, err error) error {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.NonRetryable() {
		return temporal.NewNonRetryableApplicationError(stage+": "+Cause(err), ae.Type(), nil)
	}
	return fmt.Errorf("%s: %s", stage, Cause(err))
}

// RevOf is the revision a reindex after push p indexes (source.Follows).
func RevOf(p Push) string { return source.Follows(p.Branch, p.Commit) }
