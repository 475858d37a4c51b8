package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// A tenant's snapshots in progress are bounded (Activities.TenantSnapshots)
// so that one tenant's many repositories cannot fill the shared parse and
// graph queues ahead of every other tenant's pushes. The bound is held by
// one TenantLeaseWorkflow per tenant, where the workflows run, so it holds
// however many orchestrators and gateways there are. A RepoWorkflow asks
// it for a slot before each snapshot (AcquireLease, an update-with-start
// answered at once), waits for the grant signal if none was free, and
// releases the slot when the snapshot has finished. Slots are granted
// first come, first served within the tenant.

// The update and signal names of TenantLeaseWorkflow, and the grant it
// signals to a waiting owner.
const (
	LeaseAcquireUpdate = "lease-acquire"
	LeaseReleaseSignal = "lease-release"
	LeaseGrantSignal   = "lease-grant"
)

// StateQueued is RepoStatus.State while a snapshot waits for one of its
// tenant's slots (Activities.TenantSnapshots).
const StateQueued = "queued"

// LeaseWorkflowID is the workflow ID of the tenant's TenantLeaseWorkflow.
func LeaseWorkflowID(tenant string) string { return "codectx/lease/" + tenant }

// LeaseRequest asks for one of the tenant's snapshot slots. Owner is the
// workflow ID of the asking RepoWorkflow (where the grant goes); Token
// names this one request, and the grant carries it back.
type LeaseRequest struct {
	Tenant, Owner, Token string
	Slots                int // the bound, set by AcquireLease from the worker's configuration
}

// LeaseCarry is the state a TenantLeaseWorkflow carries across
// continue-as-new.
type LeaseCarry struct {
	Slots   int
	Holders []LeaseRequest
	Waiting []LeaseRequest
}

// Timings of the lease; tests lower them.
var (
	// leaseCheck is how often a lease with holders asks whether they still
	// hold their slots (a terminated RepoWorkflow never releases).
	leaseCheck = time.Minute
	// leaseIdle is how long a lease without holders or waiters stays up.
	leaseIdle = 10 * time.Minute
	// leaseResend is how long a RepoWorkflow waits for a grant before it
	// asks again (the lease workflow may have been terminated).
	leaseResend = 5 * time.Minute
	// leaseEvents bounds the requests of one lease run before it
	// continues as new.
	leaseEvents = 1000
	// leaseMaxWaiting bounds the requests a lease keeps in line (a tenant
	// may hold any number of repositories). A request with 200-character
	// tenant and repository names is about 700 bytes of JSON, so 2048 stay
	// under Temporal's 2 MB bound of the continue-as-new input. Requests
	// past it are answered "wait" and ask again later.
	leaseMaxWaiting = 2048
)

var (
	leaseOpts = workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, ScheduleToCloseTimeout: 10 * time.Minute, RetryPolicy: retry}
	// AcquireLease runs as a local activity: without a bound it answers
	// at once, inside the workflow task.
	leaseLocalOpts = workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second, ScheduleToCloseTimeout: 10 * time.Minute, RetryPolicy: retry}
)

// TenantLeaseWorkflow grants the tenant's snapshot slots: at most Slots
// requests hold one at a time, the others wait in the order they came.
// A request is an update (LeaseAcquireUpdate) answered at once: true when
// it holds a slot, false when it waits; a waiting request is granted
// later by a LeaseGrantSignal to its owner. carry is nil when started,
// the state when continued as new.
func TenantLeaseWorkflow(ctx workflow.Context, tenant string, carry *LeaseCarry) error {
	var a *Activities
	st := LeaseCarry{}
	if carry != nil {
		st = *carry
	}
	if err := workflow.SetQueryHandler(ctx, StatusQuery, func() (LeaseCarry, error) { return st, nil }); err != nil {
		return err
	}
	log := workflow.GetLogger(ctx)
	rel := workflow.GetSignalChannel(ctx, LeaseReleaseSignal)
	// changed wakes the loop below after an update changed the state.
	changed := workflow.NewBufferedChannel(ctx, 1)
	events := 0
	drop := func(owner, token string) {
		same := func(r LeaseRequest) bool { return r.Owner == owner || (token != "" && r.Token == token) }
		st.Holders = slices.DeleteFunc(st.Holders, same)
		st.Waiting = slices.DeleteFunc(st.Waiting, same)
	}
	holds := func(tok string) bool {
		return slices.ContainsFunc(st.Holders, func(h LeaseRequest) bool { return h.Token == tok })
	}
	acquire := func(r LeaseRequest) bool {
		events++
		if r.Slots > 0 {
			st.Slots = r.Slots
		}
		switch {
		case holds(r.Token): // asked again: the grant may have been lost
			return true
		case slices.ContainsFunc(st.Waiting, func(w LeaseRequest) bool { return w.Token == r.Token }):
			return false
		}
		// One RepoWorkflow runs one snapshot at a time: an older request of
		// the same owner is stale (its run was terminated and started again).
		drop(r.Owner, "")
		if len(st.Waiting) == 0 && len(st.Holders) < max(st.Slots, 1) {
			st.Holders = append(st.Holders, r)
			return true
		}
		if len(st.Waiting) >= leaseMaxWaiting {
			// Not kept: the owner asks again after leaseResend. The line
			// is carried across continue-as-new, which bounds its size.
			return false
		}
		st.Waiting = append(st.Waiting, r)
		return false
	}
	if err := workflow.SetUpdateHandler(ctx, LeaseAcquireUpdate, func(ctx workflow.Context, r LeaseRequest) (bool, error) {
		ok := acquire(r)
		changed.SendAsync(true)
		return ok, nil
	}); err != nil {
		return err
	}
	var check, idle workflow.Future
	for {
		for len(st.Waiting) > 0 && len(st.Holders) < max(st.Slots, 1) {
			r := st.Waiting[0]
			st.Waiting = st.Waiting[1:]
			st.Holders = append(st.Holders, r)
			// A grant that cannot be delivered (the owner is gone) is
			// dropped by the next check of the holders (LeaseHoldersGone).
			workflow.SignalExternalWorkflow(ctx, r.Owner, "", LeaseGrantSignal, r.Token)
		}
		if events >= leaseEvents || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			for tok := ""; rel.ReceiveAsync(&tok); tok = "" {
				drop("", tok)
			}
			return workflow.NewContinueAsNewError(ctx, TenantLeaseWorkflow, tenant, &st)
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(changed, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
		sel.AddReceive(rel, func(c workflow.ReceiveChannel, _ bool) {
			var tok string
			c.Receive(ctx, &tok)
			drop("", tok)
		})
		if len(st.Holders) > 0 {
			idle = nil
			if check == nil {
				check = workflow.NewTimer(ctx, leaseCheck)
			}
			sel.AddFuture(check, func(workflow.Future) {
				check = nil
				var gone []string
				actx := workflow.WithActivityOptions(ctx, leaseOpts)
				if err := workflow.ExecuteActivity(actx, a.LeaseHoldersGone, slices.Clone(st.Holders)).Get(ctx, &gone); err != nil {
					log.Warn("lease: checking the holders failed", "tenant", tenant, "error", err)
					return
				}
				for _, tok := range gone {
					log.Warn("lease: a holder no longer holds its slot; dropped", "tenant", tenant, "token", tok)
					drop("", tok)
				}
			})
		} else if len(st.Waiting) == 0 {
			if idle == nil {
				idle = workflow.NewTimer(ctx, leaseIdle)
			}
			done := false
			sel.AddFuture(idle, func(workflow.Future) { idle, done = nil, true })
			sel.Select(ctx)
			if done && rel.Len() == 0 && len(st.Holders) == 0 && len(st.Waiting) == 0 && workflow.AllHandlersFinished(ctx) {
				return nil
			}
			continue
		}
		sel.Select(ctx)
	}
}

// LeaseAnswer is what AcquireLease learnt.
type LeaseAnswer struct {
	Bounded bool // a bound is configured: without one no grant comes and none is needed
	Granted bool // the request holds a slot now; else a LeaseGrantSignal brings it
}

// AcquireLease asks the tenant's TenantLeaseWorkflow for a snapshot slot,
// starting it if it is not running (update-with-start: answered at once).
func (a *Activities) AcquireLease(ctx context.Context, r LeaseRequest) (LeaseAnswer, error) {
	if a.TenantSnapshots <= 0 {
		return LeaseAnswer{}, nil
	}
	r.Slots = a.TenantSnapshots
	id := LeaseWorkflowID(r.Tenant)
	c := activity.GetClient(ctx)
	start := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: id, TaskQueue: TaskQueue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, TenantLeaseWorkflow, r.Tenant, (*LeaseCarry)(nil))
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName: LeaseAcquireUpdate, Args: []any{r}, WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	var granted bool
	if err == nil {
		err = h.Get(ctx, &granted)
	}
	if err != nil {
		return LeaseAnswer{}, fmt.Errorf("lease of %s: %w", r.Tenant, err)
	}
	return LeaseAnswer{Bounded: true, Granted: granted}, nil
}

// LeaseHoldersGone returns the tokens of holders that no longer hold their
// slot: the owner is not running, or its status names another lease (a
// release that never arrived). A holder that cannot be asked is kept, and
// asked again at the next check; the others are still checked.
func (a *Activities) LeaseHoldersGone(ctx context.Context, holders []LeaseRequest) ([]string, error) {
	c := activity.GetClient(ctx)
	var gone []string
	for _, h := range holders {
		d, err := c.DescribeWorkflowExecution(ctx, h.Owner, "")
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			gone = append(gone, h.Token)
			continue
		case err != nil:
			activity.GetLogger(ctx).Warn("lease: cannot describe a holder; kept", "owner", h.Owner, "error", err)
			continue
		case d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			gone = append(gone, h.Token)
			continue
		}
		v, err := c.QueryWorkflow(ctx, h.Owner, "", StatusQuery)
		var st RepoStatus
		if err == nil {
			err = v.Get(&st)
		}
		if err != nil {
			activity.GetLogger(ctx).Warn("lease: cannot ask a holder its status; kept", "owner", h.Owner, "error", err)
			continue
		}
		if st.Lease != h.Token {
			gone = append(gone, h.Token)
		}
	}
	return gone, ctx.Err()
}

// waitLease takes one of the tenant's snapshot slots for the RepoWorkflow
// owner: it asks the lease and waits for the grant of token, handing the
// pushes that arrive meanwhile to take. It reports whether a slot is held
// (false: no bound configured, or the lease could not be asked, in which
// case the snapshot runs without one rather than not at all).
func waitLease(ctx workflow.Context, tenant, owner, token string, pushes workflow.ReceiveChannel, take func(Push)) bool {
	var a *Activities
	log := workflow.GetLogger(ctx)
	r := LeaseRequest{Tenant: tenant, Owner: owner, Token: token}
	actx := workflow.WithLocalActivityOptions(ctx, leaseLocalOpts)
	grants := workflow.GetSignalChannel(ctx, LeaseGrantSignal)
	for {
		var ans LeaseAnswer
		if err := workflow.ExecuteLocalActivity(actx, a.AcquireLease, r).Get(ctx, &ans); err != nil {
			log.Error("lease: could not ask for a slot; indexing without one", "tenant", tenant, "error", err)
			return false
		}
		if !ans.Bounded || ans.Granted {
			return ans.Bounded
		}
		tctx, cancel := workflow.WithCancel(ctx)
		timer := workflow.NewTimer(tctx, leaseResend)
		got, resend := false, false
		for !got && !resend {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(grants, func(c workflow.ReceiveChannel, _ bool) {
				var tok string
				c.Receive(ctx, &tok)
				got = tok == token // another token is a stale grant
			})
			sel.AddReceive(pushes, func(c workflow.ReceiveChannel, _ bool) {
				var p Push
				c.Receive(ctx, &p)
				take(p)
			})
			sel.AddFuture(timer, func(workflow.Future) { resend = true })
			sel.Select(ctx)
		}
		cancel()
		if got {
			return true
		}
	}
}

// releaseLease gives the slot of token back. It does not wait for the
// signal to be delivered (a round trip through the server's queues, a
// fifth of a second in `up`): the repository's next push starts at once.
// The future it returns is settled once the lease has the signal; a run
// that ends waits for it (the server drops a signal whose sender has
// closed).
func releaseLease(ctx workflow.Context, tenant, token string) workflow.Future {
	f := workflow.SignalExternalWorkflow(ctx, LeaseWorkflowID(tenant), "", LeaseReleaseSignal, token)
	workflow.Go(ctx, func(ctx workflow.Context) {
		if err := f.Get(ctx, nil); err != nil && !temporal.IsCanceledError(err) {
			// The lease drops the slot at its next check of the holders
			// (LeaseHoldersGone): the status no longer names it. The
			// owner's next request replaces it too.
			workflow.GetLogger(ctx).Warn("lease: release failed", "tenant", tenant, "error", err)
		}
	})
	return f
}
