package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// leaseEnv runs a TenantLeaseWorkflow whose grants are recorded in order.
func leaseEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *[]string) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	env.RegisterWorkflow(TenantLeaseWorkflow)
	env.RegisterActivity(&Activities{})
	var grants []string
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", LeaseGrantSignal, mock.Anything).Return(
		func(_, owner, _, _ string, tok any) error {
			grants = append(grants, owner+"="+tok.(string))
			return nil
		})
	return env, &grants
}

func at(env *testsuite.TestWorkflowEnvironment, d time.Duration, signal string, arg any) {
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(signal, arg) }, d)
}

// statusAt answers the workflow's status query into v at d.
func statusAt(t *testing.T, env *testsuite.TestWorkflowEnvironment, d time.Duration, v any) {
	env.RegisterDelayedCallback(func() {
		r, err := env.QueryWorkflow(StatusQuery)
		if err == nil {
			err = r.Get(v)
		}
		if err != nil {
			t.Error(err)
		}
	}, d)
}

// ask sends an acquire update at d and records its answer in answers as
// "token=true|false".
func ask(t *testing.T, env *testsuite.TestWorkflowEnvironment, d time.Duration, r LeaseRequest, answers *[]string) {
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(LeaseAcquireUpdate, fmt.Sprintf("%s-%v", r.Token, d), &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("update of %s rejected: %v", r.Token, err) },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				if err != nil {
					t.Errorf("update of %s: %v", r.Token, err)
					return
				}
				*answers = append(*answers, fmt.Sprintf("%s=%v", r.Token, v))
			},
		}, r)
	}, d)
}

// The lease grants at most Slots requests at a time, in the order they
// came: a request is answered at once (holds, or waits); a release grants
// the next waiting one by a signal; asking again while holding answers
// true; an owner's newer request replaces its stale one; it ends once
// idle.
func TestTenantLeaseBoundsAndOrders(t *testing.T) {
	env, grants := leaseEnv(t)
	var answers []string
	req := func(owner, tok string) LeaseRequest {
		return LeaseRequest{Tenant: "t", Owner: owner, Token: tok, Slots: 2}
	}
	ask(t, env, 1*time.Second, req("a", "a1"), &answers)
	ask(t, env, 2*time.Second, req("b", "b1"), &answers)
	ask(t, env, 3*time.Second, req("c", "c1"), &answers)
	ask(t, env, 4*time.Second, req("d", "d1"), &answers)
	ask(t, env, 5*time.Second, req("a", "a1"), &answers) // asked again: holds
	ask(t, env, 6*time.Second, req("c", "c1"), &answers) // waiting already: waits
	var mid LeaseCarry
	statusAt(t, env, 7*time.Second, &mid)
	at(env, 10*time.Second, LeaseReleaseSignal, "b1") // c1 next
	at(env, 11*time.Second, LeaseReleaseSignal, "zz") // unknown: nothing
	// d's run was started again: its new request replaces the waiting one.
	ask(t, env, 12*time.Second, req("d", "d2"), &answers)
	at(env, 20*time.Second, LeaseReleaseSignal, "a1") // d2 next
	at(env, 30*time.Second, LeaseReleaseSignal, "c1")
	at(env, 31*time.Second, LeaseReleaseSignal, "d2")
	ask(t, env, 32*time.Second, req("e", "e1"), &answers) // a free slot: holds at once
	at(env, 33*time.Second, LeaseReleaseSignal, "e1")
	env.OnActivity((&Activities{}).LeaseHoldersGone, mock.Anything, mock.Anything).Return([]string(nil), nil)
	env.ExecuteWorkflow(TenantLeaseWorkflow, "t", (*LeaseCarry)(nil))
	if !env.IsWorkflowCompleted() {
		t.Fatal("lease did not end once idle")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a1=true", "b1=true", "c1=false", "d1=false", "a1=true", "c1=false", "d2=false", "e1=true"}; !slices.Equal(answers, want) {
		t.Errorf("answers %v, want %v", answers, want)
	}
	if want := []string{"c=c1", "d=d2"}; !slices.Equal(*grants, want) {
		t.Errorf("grants signalled %v, want %v", *grants, want)
	}
	if len(mid.Holders) != 2 || len(mid.Waiting) != 2 || mid.Waiting[0].Token != "c1" || mid.Slots != 2 {
		t.Errorf("state after 4 requests = %+v, want 2 holders, c1 and d1 waiting", mid)
	}
}

// A holder that is gone (its RepoWorkflow terminated, or its release
// lost) is dropped at the next check, and its slot granted.
func TestTenantLeaseDropsGoneHolders(t *testing.T) {
	old := leaseCheck
	leaseCheck = 30 * time.Second
	t.Cleanup(func() { leaseCheck = old })
	env, grants := leaseEnv(t)
	var answers []string
	ask(t, env, time.Second, LeaseRequest{Tenant: "t", Owner: "a", Token: "a1", Slots: 1}, &answers)
	ask(t, env, 2*time.Second, LeaseRequest{Tenant: "t", Owner: "b", Token: "b1", Slots: 1}, &answers)
	checks := 0
	env.OnActivity((&Activities{}).LeaseHoldersGone, mock.Anything, mock.Anything).Return(
		func(_ context.Context, hs []LeaseRequest) ([]string, error) {
			checks++
			switch {
			case checks == 1:
				return nil, errors.New("server busy") // kept, checked again
			case len(hs) == 1 && hs[0].Token == "a1":
				return []string{"a1"}, nil
			}
			return nil, nil
		})
	at(env, 5*time.Minute, LeaseReleaseSignal, "b1")
	env.ExecuteWorkflow(TenantLeaseWorkflow, "t", (*LeaseCarry)(nil))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a1=true", "b1=false"}; !slices.Equal(answers, want) {
		t.Errorf("answers %v, want %v", answers, want)
	}
	if want := []string{"b=b1"}; !slices.Equal(*grants, want) {
		t.Errorf("grants signalled %v, want %v", *grants, want)
	}
	if checks < 2 {
		t.Errorf("%d checks, want the failed one retried", checks)
	}
}

// A lease continues as new after leaseEvents requests, carrying its
// holders and waiters.
func TestTenantLeaseContinuesAsNew(t *testing.T) {
	old := leaseEvents
	leaseEvents = 3
	t.Cleanup(func() { leaseEvents = old })
	env, _ := leaseEnv(t)
	var answers []string
	for i, o := range []string{"a", "b", "c"} {
		ask(t, env, time.Duration(i+1)*time.Second, LeaseRequest{Tenant: "t", Owner: o, Token: o + "1", Slots: 1}, &answers)
	}
	env.ExecuteWorkflow(TenantLeaseWorkflow, "t", (*LeaseCarry)(nil))
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("ended with %v, want continue-as-new", err)
	}
	var tenant string
	var carry *LeaseCarry
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &tenant, &carry); err != nil {
		t.Fatal(err)
	}
	if tenant != "t" || carry == nil || len(carry.Holders) != 1 || len(carry.Waiting) != 2 || carry.Waiting[1].Token != "c1" {
		t.Errorf("continued as (%q, %+v), want a1 holding, b1 and c1 waiting", tenant, carry)
	}
}

// A RepoWorkflow asks for a slot before a snapshot and waits "queued"
// until the grant; a push that arrives during a snapshot keeps the slot
// for the next one without asking; once idle it releases the slot, and
// a run that then continues as new waits until the release is delivered.
func TestRepoWorkflowTakesTenantSlot(t *testing.T) {
	env, f := repoEnv(t, 3)
	var asked []LeaseRequest
	env.OnActivity((&Activities{}).AcquireLease, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r LeaseRequest) (LeaseAnswer, error) {
			asked = append(asked, r)
			return LeaseAnswer{Bounded: true, Granted: len(asked) > 1}, nil // the first waits for a grant
		})
	// A release is delivered a second (workflow clock) after it is sent,
	// as through the server's queues. The test environment runs the mock
	// apart from the workflow: without a delay a run that ends at once
	// after releasing missed the last release only now and then; with it,
	// every time.
	var released []string
	env.OnSignalExternalWorkflow(mock.Anything, LeaseWorkflowID("t"), "", LeaseReleaseSignal, mock.Anything).Return(
		func(_, _, _, _ string, tok any) error {
			released = append(released, tok.(string))
			return nil
		}).After(time.Second)
	push(env, 0, "c1")
	var queued, during RepoStatus
	statusAt(t, env, 5*time.Second, &queued)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(LeaseGrantSignal, "not-this-one") // a stale grant is ignored
	}, 6*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(LeaseGrantSignal, queued.Lease)
	}, 10*time.Second)
	push(env, 30*time.Second, "c2")           // during c1: c2 keeps the slot
	statusAt(t, env, 90*time.Second, &during) // c2 running
	push(env, 5*time.Minute, "c3")            // after idle: asks again
	env.ExecuteWorkflow(RepoWorkflow, "t", "r", (*RepoCarry)(nil))
	continued(t, env)

	if !slices.Equal(f.commits, []string{"c1", "c2", "c3"}) {
		t.Errorf("snapshots of %v", f.commits)
	}
	if queued.State != StateQueued || queued.Lease == "" || queued.Current != "c1" {
		t.Errorf("status before the grant = %+v, want queued with a lease token", queued)
	}
	if during.State != StateIndexing || during.Lease != queued.Lease {
		t.Errorf("status during c2 = %+v, want indexing on c1's slot %q", during, queued.Lease)
	}
	if len(asked) != 2 || asked[0].Owner != RepoWorkflowID("t", "r") || asked[0].Tenant != "t" || asked[1].Token == asked[0].Token {
		t.Errorf("asked %+v, want two requests of this repository (c1, c3), two tokens", asked)
	}
	if len(asked) == 2 && !slices.Equal(released, []string{asked[0].Token, asked[1].Token}) {
		t.Errorf("released %v, want c1's slot after c2, then c3's before the run continued as new", released)
	}
}

// A full line does not keep more requests: they are answered "wait",
// not kept, and get in line when they ask again after a slot frees.
func TestTenantLeaseLineBounded(t *testing.T) {
	old := leaseMaxWaiting
	leaseMaxWaiting = 1
	t.Cleanup(func() { leaseMaxWaiting = old })
	env, grants := leaseEnv(t)
	var answers []string
	req := func(o string) LeaseRequest { return LeaseRequest{Tenant: "t", Owner: o, Token: o + "1", Slots: 1} }
	ask(t, env, 1*time.Second, req("a"), &answers)
	ask(t, env, 2*time.Second, req("b"), &answers) // in line
	ask(t, env, 3*time.Second, req("c"), &answers) // line full: not kept
	var mid LeaseCarry
	statusAt(t, env, 4*time.Second, &mid)
	at(env, 10*time.Second, LeaseReleaseSignal, "a1") // b granted
	ask(t, env, 11*time.Second, req("c"), &answers)   // c asks again: in line
	at(env, 20*time.Second, LeaseReleaseSignal, "b1") // c granted
	at(env, 30*time.Second, LeaseReleaseSignal, "c1")
	env.OnActivity((&Activities{}).LeaseHoldersGone, mock.Anything, mock.Anything).Return([]string(nil), nil)
	env.ExecuteWorkflow(TenantLeaseWorkflow, "t", (*LeaseCarry)(nil))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(mid.Waiting) != 1 || mid.Waiting[0].Token != "b1" {
		t.Errorf("line with c's first request = %+v, want b alone", mid.Waiting)
	}
	if want := []string{"a1=true", "b1=false", "c1=false", "c1=false"}; !slices.Equal(answers, want) {
		t.Errorf("answers %v, want %v", answers, want)
	}
	if want := []string{"b=b1", "c=c1"}; !slices.Equal(*grants, want) {
		t.Errorf("grants %v, want %v", *grants, want)
	}
}

// A snapshot child's ID is never a RepoWorkflow's: the old form was, for
// a repository named like the child.
func TestSnapshotWorkflowID(t *testing.T) {
	if got, want := SnapshotWorkflowID("t", "r", 3, true), "codectx/repo/t/r@snapshot-3"; got != want {
		t.Errorf("child ID %q, want %q", got, want)
	}
	if SnapshotWorkflowID("t", "r", 1, false) != RepoWorkflowID("t", "r/snapshot-1") {
		t.Error("the old form no longer shows the collision it had")
	}
	if SnapshotWorkflowID("t", "r", 1, true) == RepoWorkflowID("t", "r/snapshot-1") {
		t.Error("a child ID equals a repository's workflow ID")
	}
}
