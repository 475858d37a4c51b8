package workflows

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"
)

// leaseProbe stands in for the snapshot's work: it records how many
// snapshots of each tenant run at once, and when each started.
type leaseProbe struct {
	mu      sync.Mutex
	active  map[string]int
	most    map[string]int
	started map[string]time.Time
	hold    map[string]chan struct{} // repositories whose snapshot waits for a close
	run     time.Duration            // how long a snapshot takes; 0 is 300 ms
}

func (p *leaseProbe) Work(ctx context.Context, in SnapshotInput) error {
	p.mu.Lock()
	p.active[in.Tenant]++
	p.most[in.Tenant] = max(p.most[in.Tenant], p.active[in.Tenant])
	p.started[in.Tenant+"/"+in.Repo] = time.Now()
	hold := p.hold[in.Repo]
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.active[in.Tenant]--
		p.mu.Unlock()
	}()
	run := p.run
	if run == 0 {
		run = 300 * time.Millisecond
	}
	t := time.NewTimer(run)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if hold == nil {
				return nil
			}
			activity.RecordHeartbeat(ctx)
			t.Reset(100 * time.Millisecond)
		case <-hold:
			hold = nil
		}
	}
}

// On a real Temporal server, with a bound of 2 per tenant: beta's eight
// pushes run two at a time and wait "queued", while acme's push, made after
// all of beta's, runs at once; a holder whose RepoWorkflow is terminated
// gets its slot taken back at the lease's next check.
func TestTenantLeaseOnServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	old := leaseCheck
	leaseCheck = time.Second
	t.Cleanup(func() { leaseCheck = old })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ts, c := temporalTest(t)
	// A snapshot takes 1 s: longer than the nine pushes take under load,
	// so acme's push, made after all of beta's, lands in beta's first
	// rounds.
	probe := &leaseProbe{active: map[string]int{}, most: map[string]int{}, started: map[string]time.Time{}, hold: map[string]chan struct{}{
		"stuck": make(chan struct{}), "held": make(chan struct{}),
	}, run: time.Second}
	leaseWorker(ts, probe, 2)
	pushAll := func(tenant string, repos ...string) {
		t.Helper()
		for _, r := range repos {
			if _, err := SignalPush(ctx, c, Push{Tenant: tenant, Repo: r, Location: "loc/" + r}); err != nil {
				t.Fatal(err)
			}
		}
	}
	wait := func(tenant, repo string) RepoStatus {
		t.Helper()
		for {
			st, err := Status(ctx, c, tenant, repo)
			if err == nil && st.Received > 0 && st.Covered == st.Received && st.State == StateIdle {
				return st
			}
			if ctx.Err() != nil {
				t.Fatalf("%s/%s not indexed: %+v %v", tenant, repo, st, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var beta []string
	for i := range 8 {
		beta = append(beta, fmt.Sprintf("b%d", i))
	}
	pushAll("beta", beta...)
	pushAll("acme", "a")
	queued := false
	for range 20 {
		if st, err := Status(ctx, c, "beta", "b7"); err == nil && st.State == StateQueued && st.Lease != "" {
			queued = true
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !queued {
		t.Error("beta's last push never showed as queued behind its tenant's slots")
	}
	wait("acme", "a")
	for _, r := range beta {
		if st := wait("beta", r); st.LastError != "" || st.LastCommit != "c-"+r {
			t.Errorf("beta/%s: %+v", r, st)
		}
	}
	probe.mu.Lock()
	most, acme := probe.most["beta"], probe.started["acme/a"]
	later := 0
	for _, r := range beta {
		if probe.started["beta/"+r].After(acme) {
			later++
		}
	}
	probe.mu.Unlock()
	if most != 2 {
		t.Errorf("beta ran %d snapshots at once, want its bound of 2", most)
	}
	// Beta's eight take four rounds of 1 s; acme's, pushed after all of
	// them, starts in the first or second.
	if later < 4 {
		t.Errorf("only %d of beta's snapshots started after acme's, pushed after all of them; want acme not to wait for beta's", later)
	}

	// gamma: two holders and one waiting; the first holder's RepoWorkflow
	// is terminated (its slot never released), the waiting one then runs.
	pushAll("gamma", "stuck", "held")
	for ctx.Err() == nil {
		probe.mu.Lock()
		n := probe.active["gamma"]
		probe.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	pushAll("gamma", "next")
	time.Sleep(time.Second)
	if st, err := Status(ctx, c, "gamma", "next"); err != nil || st.State != StateQueued {
		t.Fatalf("gamma/next = %+v, %v; want queued behind two holders", st, err)
	}
	if err := c.TerminateWorkflow(ctx, RepoWorkflowID("gamma", "stuck"), "", "test: a holder that never releases"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	wait("gamma", "next")
	t.Logf("gamma/next ran %v after the holder was terminated (lease check every %v)", time.Since(start).Round(10*time.Millisecond), leaseCheck)
	close(probe.hold["held"])
	wait("gamma", "held")
	// A repository named like another's snapshot child ("d/snapshot-0"
	// was the ID of d's first child) indexes beside it.
	pushAll("delta", "d/snapshot-0", "d")
	for _, r := range []string{"d/snapshot-0", "d"} {
		if st := wait("delta", r); st.LastError != "" {
			t.Errorf("delta/%s: %s (%s)", r, st.LastError, st.LastDetail)
		}
	}

	v, err := c.QueryWorkflow(ctx, LeaseWorkflowID("gamma"), "", StatusQuery)
	var lc LeaseCarry
	if err == nil {
		err = v.Get(&lc)
	}
	if err != nil || len(lc.Holders) != 0 || len(lc.Waiting) != 0 {
		t.Errorf("gamma's lease after all finished = %+v, %v; want no holders or waiters", lc, err)
	}
}

// LeaseHoldersGone, on a real Temporal server: a holder that cannot be
// asked its status (here a running workflow with no status query) is
// kept, and the holders after it are still checked: one whose workflow
// does not exist and one whose workflow has ended are reported gone.
func TestLeaseHoldersGoneKeepsWhatItCannotAsk(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ts, c := temporalTest(t)
	a := &Activities{}
	silent := func(ctx workflow.Context) error { // runs until signalled, answers no status
		workflow.GetSignalChannel(ctx, "stop").Receive(ctx, nil)
		return nil
	}
	ended := func(workflow.Context) error { return nil }
	check := func(ctx workflow.Context, holders []LeaseRequest) ([]string, error) {
		var gone []string
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
		err := workflow.ExecuteActivity(actx, a.LeaseHoldersGone, holders).Get(ctx, &gone)
		return gone, err
	}
	ts.NewWorker(TaskQueue, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(silent, workflow.RegisterOptions{Name: "silent"})
		r.RegisterWorkflowWithOptions(ended, workflow.RegisterOptions{Name: "ended"})
		r.RegisterWorkflowWithOptions(check, workflow.RegisterOptions{Name: "check"})
		r.RegisterActivity(a)
	})
	opts := func(id string) client.StartWorkflowOptions {
		return client.StartWorkflowOptions{ID: id, TaskQueue: TaskQueue}
	}
	if _, err := c.ExecuteWorkflow(ctx, opts("silent-owner"), "silent"); err != nil {
		t.Fatal(err)
	}
	defer c.SignalWorkflow(context.Background(), "silent-owner", "", "stop", nil)
	run, err := c.ExecuteWorkflow(ctx, opts("ended-owner"), "ended")
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	holders := []LeaseRequest{
		{Tenant: "beta", Owner: "silent-owner", Token: "t-silent"},
		{Tenant: "beta", Owner: "no-such-owner", Token: "t-missing"},
		{Tenant: "beta", Owner: "ended-owner", Token: "t-ended"},
	}
	run, err = c.ExecuteWorkflow(ctx, opts("holders-check"), "check", holders)
	if err != nil {
		t.Fatal(err)
	}
	var gone []string
	if err := run.Get(ctx, &gone); err != nil {
		t.Fatalf("the check failed: %v", err)
	}
	if !slices.Equal(gone, []string{"t-missing", "t-ended"}) {
		t.Errorf("gone = %v, want the missing and the ended holders, and the one that cannot be asked kept", gone)
	}
}

// On a real Temporal server, a RepoWorkflow that continues as new right
// after its snapshot (here after each one) hands its slot on at once. The
// server delivers a signal only while its sender runs: a release sent in
// the task that continues as new was dropped, and the next repository
// waited for the lease's check of its holders (a minute).
func TestTenantLeaseReleasedAtContinueAsNew(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	oldCheck, oldRuns := leaseCheck, snapshotsPerRun
	leaseCheck, snapshotsPerRun = time.Minute, 1
	t.Cleanup(func() { leaseCheck, snapshotsPerRun = oldCheck, oldRuns })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ts, c := temporalTest(t)
	probe := &leaseProbe{active: map[string]int{}, most: map[string]int{}, started: map[string]time.Time{}, hold: map[string]chan struct{}{
		"first": make(chan struct{}),
	}}
	leaseWorker(ts, probe, 1)
	status := func(repo string) RepoStatus {
		t.Helper()
		for {
			st, err := Status(ctx, c, "eps", repo)
			if err == nil && st.Received > 0 {
				return st
			}
			if ctx.Err() != nil {
				t.Fatalf("eps/%s: %v", repo, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var firstRun string // the run that continues as new after its snapshot
	for _, r := range []string{"first", "second"} {
		run, err := SignalPush(ctx, c, Push{Tenant: "eps", Repo: r, Location: "loc/" + r})
		if err != nil {
			t.Fatal(err)
		}
		if r == "first" {
			firstRun = run
		}
		for ctx.Err() == nil && status(r).State == StateIdle {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if st := status("second"); st.State != StateQueued {
		t.Fatalf("eps/second = %+v; want queued behind first", st)
	}
	close(probe.hold["first"])
	start := time.Now()
	// Well under leaseCheck: the slot came with first's release, not with
	// the lease's check.
	for st := status("second"); st.Covered < st.Received; st = status("second") {
		if d := time.Since(start); d > leaseCheck/2 {
			t.Fatalf("eps/second still %s %v after first's snapshot ended; its slot was not released", st.State, d.Round(time.Second))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("eps/second indexed %v after first's snapshot ended", time.Since(start).Round(10*time.Millisecond))
	// The run gave back its slot, waited for the delivery and continued
	// as new, in that order (what TestReplay cannot check).
	if seq := releaseSeq(History(ctx, t, c, RepoWorkflowID("eps", "first"), firstRun)); !slices.Equal(seq, wantReleaseSeq) {
		t.Errorf("first's run holds %v, want %v", seq, wantReleaseSeq)
	}
	if *update {
		RecordHistory(ctx, t, c, RepoWorkflowID("eps", "first"), firstRun, "testdata/repo_release_history.json")
	}
}

// leaseWorker runs RepoWorkflow and the tenant lease on ts with tenant
// slots a tenant, and a SnapshotWorkflow that only runs probe.Work.
func leaseWorker(ts *temporaltest.TestServer, probe *leaseProbe, slots int) {
	fakeSnapshot := func(ctx workflow.Context, in SnapshotInput) (SnapshotResult, error) {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, HeartbeatTimeout: 5 * time.Second})
		err := workflow.ExecuteActivity(actx, probe.Work, in).Get(ctx, nil)
		return SnapshotResult{Commit: "c-" + in.Repo}, err
	}
	ts.NewWorker(TaskQueue, func(r worker.Registry) {
		r.RegisterWorkflow(RepoWorkflow)
		r.RegisterWorkflow(TenantLeaseWorkflow)
		r.RegisterWorkflowWithOptions(fakeSnapshot, workflow.RegisterOptions{Name: "SnapshotWorkflow"})
		r.RegisterActivity(&Activities{TenantSnapshots: slots})
		r.RegisterActivity(probe.Work)
	})
}
