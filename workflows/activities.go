package workflows

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/chunk"
	"codectx/pkg/embed"
	"codectx/pkg/index"
	"codectx/pkg/netguard"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue"
	"codectx/pkg/queue/natsq"
	"codectx/pkg/source"
	"codectx/pkg/vector"
	"codectx/pkg/webhook"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// Activities do the I/O of the workflows. One value serves all activities
// of a Temporal worker.
type Activities struct {
	Store        *blob.Bucket
	Queue        *natsq.Queue
	CacheDir     string           // clone cache for URL locations
	Net          *netguard.Policy // where clones may connect; nil = public addresses only
	BatchSize    int              // files per parse message; default 64
	ParseTimeout time.Duration    // re-send a batch (or graph job) with no result for this long; default 5m
	PollInterval time.Duration    // how often waits check the store; default 500ms
	// NoWake makes waits poll only, ignoring the queue's notifications of
	// finished messages (tests of the fallback).
	NoWake       bool
	HistoryLimit int // commits of history in a manifest; default 500 (index.ReadManifest)
	// InfraRetry are the delays before re-publishing a job dead-lettered
	// for an infrastructure error (not a bad input), one per round; after
	// the last round the snapshot fails. Nil: 5s, 20s, 1m.
	InfraRetry []time.Duration
	// Embedder, when set, turns the embed stage on: its model and
	// dimension key the embedding cache and the vector collection (the
	// embed workers run the same model). Vectors is where points go.
	Embedder embed.Embedder
	Vectors  vector.Store
	// LocalWait is how long FanOutParseWait and GraphWait wait for their
	// jobs inside the workflow task (default 2s; negative: not at all)
	// before the workflow waits in WaitParse and Graph instead.
	LocalWait time.Duration
	// TenantSnapshots bounds the snapshots of one tenant in progress at
	// once (TenantLeaseWorkflow); 0 or less: no bound.
	TenantSnapshots int
	// Window bounds the batches of one snapshot in a stage's queue (parse
	// and embed) at once: the rest are published as those finish, so a
	// big snapshot holds a bounded part of the queue and another
	// snapshot's batches wait behind at most that much. 0: DefaultWindow;
	// negative: every batch at once.
	Window int
	// SourceMaxBytes bounds the source bytes of one snapshot (the sizes
	// of the files it would parse, index.SourceBytes): a larger snapshot
	// fails at planning, before anything is parsed, with
	// index.ErrSourceTooLarge. 0: index.DefaultMaxSourceBytes; negative:
	// no bound.
	SourceMaxBytes int64
}

// DefaultWindow is the default of Activities.Window: enough batches to
// keep 16 workers busy on one snapshot.
const DefaultWindow = 16

// window is the number of a snapshot's batches published at once out of
// total.
func (a *Activities) window(total int) int {
	switch {
	case a.Window < 0:
		return total
	case a.Window == 0:
		return min(DefaultWindow, total)
	}
	return min(a.Window, total)
}

func (a *Activities) localWait() time.Duration {
	if a.LocalWait != 0 {
		return a.LocalWait
	}
	return 2 * time.Second
}

func (a *Activities) batchSize() int {
	if a.BatchSize > 0 {
		return a.BatchSize
	}
	return 64
}

func (a *Activities) parseTimeout() time.Duration {
	if a.ParseTimeout > 0 {
		return a.ParseTimeout
	}
	return 5 * time.Minute
}

func (a *Activities) poll() time.Duration {
	if a.PollInterval > 0 {
		return a.PollInterval
	}
	return 500 * time.Millisecond
}

// SnapshotPlan is the result of the Snapshot activity. The batches
// themselves are stored at PlanKey, not in the workflow history.
type SnapshotPlan struct {
	Tenant, Repo, Location, Commit string
	ManifestKey, PlanKey           string
	Files                          int // files in the snapshot
	Changed                        int // files to parse (no cached result)
	Reused                         int // files with a cached result
	Batches                        int
	Skipped                        bool   // HEAD already points at Commit
	Segment                        string // HEAD's segment when Skipped
	// Behind is the commit of a Forward push not published: an ancestor
	// of the published HEAD or, for a push naming its branch, a commit the
	// branch has left (see Snapshot): Skipped, and Commit is HEAD's, which
	// stays.
	Behind string
	// NoEmbedder: the orchestrator that planned the snapshot has no
	// embedder, so the embed stage is skipped without planning it (a plan
	// of an older worker says nothing, and the stage is planned).
	NoEmbedder bool
}

func invalid(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), errInvalid, err)
}

// Snapshot opens the location at the commit (cloning or fetching into the
// cache), writes the manifest, and plans the parse of every file whose
// result is not cached yet.
func (a *Activities) Snapshot(ctx context.Context, in SnapshotInput) (p SnapshotPlan, err error) {
	if in.Tenant == "" {
		in.Tenant = index.DefaultTenant
	}
	if in.Repo == "" {
		in.Repo = pipeline.RepoName(in.Location)
	}
	if !index.ValidTenant(in.Tenant) || !index.ValidName(in.Repo) {
		return SnapshotPlan{}, invalid(fmt.Errorf("invalid tenant %q or repository %q", in.Tenant, in.Repo))
	}
	// Cloning and reading a large repository can take minutes: heartbeat
	// meanwhile, so a dead worker is noticed in HeartbeatTimeout rather
	// than after StartToCloseTimeout.
	defer keepAlive(ctx)()
	// The published snapshot's manifest lists the tree it was made from
	// and its history: the unchanged subtrees are listed from it, and the
	// commits from it back are not diffed again.
	h, err := index.ReadHead(ctx, a.Store, in.Tenant, in.Repo)
	var prev *index.Manifest
	if err == nil && h.Commit != "" {
		if m, merr := pipeline.ReadManifest(ctx, a.Store, pipeline.ManifestKey(in.Tenant, in.Repo, h.Commit)); merr == nil && m.Commit == h.Commit {
			prev = m
		}
	}
	snap, oerr := pipeline.OpenSnapshotFrom(netguard.With(ctx, a.Net.For(in.Tenant)), in.Tenant, in.Location, in.Commit, a.CacheDir, prev.Listing())
	if oerr != nil {
		if in.Forward && err == nil && h.Commit != "" && source.IsHash(in.Commit) && errors.Is(oerr, source.ErrRevisionNotFound) {
			// A push of a commit the location has no more (force-pushed
			// away before this snapshot ran, and never fetched): no
			// branch is at it, so it is not published, as a late
			// delivery is not. It was an error beside a correct HEAD.
			return SnapshotPlan{Tenant: in.Tenant, Repo: in.Repo, Location: in.Location, Commit: h.Commit, Skipped: true, Segment: h.Segment, Behind: in.Commit, NoEmbedder: a.Embedder == nil}, nil
		}
		return SnapshotPlan{}, classify(oerr)
	}
	defer snap.Close()
	// The listing says what the snapshot would parse: one blob named under
	// many paths is parsed once per path, so the bound is checked here,
	// before the manifest is written or a batch planned.
	if err := index.CheckSourceBytes(snap.Files, chunk.Options{}, index.SourceLimit(a.SourceMaxBytes)); err != nil {
		return SnapshotPlan{}, classify(fmt.Errorf("snapshot %s: %w", snap.Commit, err))
	}
	p = SnapshotPlan{
		Tenant: in.Tenant, Repo: in.Repo, Location: in.Location, Commit: snap.Commit,
		ManifestKey: pipeline.ManifestKey(in.Tenant, in.Repo, snap.Commit),
		PlanKey:     pipeline.PlanKey(in.Tenant, in.Repo, snap.Commit),
		Files:       len(snap.Files),
		NoEmbedder:  a.Embedder == nil,
	}
	// Skip a commit already published, unless files were left out of it:
	// then index it again (only those files are parsed), so that a file
	// left out for a reason that has gone away comes back.
	if err == nil && h.Commit == snap.Commit && h.Complete {
		if ok, err := a.Store.Exists(ctx, h.Segment); err == nil && ok {
			p.Skipped, p.Segment = true, h.Segment
			return p, nil
		}
	}
	if err == nil && in.Forward && h.Commit != "" && h.Commit != snap.Commit {
		publish, perr := a.forward(ctx, in, snap, h.Commit)
		if perr != nil {
			return p, perr
		}
		if !publish {
			p.Skipped, p.Segment, p.Behind, p.Commit = true, h.Segment, snap.Commit, h.Commit
			return p, nil
		}
	}
	m, err := index.ReadManifestFrom(ctx, snap, in.Tenant, in.Repo, a.HistoryLimit, prev)
	if err != nil {
		return p, err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return p, err
	}
	// A DELETE of the repository ends its RepoWorkflow, then removes its
	// objects; this activity, already running, may write after that.
	// Whatever way it ends from here, it removes what it wrote if the
	// RepoWorkflow has ended.
	defer func() {
		if gone := a.undoIfGone(ctx, in.Tenant, in.Repo, "snapshot", p.ManifestKey, p.PlanKey); gone != nil {
			p, err = SnapshotPlan{}, gone
		}
	}()
	if err := pipeline.WriteManifest(ctx, a.Store, p.ManifestKey, data); err != nil {
		return p, fmt.Errorf("write manifest: %w", err)
	}
	missing, err := a.missing(ctx, m.Tenant, m.Files)
	if err != nil {
		return p, err
	}
	var changed []source.File
	for i, f := range m.Files {
		switch {
		case !pipeline.NeedsParse(f):
		case missing[i]:
			changed = append(changed, f)
		default:
			p.Reused++
		}
	}
	plan := pipeline.Plan{Tenant: p.Tenant, Repo: p.Repo, Commit: p.Commit, Location: p.Location}
	for n := a.batchSize(); len(changed) > 0; {
		k := min(n, len(changed))
		plan.Batches = append(plan.Batches, changed[:k:k])
		p.Changed += k
		changed = changed[k:]
	}
	p.Batches = len(plan.Batches)
	if data, err = json.Marshal(plan); err != nil {
		return p, err
	}
	if err := a.Store.Put(ctx, p.PlanKey, data); err != nil {
		return p, fmt.Errorf("write plan: %w", err)
	}
	return p, nil
}

// ownerGone reports whether the activity runs for a snapshot child of
// tenant/repo's RepoWorkflow and that RepoWorkflow has ended (a DELETE of
// the repository ends it). Outside such a child (tests, a snapshot run on
// its own), or when the server cannot say, it reports false.
func (a *Activities) ownerGone(ctx context.Context, tenant, repo string) bool {
	c, owner, _, ok := snapshotOf(ctx, tenant, repo)
	if !ok {
		return false
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return ended(c.DescribeWorkflowExecution(qctx, owner, ""))
}

// snapshotOf returns the Temporal client, the RepoWorkflow's ID and the
// activity's info when the activity runs for a snapshot child of
// tenant/repo's RepoWorkflow; ok false otherwise (tests, a snapshot run on
// its own, no client).
func snapshotOf(ctx context.Context, tenant, repo string) (c client.Client, owner string, info activity.Info, ok bool) {
	if !activity.IsActivity(ctx) {
		return nil, "", info, false
	}
	owner = RepoWorkflowID(tenant, repo)
	info = activity.GetInfo(ctx)
	if !strings.HasPrefix(info.WorkflowExecution.ID, owner+"@snapshot-") {
		return nil, "", info, false
	}
	c = activity.GetClient(ctx)
	return c, owner, info, c != nil
}

// ended reads a description of a workflow run: true when the run is not
// found or not running; false when it runs or the server cannot say.
func ended(d *workflowservice.DescribeWorkflowExecutionResponse, err error) bool {
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return true
	case err != nil:
		return false
	}
	return d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// ownerRunGone is ownerGone for the run of tenant/repo's RepoWorkflow that
// started this activity's snapshot: it also reports true when that run has
// ended and another one runs (the repository was deleted and indexed
// again under the same name). The objects a snapshot writes are named by
// commit, not by run, so only what is checked against its content may be
// undone on this answer (Publish's HEAD) or what only removes (GC).
// Outside a snapshot child with a parent it is ownerGone.
func (a *Activities) ownerRunGone(ctx context.Context, tenant, repo string) bool {
	c, owner, info, ok := snapshotOf(ctx, tenant, repo)
	if !ok {
		return false
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	d, err := c.DescribeWorkflowExecution(qctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
	if err != nil || ended(d, nil) {
		return ended(d, err) // the snapshot itself ended (its parent's end terminates it)
	}
	p := d.GetWorkflowExecutionInfo().GetParentExecution()
	if p == nil || p.GetWorkflowId() != owner {
		return a.ownerGone(ctx, tenant, repo)
	}
	return ended(c.DescribeWorkflowExecution(qctx, owner, p.GetRunId()))
}

// undoIfGone is called by an activity of a snapshot after its writes of
// repository objects (keys). If the repository's workflow has ended (a
// DELETE ended it), it removes them again and returns the activity's
// non-retryable error; else nil. A DELETE removes what was written before
// it ended the workflow; this removes what was written after.
func (a *Activities) undoIfGone(ctx context.Context, tenant, repo, what string, keys ...string) error {
	if !a.ownerGone(ctx, tenant, repo) {
		return nil
	}
	dctx := context.WithoutCancel(ctx)
	for _, k := range keys {
		if err := a.Store.Delete(dctx, k); err != nil && !errors.Is(err, blob.ErrNotFound) {
			activity.GetLogger(ctx).Warn(what+" of a deleted repository: object left", "key", k, "error", err)
		}
	}
	return temporal.NewNonRetryableApplicationError("the repository was deleted during its "+what, errInvalid, nil)
}

// missing reports, per file, whether its parse result is absent (checked
// by a few goroutines).
func (a *Activities) missing(ctx context.Context, tenant string, files []source.File) ([]bool, error) {
	out := make([]bool, len(files))
	errs := make([]error, len(files))
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				next.Lock()
				j := i
				i++
				next.Unlock()
				if j >= len(files) || ctx.Err() != nil {
					return
				}
				if !pipeline.NeedsParse(files[j]) {
					continue
				}
				ok, err := a.Store.Exists(ctx, pipeline.ResultKey(tenant, files[j]))
				out[j], errs[j] = !ok, err
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, errors.Join(errs...)
}

// ParseInput is the input of FanOutParse and WaitParse. Run (the workflow
// run ID) makes message IDs unique per run, so dedup covers activity
// retries but a later run of the same commit publishes afresh.
type ParseInput struct {
	Plan SnapshotPlan
	Run  string
}

// ParseOutcome is the result of WaitParse.
type ParseOutcome struct {
	Parsed  int       // files with a parse result
	Failed  []string  // files dead-lettered as bad (poison), sorted
	LeftOut []LeftOut // the same files with the reason of each
	Resent  int       // batches re-published after ParseTimeout
	Split   int       // dead-lettered batches re-published file by file
	Retried int       // batches re-published after an infrastructure failure
}

// LeftOut is a file left out of a snapshot because it is itself bad (its
// parse panicked, hung or was refused), with the reason.
type LeftOut struct {
	Path   string
	Reason string
}

// ErrInfra is the application error type of a stage that kept failing for
// a reason outside its input (store or queue unavailable): the snapshot
// fails and HEAD stays where it was.
const ErrInfra = "InfrastructureFailure"

// defaultInfraRetry is how long WaitParse and Graph wait before
// re-publishing a job dead-lettered for an infrastructure error, one delay
// per round: after the last, the snapshot fails.
var defaultInfraRetry = []time.Duration{5 * time.Second, 20 * time.Second, time.Minute}

func (a *Activities) infraRetry() []time.Duration {
	if a.InfraRetry != nil {
		return a.InfraRetry
	}
	return defaultInfraRetry
}

// batchID is the message ID of batch n of a parse run.
func batchID(in ParseInput, n int) string {
	return fmt.Sprintf("%s/%s/%s/%s/%d", in.Plan.Tenant, in.Plan.Repo, in.Plan.Commit, in.Run, n)
}

func (a *Activities) readPlan(ctx context.Context, key string) (*pipeline.Plan, error) {
	data, err := a.Store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	var p pipeline.Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("decode plan %s: %w", key, err)
	}
	return &p, nil
}

func (a *Activities) publishBatch(ctx context.Context, plan *pipeline.Plan, n int, files []source.File, id string) error {
	data, err := json.Marshal(pipeline.ParseBatch{Tenant: plan.Tenant, Repo: plan.Repo, Commit: plan.Commit, Location: plan.Location, Batch: n, Files: files})
	if err != nil {
		return err
	}
	return a.Queue.Publish(ctx, pipeline.StageParse, jobSubject(plan.Tenant, plan.Repo, plan.Commit), data, id)
}

// FanOutParse publishes the plan's first batches (Window of them) to the
// parse stage, with message ID tenant/repo/commit/run/batch so that a
// retried fan-out is deduplicated; WaitParse publishes the others as
// those finish.
func (a *Activities) FanOutParse(ctx context.Context, in ParseInput) error {
	_, err := a.fanOutParse(ctx, in)
	return err
}

// fanOutParse is FanOutParse; it returns how many of the first batches it
// published: it stops early when the tenant's share of the queue is full.
func (a *Activities) fanOutParse(ctx context.Context, in ParseInput) (int, error) {
	defer keepAlive(ctx)()
	plan, err := a.readPlan(ctx, in.Plan.PlanKey)
	if err != nil {
		return 0, err
	}
	for n, files := range plan.Batches[:a.window(len(plan.Batches))] {
		if err := a.publishBatch(ctx, plan, n, files, batchID(in, n)); shareFull(err) {
			return n, nil
		} else if err != nil {
			return n, err
		}
	}
	return a.window(len(plan.Batches)), nil
}

// QuickParse is the result of FanOutParseWait: whether the parse was seen
// done, and then its outcome.
type QuickParse struct {
	Done    bool
	Outcome ParseOutcome
}

// FanOutParseWait is FanOutParse followed by WaitParse for at most
// LocalWait, run as a local activity: a snapshot whose few files parse
// within it needs no WaitParse activity. A wait cut short, or failed, says
// not done (the workflow then runs WaitParse, which starts over from the
// store and the dead letters as a retried WaitParse does; re-sent batches
// keep their message IDs, so the queue drops a re-send it has seen).
func (a *Activities) FanOutParseWait(ctx context.Context, in ParseInput) (QuickParse, error) {
	fanned, err := a.fanOutParse(ctx, in)
	if err != nil {
		return QuickParse{}, err
	}
	if a.localWait() < 0 {
		return QuickParse{}, nil
	}
	wctx, cancel := context.WithTimeout(ctx, a.localWait())
	defer cancel()
	out, err := a.waitParse(wctx, in, fanned)
	if err != nil {
		return QuickParse{}, nil
	}
	return QuickParse{Done: true, Outcome: out}, nil
}

// tracked is a batch WaitParse waits for.
type tracked struct {
	n       int
	files   []source.File
	missing map[int]bool // indexes into files
	// id is the message ID of a file split off a dead batch; "": the
	// batch's own (batchID).
	id string
	sends
}

// WaitParse waits, heartbeating, until every planned file has a parse
// result or is failed. At most Window batches are in the queue at once:
// as batches finish, the next ones (in plan order) are checked and those
// with missing results published, so a restarted wait sends only what is
// still missing. A batch with missing results after ParseTimeout is
// re-published (a lost message); a batch found in the dead-letter stream is
// re-published file by file, and a dead-lettered single file is failed.
func (a *Activities) WaitParse(ctx context.Context, in ParseInput) (ParseOutcome, error) {
	return a.waitParse(ctx, in, 0)
}

// waitParse is WaitParse; fanned is how many of the first batches
// FanOutParse has just published in this attempt: they are not checked
// and published again.
func (a *Activities) waitParse(ctx context.Context, in ParseInput, fanned int) (ParseOutcome, error) {
	var out ParseOutcome
	var still quiet
	plan, err := a.readPlan(ctx, in.Plan.PlanKey)
	if err != nil {
		return out, err
	}
	window := a.window(len(plan.Batches))
	var open, queued []*tracked // published; not yet
	queuedFiles := 0
	now := time.Now()
	for n, files := range plan.Batches {
		t := &tracked{n: n, files: files, missing: map[int]bool{}}
		for i := range files {
			t.missing[i] = true
		}
		if n < fanned {
			t.sends = newSends(batchID(in, n), now)
			open = append(open, t)
			continue
		}
		queued = append(queued, t)
		queuedFiles += len(files)
	}
	subject := jobSubject(plan.Tenant, plan.Repo, plan.Commit)
	var shareWake waker // the tenant's share, once a publish was refused
	defer func() {
		if shareWake.stop != nil {
			shareWake.stop()
		}
	}()
	// fill publishes queued batches until Window are open. Each is
	// checked first: after a restart most may be done (and the first
	// Window, published by FanOutParse under the same message IDs, are
	// dropped by the queue as duplicates when sent again). It stops when
	// the tenant's share of the queue is full; the next round goes on.
	fill := func() error {
		for len(open) < window && len(queued) > 0 {
			t := queued[0]
			queued = queued[1:]
			queuedFiles -= len(t.files)
			if err := a.check(ctx, plan.Tenant, []*tracked{t}); err != nil {
				return err
			}
			if len(t.missing) == 0 {
				continue
			}
			id := t.id
			if id == "" {
				id = batchID(in, t.n)
			}
			t.sends = newSends(id, time.Now())
			if err := a.publishBatch(ctx, plan, t.n, t.missingFiles(), t.base); shareFull(err) {
				queued = append([]*tracked{t}, queued...)
				queuedFiles += len(t.files)
				if shareWake.stop == nil {
					// Woken as any of the tenant's batches finishes, the
					// wait takes a free slot as soon as the tenant's other
					// snapshots do, not at its next poll.
					shareWake = a.watchShare(ctx, pipeline.StageParse, subject)
				}
				return nil
			} else if err != nil {
				return err
			}
			open = append(open, t)
		}
		return nil
	}
	// publish sends t's missing files under a message id.
	publish := func(t *tracked) func(id string) error {
		return func(id string) error { return a.publishBatch(ctx, plan, t.n, t.missingFiles(), id) }
	}
	// A notification of a finished batch checks that batch at once (and
	// the dead letters if it was dead-lettered); the poll checks all.
	wake := a.watch(ctx, pipeline.StageParse, subject)
	defer wake.stop()
	tick := time.NewTicker(a.poll())
	defer tick.Stop()
	var only *woken // nil: a full round
	for {
		check := open
		if only != nil {
			check = nil
			for _, t := range open {
				if t.sentAny(only.ids) {
					check = append(check, t)
				}
			}
		}
		if err := a.check(ctx, plan.Tenant, check); err != nil {
			return out, err
		}
		open = slicesDeleteDone(open)
		if err := fill(); err != nil {
			return out, err
		}
		if len(open) == 0 && len(queued) == 0 {
			break
		}
		var dead map[string]queue.DeadLetter
		if only == nil || only.dead {
			if dead, err = a.deadIDs(ctx, pipeline.StageParse, subject); err != nil {
				return out, err
			}
		}
		var next []*tracked
		for _, t := range open {
			st := t.settle(dead, a.infraRetry())
			if st.exhausted {
				return out, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("parse batch %d: %d files not parsed after %d retries: %s", t.n, len(t.missing), t.infra, t.cause), ErrInfra, nil)
			}
			if st.scheduled {
				activity.GetLogger(ctx).Warn("parse batch failed: infrastructure, will retry",
					"tenant", plan.Tenant, "repo", plan.Repo, "commit", plan.Commit, "batch", t.n, "in", st.wait.String(), "cause", t.cause)
			}
			reason, poison := st.reason, st.poison
			switch {
			case !t.retryAt.IsZero():
				sent, err := t.retry(publish(t))
				if err != nil {
					return out, err
				}
				if sent {
					out.Retried++
				}
				next = append(next, t)
			case poison && len(t.missing) == 1:
				// The handler stops at the file that fails: the only
				// missing file of a dead batch is the poison.
				for i := range t.missing {
					activity.GetLogger(ctx).Warn("parse failed: file left out", "tenant", plan.Tenant, "repo", plan.Repo, "commit", plan.Commit,
						"file", t.files[i].Path, "reason", firstLine(reason))
					out.Failed = append(out.Failed, t.files[i].Path)
					out.LeftOut = append(out.LeftOut, LeftOut{Path: t.files[i].Path, Reason: firstLine(reason)})
				}
			case poison:
				// Find the poison file: re-send the missing files one by
				// one. They are queued first, and published as the window
				// lets them like any batch: published at once, a dead
				// batch of 64 put 64 messages (each retried to its last
				// delivery) in the queue, past the window.
				out.Split++
				var split []*tracked
				for _, i := range slices.Sorted(maps.Keys(t.missing)) {
					split = append(split, &tracked{n: t.n, files: t.files[i : i+1], missing: map[int]bool{0: true}, id: t.base + "/f" + strconv.Itoa(i)})
				}
				queued = append(split, queued...)
				queuedFiles += len(split)
			case time.Since(t.sent) > a.parseTimeout():
				sent, err := t.resendNow(publish(t))
				if err != nil {
					return out, err
				}
				if sent {
					out.Resent++
				}
				next = append(next, t)
			default:
				next = append(next, t)
			}
		}
		open = next
		if err := fill(); err != nil {
			return out, err
		}
		left := queuedFiles
		for _, t := range open {
			left += len(t.missing)
		}
		activity.RecordHeartbeat(ctx, ParseHeartbeat{Planned: in.Plan.Changed, Missing: left, Failed: len(out.Failed), Quiet: still.see(left, time.Now())})
		only = nil
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-stopping(ctx):
			return out, errStopping()
		case <-tick.C:
		case d := <-wake.c:
			w := wake.drain(d)
			only = &w
		case d := <-shareWake.c:
			shareWake.drain(d)
			only = &woken{} // none of ours finished: only fill
		}
	}
	sort.Strings(out.Failed)
	slices.SortFunc(out.LeftOut, func(a, b LeftOut) int { return strings.Compare(a.Path, b.Path) })
	out.Parsed = in.Plan.Changed - len(out.Failed)
	return out, nil
}

// missingFiles are the files of t without a result, in plan order (not map
// order: which file of a re-sent batch a worker reaches first decides the
// outcome).
func (t *tracked) missingFiles() []source.File {
	var files []source.File
	for _, i := range slices.Sorted(maps.Keys(t.missing)) {
		files = append(files, t.files[i])
	}
	return files
}

func slicesDeleteDone(ts []*tracked) []*tracked {
	out := ts[:0]
	for _, t := range ts {
		if len(t.missing) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// check removes the files whose results exist from the batches' missing sets.
func (a *Activities) check(ctx context.Context, tenant string, ts []*tracked) error {
	for _, t := range ts {
		for i := range t.missing {
			ok, err := a.Store.Exists(ctx, pipeline.ResultKey(tenant, t.files[i]))
			if err != nil {
				return err
			}
			if ok {
				delete(t.missing, i)
			}
		}
	}
	return nil
}

// jobSubject is the queue subject of one snapshot's jobs, so that waiting
// for them reads only their dead letters: the tenant's share, then the
// snapshot. Both are hashes: tenant and repository names may hold
// characters a subject cannot. The share is what a stage's share limit
// counts (natsq.Queue.SetShareLimit): one tenant's batches in the queue
// at once, whatever its snapshots in progress.
func jobSubject(tenant, repo, commit string) string {
	t := sha256.Sum256([]byte(tenant))
	h := sha256.Sum256([]byte(tenant + "\x00" + repo + "\x00" + commit))
	return "t" + hex.EncodeToString(t[:8]) + ".s" + hex.EncodeToString(h[:8])
}

// shareFull reports a publish refused because the tenant's share of the
// stage's queue is full: the batch stays queued and is published again on
// a later round, as the tenant's other batches finish.
func shareFull(err error) bool { return errors.Is(err, queue.ErrShareFull) }

// deadIDs maps the message IDs of the snapshot's dead-lettered messages of
// stage to their dead letters.
func (a *Activities) deadIDs(ctx context.Context, stage, subject string) (map[string]queue.DeadLetter, error) {
	dls, err := a.Queue.DeadLettersOf(ctx, stage, subject)
	if err != nil {
		return nil, err
	}
	m := make(map[string]queue.DeadLetter, len(dls))
	for _, d := range dls {
		m[d.ID] = d
	}
	return m, nil
}

// GraphInput is the input of Graph.
type GraphInput struct {
	Job pipeline.GraphJob
	Run string
}

// Graph publishes the graph job and waits, heartbeating, until the segment
// exists. The job is re-sent after ParseTimeout; a dead-lettered job fails
// the activity without retry.
func (a *Activities) Graph(ctx context.Context, in GraphInput) (string, error) {
	key := in.Job.SegmentKey()
	data, err := json.Marshal(in.Job)
	if err != nil {
		return "", err
	}
	base := fmt.Sprintf("%s/%s/%s/%s/graph", in.Job.Tenant, in.Job.Repo, in.Job.Commit, in.Run)
	ids := map[string]bool{base: true}
	subject := jobSubject(in.Job.Tenant, in.Job.Repo, in.Job.Commit)
	// Watch before publishing: the job's notification wakes the wait.
	wake := a.watch(ctx, pipeline.StageGraph, subject)
	defer wake.stop()
	if err := a.Queue.Publish(ctx, pipeline.StageGraph, subject, data, base); err != nil {
		return "", err
	}
	sent := time.Now()
	var retryAt time.Time // when to re-publish after an infrastructure failure
	infra, resends := 0, 0
	tick := time.NewTicker(a.poll())
	defer tick.Stop()
	for {
		ok, err := a.Store.Exists(ctx, key)
		if err != nil {
			return "", err
		}
		if ok {
			return key, nil
		}
		dls, err := a.Queue.DeadLettersOf(ctx, pipeline.StageGraph, subject)
		if err != nil {
			return "", err
		}
		for _, d := range dls {
			if !ids[d.ID] {
				continue
			}
			if d.Poison() {
				return "", graphPoison(d.Reason)
			}
			// An infrastructure failure: retry after a delay, or give up.
			delete(ids, d.ID)
			delays := a.infraRetry()
			if infra >= len(delays) {
				return "", temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("graph job failed after %d retries: %s", infra, firstLine(d.Reason)), ErrInfra, nil)
			}
			activity.GetLogger(ctx).Warn("graph job failed: infrastructure, will retry", "tenant", in.Job.Tenant, "repo", in.Job.Repo,
				"commit", in.Job.Commit, "in", delays[infra].String(), "cause", firstLine(d.Reason))
			retryAt = time.Now().Add(delays[infra])
		}
		if !retryAt.IsZero() && len(ids) == 0 && time.Now().After(retryAt) {
			infra++
			id := base + "#i" + strconv.Itoa(infra)
			if err := a.Queue.Publish(ctx, pipeline.StageGraph, subject, data, id); err != nil {
				return "", err
			}
			ids[id] = true
			retryAt, sent = time.Time{}, time.Now()
		}
		if retryAt.IsZero() && time.Since(sent) > a.parseTimeout() {
			resends++
			id := base + "#r" + strconv.Itoa(resends)
			if err := a.Queue.Publish(ctx, pipeline.StageGraph, subject, data, id); err != nil {
				return "", err
			}
			ids[id] = true
			sent = time.Now()
		}
		activity.RecordHeartbeat(ctx, key)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-stopping(ctx):
			return "", errStopping()
		case <-tick.C:
		case d := <-wake.c:
			wake.drain(d) // one round answers all
		}
	}
}

// GraphWait is Graph for at most LocalWait, run as a local activity: it
// publishes the graph job (the same message ID as Graph's, so Graph after
// it does not publish the job again) and returns the segment key once the
// segment exists, or "" when the wait was cut short or failed (the
// workflow then runs Graph, which finds the segment or the job's dead
// letter).
func (a *Activities) GraphWait(ctx context.Context, in GraphInput) (string, error) {
	if a.localWait() < 0 {
		return "", nil
	}
	wctx, cancel := context.WithTimeout(ctx, a.localWait())
	defer cancel()
	key, err := a.Graph(wctx, in)
	if err != nil {
		return "", nil
	}
	return key, nil
}

// PublishInput is the input of Publish.
type PublishInput struct {
	Tenant, Repo, Commit, Segment string
	Complete                      bool // no file was left out of the segment
}

// PublishResult is the result of Publish.
type PublishResult struct {
	Previous string // commit HEAD pointed at before ("" if none)
}

// Publish moves the repository's HEAD to the segment with a compare-and-swap,
// after checking that the segment is fully written (it exists: segments are
// written in one Put). A failing store fails the activity, for Temporal to
// retry; HEAD is then unchanged.
func (a *Activities) Publish(ctx context.Context, in PublishInput) (res PublishResult, err error) {
	defer keepAlive(ctx)()
	// What this publish's swap wrote and what it replaced (nil: none).
	var wrote, replaced []byte
	defer func() {
		// A HEAD moved after a DELETE ended the workflow would bring the
		// repository back: queryable, counted, naming removed objects.
		// The run that started this snapshot is asked, not the latest: a
		// repository deleted and indexed again under its name has another
		// run, whose HEAD this swap may have replaced; that one is put
		// back (a DELETE removed any other before the run ended).
		if err != nil || wrote == nil || !a.ownerRunGone(ctx, in.Tenant, in.Repo) {
			return
		}
		dctx := context.WithoutCancel(ctx)
		hk := index.HeadKey(in.Tenant, in.Repo)
		var uerr error
		if replaced == nil {
			if cur, gerr := a.Store.Get(dctx, hk); gerr == nil && bytes.Equal(cur, wrote) {
				uerr = a.Store.Delete(dctx, hk)
			}
		} else if serr := a.Store.Swap(dctx, hk, wrote, replaced); serr != nil && !errors.Is(serr, blob.ErrConflict) {
			uerr = serr // a conflict: HEAD moved on since, not this one's any more
		}
		if uerr != nil && !errors.Is(uerr, blob.ErrNotFound) {
			activity.GetLogger(ctx).Warn("publish of a deleted repository: HEAD left", "key", hk, "error", uerr)
		}
		res, err = PublishResult{}, temporal.NewNonRetryableApplicationError("the repository was deleted during its publish", errInvalid, nil)
	}()
	ok, err := a.Store.Exists(ctx, in.Segment)
	if err != nil {
		return res, err
	}
	if !ok {
		return res, fmt.Errorf("publish %s/%s: segment %s missing", in.Tenant, in.Repo, in.Segment)
	}
	next := index.Head{Commit: in.Commit, Segment: in.Segment, Built: time.Now().UTC().Format(time.RFC3339), Complete: in.Complete}
	hk := index.HeadKey(in.Tenant, in.Repo)
	if err := index.DropLegacyHead(ctx, a.Store, in.Tenant, in.Repo); err != nil {
		return res, fmt.Errorf("move head: %w", err)
	}
	for range 5 {
		old, err := a.Store.Get(ctx, hk)
		if errors.Is(err, blob.ErrNotFound) {
			old = nil
		} else if err != nil {
			return res, fmt.Errorf("read head: %w", err)
		}
		if old != nil {
			var h index.Head
			if err := json.Unmarshal(old, &h); err == nil {
				if h.Commit == in.Commit && h.Segment == in.Segment && h.Complete == in.Complete {
					// Already published (a retry after a swap whose reply
					// was lost, or the same index again): the commit
					// before it is still the previous one, for GC to keep.
					res.Previous = h.Previous
					return res, nil
				}
			}
		}
		nh := index.NextHead(old, next)
		res.Previous = nh.Previous
		head, err := json.Marshal(nh)
		if err != nil {
			return res, err
		}
		err = a.Store.Swap(ctx, hk, old, head)
		if err == nil {
			wrote, replaced = head, old
			return res, nil
		}
		if !errors.Is(err, blob.ErrConflict) {
			return res, classify(fmt.Errorf("move head: %w", err))
		}
	}
	return res, fmt.Errorf("move head of %s/%s: too many concurrent updates", in.Tenant, in.Repo)
}

// GCInput is the input of GC: the commits whose objects are kept.
type GCInput struct {
	Tenant, Repo string
	Keep         []string
}

// GCResult is the result of GC.
type GCResult struct {
	Deleted int
	Points  int // vector points deleted
}

// GC deletes the manifests, plans, segments and vector sets of the
// repository whose commit is not kept (the current and the previous HEAD),
// and the repository's vector points that no kept snapshot references.
// The parse and embedding caches are shared by content across a tenant's
// repositories and are never collected here.
func (a *Activities) GC(ctx context.Context, in GCInput) (GCResult, error) {
	defer keepAlive(ctx)()
	var res GCResult
	keep := map[string]bool{}
	for _, c := range in.Keep {
		keep[c] = true
	}
	// HEAD is never collected, whatever the caller says.
	if h, err := index.ReadHead(ctx, a.Store, in.Tenant, in.Repo); err == nil {
		keep[h.Commit] = true
	}
	// A GC whose run has ended (a DELETE ended it) stops: the DELETE
	// removes the repository's objects itself, and what is listed may be
	// of the repository indexed again under the same name since (its
	// build's manifest, plan, segment, shards and points, which no keep
	// names). Asked after the listings, before their removals: an object
	// of another run listed was written after this run ended. (One
	// question for the five listings, one for the vector points: each
	// costs two calls to Temporal.)
	gone := func() bool { return a.ownerRunGone(ctx, in.Tenant, in.Repo) }
	if gone() {
		return res, nil
	}
	n, err := a.pruneVectors(ctx, in.Tenant, in.Repo, keep, gone)
	if err != nil {
		return res, fmt.Errorf("gc vectors: %w", err)
	}
	res.Points = n
	var drop []string
	for _, dir := range []struct{ root, ext string }{{"manifests/", ".json"}, {"plans/", ".json"}, {"segments/", ".seg"}, {"embedplans/", ".json"}, {"vectorsets/", ".json"}} {
		prefix := index.RepoPrefix(dir.root, in.Tenant, in.Repo)
		keys, err := a.Store.List(ctx, prefix)
		if err != nil {
			return res, err
		}
		for _, k := range keys {
			name := strings.TrimPrefix(k, prefix)
			if strings.Contains(name, "/") || !strings.HasSuffix(name, dir.ext) {
				continue // another repository nested under this name
			}
			if keep[pipeline.SegmentCommit(strings.TrimSuffix(name, dir.ext))] {
				continue
			}
			drop = append(drop, k)
		}
	}
	if len(drop) > 0 && gone() {
		return res, nil
	}
	for _, k := range drop {
		if err := a.Store.Delete(ctx, k); err != nil {
			return res, err
		}
		res.Deleted++
	}
	n, err = pipeline.CollectShardsUnless(ctx, a.Store, in.Tenant, in.Repo, gone)
	res.Deleted += n
	return res, err
}

// firstLine is the part of a dead-letter reason before the stack trace.
func firstLine(s string) string {
	if i := strings.Index(s, " | "); i >= 0 {
		return s[:i]
	}
	return s
}

// errWorkerStopping is the application error type of a wait that its
// worker's stop cut short.
const errWorkerStopping = "WorkerStopping"

// stopping is closed when the worker running the activity of ctx begins
// to stop (nil outside an activity: never). The SDK cancels an activity's
// context only once the worker's stop timeout has run out, so a wait that
// watched ctx alone held every stop for that long.
func stopping(ctx context.Context) <-chan struct{} {
	if !activity.IsActivity(ctx) {
		return nil
	}
	return activity.GetWorkerStopChannel(ctx)
}

// errStopping ends a wait whose worker is stopping. It is retryable: the
// workflow's retry policy (no limit of attempts within the activity's
// ScheduleToClose) runs the wait again, on this worker's next start or on
// another worker, and a wait starts over from what the store and the
// queue hold, so nothing it waited for is lost. Benign: it is logged as
// an expected stop, not as a failure.
func errStopping() error {
	return temporal.NewApplicationErrorWithOptions("wait cut short: the worker is stopping", errWorkerStopping,
		temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign})
}

// keepAlive records an activity heartbeat every few seconds until the
// returned stop function is called.
func keepAlive(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { close(done) }
}

// onBranch reads where in.Branch is now in in.Location (fetched through
// the tenant's network policy into the clone cache, or read from a local
// repository): its tip, and whether commit is the tip or an ancestor of
// it. A branch gone from the location is no error: tip "", not on it.
func (a *Activities) onBranch(ctx context.Context, in SnapshotInput, commit string) (tip string, on bool, err error) {
	if !webhook.ValidBranch(in.Branch) {
		return "", false, invalid(fmt.Errorf("invalid branch name %q", in.Branch))
	}
	s, err := pipeline.OpenReader(netguard.With(ctx, a.Net.For(in.Tenant)), in.Tenant, in.Location, "refs/heads/"+in.Branch, a.CacheDir)
	if errors.Is(err, source.ErrRevisionNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer s.Close()
	if s.Commit == commit {
		return s.Commit, true, nil
	}
	on, err = s.Descends(commit)
	return s.Commit, on, err
}

// forward says whether a Forward push of snap's commit may be published
// over the published commit head. A push never moves HEAD back: a
// replayed or late delivery of an older commit leaves the published one
// in place. A push naming its branch is published only while its commit
// is on the branch in the repository: ahead of HEAD when the branch's tip
// is it or descends from it (a busy branch moved on), behind or beside
// HEAD only as the tip itself (a reset, an amend or a rebase,
// force-pushed). A late or replayed delivery of a commit the branch left
// is not published, in whatever order the deliveries came. Only a push
// without a branch (a signal of an older version) walks HEAD's history
// for the ancestor check, which the branch's answer makes moot.
func (a *Activities) forward(ctx context.Context, in SnapshotInput, snap *source.Snapshot, head string) (bool, error) {
	if in.Branch == "" {
		behind, err := snap.IsAncestor(head)
		if err != nil {
			return false, fmt.Errorf("check %s against the published %s: %w", snap.Commit, head, err)
		}
		return !behind, nil
	}
	tip, on, err := a.onBranch(ctx, in, snap.Commit)
	if err != nil {
		return false, classify(fmt.Errorf("check %s against the tip of branch %s: %w", snap.Commit, in.Branch, err))
	}
	if tip == snap.Commit || !on {
		return tip == snap.Commit, nil
	}
	ahead, err := snap.Descends(head)
	if err != nil {
		return false, fmt.Errorf("check %s against the published %s: %w", snap.Commit, head, err)
	}
	return ahead, nil
}
