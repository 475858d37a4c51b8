package workflows

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/pipeline"
	"codectx/pkg/testrepo"

	"github.com/stretchr/testify/mock"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// fakeSnapshots stands in for SnapshotWorkflow children: each takes a
// minute of workflow time and records its commit and the concurrency.
type fakeSnapshots struct {
	commits   []string
	active    int
	maxActive int
}

func (f *fakeSnapshots) run(ctx workflow.Context, in SnapshotInput) (SnapshotResult, error) {
	f.commits = append(f.commits, in.Commit)
	f.active++
	f.maxActive = max(f.maxActive, f.active)
	defer func() { f.active-- }()
	if err := workflow.Sleep(ctx, time.Minute); err != nil {
		return SnapshotResult{}, err
	}
	if in.Commit == "bad" {
		return SnapshotResult{}, errors.New("boom")
	}
	return SnapshotResult{Commit: in.Commit}, nil
}

func repoEnv(t *testing.T, perRun int) (*testsuite.TestWorkflowEnvironment, *fakeSnapshots) {
	t.Helper()
	old := snapshotsPerRun
	snapshotsPerRun = perRun
	t.Cleanup(func() { snapshotsPerRun = old })
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(RepoWorkflow)
	env.RegisterWorkflow(SnapshotWorkflow)
	env.RegisterActivity(&Activities{}) // no tenant bound: AcquireLease answers false
	f := &fakeSnapshots{}
	env.OnWorkflow(SnapshotWorkflow, mock.Anything, mock.Anything).Return(f.run)
	return env, f
}

func push(env *testsuite.TestWorkflowEnvironment, at time.Duration, commit string) {
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(PushSignal, Push{Tenant: "t", Repo: "r", Location: "loc", Commit: commit})
	}, at)
}

// continued decodes the arguments of the continue-as-new that ended a run.
func continued(t *testing.T, env *testsuite.TestWorkflowEnvironment) RepoCarry {
	t.Helper()
	err := env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("workflow ended with %v, want continue-as-new", err)
	}
	var tenant, repo string
	var carry *RepoCarry
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &tenant, &repo, &carry); err != nil {
		t.Fatal(err)
	}
	if tenant != "t" || repo != "r" || carry == nil {
		t.Fatalf("continued as (%q, %q, %v)", tenant, repo, carry)
	}
	return *carry
}

func TestRepoWorkflowCoalescesToNewest(t *testing.T) {
	env, f := repoEnv(t, 2)
	push(env, 0, "c1")
	for i, c := range []string{"c2", "c3", "c4"} {
		push(env, time.Duration(10*(i+1))*time.Second, c)
	}
	var mid RepoStatus
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(StatusQuery)
		if err != nil {
			t.Error(err)
			return
		}
		if err := v.Get(&mid); err != nil {
			t.Error(err)
		}
	}, 45*time.Second)
	env.ExecuteWorkflow(RepoWorkflow, "t", "r", (*RepoCarry)(nil))
	carry := continued(t, env)

	if want := []string{"c1", "c4"}; !slices.Equal(f.commits, want) {
		t.Errorf("snapshots of %v, want %v", f.commits, want)
	}
	if f.maxActive != 1 {
		t.Errorf("%d snapshots ran at once, want 1", f.maxActive)
	}
	if mid.State != StateIndexing || mid.Current != "c1" || mid.Pending == nil || mid.Pending.Commit != "c4" || mid.Received != 4 {
		t.Errorf("status during c1 = %+v, want indexing c1 with c4 pending of 4 received", mid)
	}
	if carry.Pending != nil || carry.Received != 4 || carry.Covered != 4 || carry.LastCommit != "c4" {
		t.Errorf("carry = %+v, want nothing pending, 4 received and covered, last c4", carry)
	}
}

func TestRepoWorkflowContinueAsNewCarriesPending(t *testing.T) {
	env, f := repoEnv(t, 1)
	push(env, 0, "bad")
	push(env, 30*time.Second, "c2")
	env.ExecuteWorkflow(RepoWorkflow, "t", "r", (*RepoCarry)(nil))
	carry := continued(t, env)
	if !slices.Equal(f.commits, []string{"bad"}) {
		t.Errorf("snapshots of %v, want [bad]", f.commits)
	}
	if carry.Pending == nil || carry.Pending.Commit != "c2" {
		t.Fatalf("pending = %+v, want c2", carry.Pending)
	}
	if carry.Received != 2 || carry.Covered != 1 || carry.Snapshots != 1 || carry.LastError == "" {
		t.Errorf("carry = %+v, want 2 received, 1 covered, 1 snapshot, an error", carry)
	}

	// The next run starts with the carried push, without a new signal.
	env2, f2 := repoEnv(t, 1)
	env2.ExecuteWorkflow(RepoWorkflow, "t", "r", &carry)
	carry2 := continued(t, env2)
	if !slices.Equal(f2.commits, []string{"c2"}) {
		t.Errorf("next run indexed %v, want [c2]", f2.commits)
	}
	if carry2.Covered != 2 || carry2.LastError != "" || carry2.LastCommit != "c2" {
		t.Errorf("next carry = %+v", carry2)
	}
}

// fakeActivities answers the activities of SnapshotWorkflow.
type fakeActivities struct {
	plan         SnapshotPlan
	failed       []string
	publishFails int
	calls        map[string]int
	graphJob     pipeline.GraphJob
	embed        *EmbedPlanResult // nil: no embedder (PlanEmbed skips)
	embedFailed  int
	planFailed   []string // the files PlanEmbed was told were left out
	// quick: the local waits (FanOutParseWait, GraphWait) see their jobs
	// done; otherwise they say not done and WaitParse and Graph run.
	quick bool
	waits map[string]int // calls of the task-queue waits WaitParse and Graph
	check *VectorCheck   // CheckVectors' answer; nil: no embedder (Skipped)
}

func (f *fakeActivities) env(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(SnapshotWorkflow)
	var a *Activities
	env.RegisterActivity(a)
	f.calls, f.waits = map[string]int{}, map[string]int{}
	env.OnActivity(a.Snapshot, mock.Anything, mock.Anything).Return(func(context.Context, SnapshotInput) (SnapshotPlan, error) {
		f.calls["Snapshot"]++
		return f.plan, nil
	})
	env.OnActivity(a.FanOutParse, mock.Anything, mock.Anything).Return(func(context.Context, ParseInput) error {
		f.calls["FanOutParse"]++
		return nil
	})
	env.OnActivity(a.WaitParse, mock.Anything, mock.Anything).Return(func(_ context.Context, in ParseInput) (ParseOutcome, error) {
		f.calls["WaitParse"]++
		f.waits["WaitParse"]++
		return ParseOutcome{Parsed: in.Plan.Changed - len(f.failed), Failed: f.failed}, nil
	})
	// The local waits count as the steps they stand for when they see
	// them done.
	env.OnActivity(a.FanOutParseWait, mock.Anything, mock.Anything).Return(func(_ context.Context, in ParseInput) (QuickParse, error) {
		f.calls["FanOutParse"]++
		if !f.quick {
			return QuickParse{}, nil
		}
		f.calls["WaitParse"]++
		return QuickParse{Done: true, Outcome: ParseOutcome{Parsed: in.Plan.Changed - len(f.failed), Failed: f.failed}}, nil
	})
	env.OnActivity(a.GraphWait, mock.Anything, mock.Anything).Return(func(_ context.Context, in GraphInput) (string, error) {
		if !f.quick {
			return "", nil
		}
		f.calls["Graph"]++
		f.graphJob = in.Job
		return index.SegmentKey(in.Job.Tenant, in.Job.Repo, in.Job.Commit), nil
	})
	env.OnActivity(a.PlanEmbed, mock.Anything, mock.Anything).Return(func(_ context.Context, in EmbedPlanInput) (EmbedPlanResult, error) {
		f.calls["PlanEmbed"]++
		f.planFailed = in.Failed
		if f.embed == nil {
			return EmbedPlanResult{Skipped: true}, nil
		}
		return *f.embed, nil
	})
	env.OnActivity(a.FanOutEmbed, mock.Anything, mock.Anything).Return(func(context.Context, EmbedInput) error {
		f.calls["FanOutEmbed"]++
		return nil
	})
	env.OnActivity(a.WaitEmbed, mock.Anything, mock.Anything).Return(func(_ context.Context, in EmbedInput) (EmbedOutcome, error) {
		f.calls["WaitEmbed"]++
		return EmbedOutcome{Embedded: in.Embed.Missing - f.embedFailed, Failed: f.embedFailed}, nil
	})
	env.OnActivity(a.StoreVectors, mock.Anything, mock.Anything).Return(func(_ context.Context, in EmbedInput) (VectorsResult, error) {
		f.calls["StoreVectors"]++
		return VectorsResult{Points: in.Embed.Chunks, Added: in.Embed.Missing - f.embedFailed}, nil
	})
	env.OnActivity(a.CheckVectors, mock.Anything, mock.Anything).Return(func(context.Context, SnapshotPlan) (VectorCheck, error) {
		f.calls["CheckVectors"]++
		if f.check == nil {
			return VectorCheck{Skipped: true}, nil
		}
		return *f.check, nil
	})
	env.OnActivity(a.Graph, mock.Anything, mock.Anything).Return(func(_ context.Context, in GraphInput) (string, error) {
		f.calls["Graph"]++
		f.waits["Graph"]++
		f.graphJob = in.Job
		return index.SegmentKey(in.Job.Tenant, in.Job.Repo, in.Job.Commit), nil
	})
	env.OnActivity(a.Publish, mock.Anything, mock.Anything).Return(func(context.Context, PublishInput) (PublishResult, error) {
		f.calls["Publish"]++
		if f.calls["Publish"] <= f.publishFails {
			return PublishResult{}, errors.New("store down")
		}
		return PublishResult{Previous: "c0"}, nil
	})
	env.OnActivity(a.GC, mock.Anything, mock.Anything).Return(func(_ context.Context, in GCInput) (GCResult, error) {
		f.calls["GC"]++
		if !slices.Equal(in.Keep, []string{f.plan.Commit, "c0"}) {
			t.Errorf("GC keeps %v, want current and previous", in.Keep)
		}
		return GCResult{Deleted: 2}, nil
	})
	return env
}

func plan(changed int) SnapshotPlan {
	return SnapshotPlan{Tenant: "t", Repo: "r", Location: "loc", Commit: "c1", Files: 10, Changed: changed, Reused: 10 - changed, Batches: 1,
		ManifestKey: pipeline.ManifestKey("t", "r", "c1"), PlanKey: pipeline.PlanKey("t", "r", "c1")}
}

func runSnapshot(t *testing.T, env *testsuite.TestWorkflowEnvironment) SnapshotResult {
	t.Helper()
	env.ExecuteWorkflow(SnapshotWorkflow, SnapshotInput{Tenant: "t", Repo: "r", Location: "loc"})
	if !env.IsWorkflowCompleted() {
		t.Fatal("not completed")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res SnapshotResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestSnapshotWorkflowSkipsPublishedCommit(t *testing.T) {
	f := &fakeActivities{plan: SnapshotPlan{Commit: "c1", Files: 3, Skipped: true, Segment: "segments/t/r/c1.seg"}}
	res := runSnapshot(t, f.env(t))
	if !res.Skipped || res.Segment != "segments/t/r/c1.seg" || res.Commit != "c1" {
		t.Errorf("result = %+v, want skipped c1", res)
	}
	if want := map[string]int{"Snapshot": 1, "CheckVectors": 1}; !mapsEqual(f.calls, want) {
		t.Errorf("calls = %v, want %v", f.calls, want)
	}
}

// A commit already published has its vector points checked (one
// listing); only when some are missing does the embed stage run, to
// restore them. Without an embedder, or for an ancestor of HEAD, nothing
// is checked.
func TestSnapshotWorkflowSkipRestoresVectors(t *testing.T) {
	skipped := SnapshotPlan{Tenant: "t", Repo: "r", Commit: "c1", Files: 3, Skipped: true, Segment: "segments/t/r/c1.seg", ManifestKey: pipeline.ManifestKey("t", "r", "c1")}
	for _, tc := range []struct {
		name  string
		plan  func(SnapshotPlan) SnapshotPlan
		check *VectorCheck
		embed *EmbedPlanResult
		calls map[string]int
		want  func(SnapshotResult) bool
	}{
		{"nothing missing", nil, &VectorCheck{Points: 7}, nil,
			map[string]int{"Snapshot": 1, "CheckVectors": 1},
			func(r SnapshotResult) bool { return r.Points == 7 && r.Restored == 0 && r.Embed != "" }},
		{"points lost", nil, &VectorCheck{Points: 7, Missing: 3}, &EmbedPlanResult{Model: "m", Dim: 4, Key: "k", Chunks: 7, Missing: 1, Batches: 1},
			map[string]int{"Snapshot": 1, "CheckVectors": 1, "PlanEmbed": 1, "FanOutEmbed": 1, "WaitEmbed": 1, "StoreVectors": 1},
			func(r SnapshotResult) bool {
				return r.Skipped && r.Points == 7 && r.Restored == 1 && r.Embedded == 1 && r.EmbedReused == 6 && strings.HasPrefix(r.Embed, "restored 1 of 3 missing points")
			}},
		{"no vector set", nil, &VectorCheck{NoSet: true}, &EmbedPlanResult{Model: "m", Dim: 4, Key: "k", Chunks: 2},
			map[string]int{"Snapshot": 1, "CheckVectors": 1, "PlanEmbed": 1, "StoreVectors": 1},
			func(r SnapshotResult) bool { return r.Skipped && r.Points == 2 }},
		{"no embedder (worker)", nil, nil, nil,
			map[string]int{"Snapshot": 1, "CheckVectors": 1},
			func(r SnapshotResult) bool { return r.Skipped && r.Points == 0 && r.Embed == "" }},
		{"no embedder (plan)", func(p SnapshotPlan) SnapshotPlan { p.NoEmbedder = true; return p }, &VectorCheck{Missing: 1}, nil,
			map[string]int{"Snapshot": 1},
			func(r SnapshotResult) bool { return r.Skipped && r.Embed == "" }},
		{"behind", func(p SnapshotPlan) SnapshotPlan { p.Behind = "c0"; return p }, &VectorCheck{Missing: 1}, nil,
			map[string]int{"Snapshot": 1},
			func(r SnapshotResult) bool { return r.Skipped && r.Behind == "c0" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := skipped
			if tc.plan != nil {
				p = tc.plan(p)
			}
			f := &fakeActivities{plan: p, check: tc.check, embed: tc.embed}
			res := runSnapshot(t, f.env(t))
			if !mapsEqual(f.calls, tc.calls) {
				t.Errorf("calls = %v, want %v", f.calls, tc.calls)
			}
			if !res.Skipped || res.Commit != "c1" || !tc.want(res) {
				t.Errorf("result = %+v", res)
			}
		})
	}
}

func TestSnapshotWorkflowReportsFailedFiles(t *testing.T) {
	f := &fakeActivities{plan: plan(3), failed: []string{"bad.py"}}
	res := runSnapshot(t, f.env(t))
	if res.Parsed != 2 || res.Failed != 1 || !slices.Equal(res.FailedFiles, []string{"bad.py"}) {
		t.Errorf("result = %+v, want 2 parsed, bad.py failed", res)
	}
	if !slices.Equal(f.graphJob.Failed, []string{"bad.py"}) {
		t.Errorf("graph job excludes %v, want [bad.py]", f.graphJob.Failed)
	}
	if res.Embed != EmbedSkipped || res.Segment != index.SegmentKey("t", "r", "c1") || res.Previous != "c0" || res.Deleted != 2 {
		t.Errorf("result = %+v", res)
	}
	want := map[string]int{"Snapshot": 1, "FanOutParse": 1, "WaitParse": 1, "PlanEmbed": 1, "Graph": 1, "Publish": 1, "GC": 1}
	if !mapsEqual(f.calls, want) {
		t.Errorf("calls = %v, want %v", f.calls, want)
	}
}

// A plan made without an embedder skips the embed stage without planning
// it, and the fan-out and publish (local activities) still run once each.
func TestSnapshotWorkflowWithoutEmbedder(t *testing.T) {
	p := plan(3)
	p.NoEmbedder = true
	f := &fakeActivities{plan: p}
	res := runSnapshot(t, f.env(t))
	if res.Embed != EmbedSkipped || res.Parsed != 3 || res.Segment != index.SegmentKey("t", "r", "c1") || res.Previous != "c0" {
		t.Errorf("result = %+v", res)
	}
	want := map[string]int{"Snapshot": 1, "FanOutParse": 1, "WaitParse": 1, "Graph": 1, "Publish": 1, "GC": 1}
	if !mapsEqual(f.calls, want) {
		t.Errorf("calls = %v, want %v", f.calls, want)
	}
}

// A snapshot whose parse and graph jobs finish within the local waits
// runs neither WaitParse nor Graph through the task queue; one whose jobs
// take longer goes on in them (the other tests).
func TestSnapshotWorkflowLocalWaits(t *testing.T) {
	for _, quick := range []bool{true, false} {
		p := plan(3)
		p.NoEmbedder = true
		f := &fakeActivities{plan: p, failed: []string{"bad.py"}, quick: quick}
		res := runSnapshot(t, f.env(t))
		if res.Parsed != 2 || !slices.Equal(res.FailedFiles, []string{"bad.py"}) || res.Segment != index.SegmentKey("t", "r", "c1") || res.Previous != "c0" {
			t.Errorf("quick %v: result = %+v", quick, res)
		}
		if !slices.Equal(f.graphJob.Failed, []string{"bad.py"}) {
			t.Errorf("quick %v: graph job excludes %v, want [bad.py]", quick, f.graphJob.Failed)
		}
		want := map[string]int{"Snapshot": 1, "FanOutParse": 1, "WaitParse": 1, "Graph": 1, "Publish": 1, "GC": 1}
		if !mapsEqual(f.calls, want) {
			t.Errorf("quick %v: calls = %v, want %v", quick, f.calls, want)
		}
		waits := map[string]int{"WaitParse": 1, "Graph": 1}
		if quick {
			waits = map[string]int{}
		}
		if !mapsEqual(f.waits, waits) {
			t.Errorf("quick %v: task-queue waits = %v, want %v", quick, f.waits, waits)
		}
	}
}

func TestSnapshotWorkflowEmbeds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		missing int
		failed  int
		calls   map[string]int
		embed   string
	}{
		{"new chunks", 7, 0, map[string]int{"PlanEmbed": 1, "FanOutEmbed": 1, "WaitEmbed": 1, "StoreVectors": 1}, "m: 20 chunks, 7 embedded, 13 reused from cache"},
		{"all cached", 0, 0, map[string]int{"PlanEmbed": 1, "StoreVectors": 1}, "m: 20 chunks, 0 embedded, 20 reused from cache"},
		{"a batch failed", 7, 3, map[string]int{"PlanEmbed": 1, "FanOutEmbed": 1, "WaitEmbed": 1, "StoreVectors": 1}, "m: 20 chunks, 4 embedded, 13 reused from cache, 3 failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batches := 0
			if tc.missing > 0 {
				batches = 1
			}
			f := &fakeActivities{plan: plan(3), failed: []string{"bad.py"}, embedFailed: tc.failed,
				embed: &EmbedPlanResult{Model: "m", Dim: 4, Key: "embedplans/t/r/c1.json", Chunks: 20, Missing: tc.missing, Batches: batches}}
			res := runSnapshot(t, f.env(t))
			for k, n := range tc.calls {
				if f.calls[k] != n {
					t.Errorf("%s called %d times, want %d (calls %v)", k, f.calls[k], n, f.calls)
				}
			}
			if f.calls["FanOutEmbed"] != tc.calls["FanOutEmbed"] || f.calls["Graph"] != 1 {
				t.Errorf("calls = %v", f.calls)
			}
			if res.Embed != tc.embed || res.Embedded != tc.missing-tc.failed || res.EmbedReused != 20-tc.missing || res.EmbedFailed != tc.failed || res.Points != 20 {
				t.Errorf("result = %+v, want embed %q", res, tc.embed)
			}
			if !slices.Equal(f.planFailed, []string{"bad.py"}) {
				t.Errorf("PlanEmbed told %v failed, want [bad.py]", f.planFailed)
			}
		})
	}
}

func TestSnapshotWorkflowNothingChangedSkipsParse(t *testing.T) {
	f := &fakeActivities{plan: plan(0)}
	res := runSnapshot(t, f.env(t))
	if f.calls["FanOutParse"] != 0 || f.calls["WaitParse"] != 0 || f.calls["Publish"] != 1 {
		t.Errorf("calls = %v, want no parse, one publish", f.calls)
	}
	if res.Parsed != 0 || res.Reused != 10 {
		t.Errorf("result = %+v", res)
	}
}

func TestSnapshotWorkflowRetriesPublish(t *testing.T) {
	f := &fakeActivities{plan: plan(1), publishFails: 3}
	res := runSnapshot(t, f.env(t))
	if f.calls["Publish"] != 4 || f.calls["GC"] != 1 {
		t.Errorf("calls = %v, want 4 publish attempts then GC", f.calls)
	}
	if res.Previous != "c0" {
		t.Errorf("result = %+v", res)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestGC(t *testing.T) {
	ctx := context.Background()
	store := blob.NewMem()
	var keys []string
	for _, c := range []string{"c1", "c2", "c3"} {
		keys = append(keys, pipeline.ManifestKey("t", "r", c), pipeline.PlanKey("t", "r", c), index.SegmentKey("t", "r", c))
	}
	others := []string{
		index.SegmentKey("t", "r/nested", "c1"), // another repository under r/
		index.SegmentKey("u", "r", "c1"),        // another tenant
		"parse/v1/go/ab/abcdef",                 // the shared parse cache
		index.HeadKey("t", "r"),
	}
	for _, k := range append(keys, others...) {
		if err := store.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Put(ctx, index.HeadKey("t", "r"), []byte(`{"commit":"c3","segment":"segments/t/r/c3.seg"}`)); err != nil {
		t.Fatal(err)
	}
	a := &Activities{Store: store}
	res, err := a.GC(ctx, GCInput{Tenant: "t", Repo: "r", Keep: []string{"c2"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 3 {
		t.Errorf("deleted %d, want 3 (c1's manifest, plan, segment)", res.Deleted)
	}
	for i, k := range append(keys, others...) {
		ok, err := store.Exists(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if want := i >= 3; ok != want {
			t.Errorf("%s exists = %v, want %v", k, ok, want)
		}
	}
}

// TestReplay replays histories recorded by the integration test (run it
// with -update to record them again after changing a workflow).
func TestReplay(t *testing.T) {
	t.Run("release history's shape", func(t *testing.T) {
		data, err := os.ReadFile("testdata/repo_release_history.json")
		if err != nil {
			t.Fatal(err)
		}
		h := &historypb.History{}
		if err := (temporalproto.CustomJSONUnmarshalOptions{}).Unmarshal(data, h); err != nil {
			t.Fatal(err)
		}
		if seq := releaseSeq(h); !slices.Equal(seq, wantReleaseSeq) {
			t.Errorf("recorded history holds %v, want %v", seq, wantReleaseSeq)
		}
	})
	for _, tc := range []struct {
		file string
		wf   any
		runs int // snapshotsPerRun when recorded, if not the default
	}{
		{"testdata/snapshot_history.json", SnapshotWorkflow, 0},
		{"testdata/repo_history.json", RepoWorkflow, 0},
		{"testdata/snapshot_embed_history.json", SnapshotWorkflow, 0},
		// Recorded before local-waits (fan-out and publish local, WaitParse
		// and Graph through the task queue), and with it.
		{"testdata/snapshot_local_steps_history.json", SnapshotWorkflow, 0},
		{"testdata/snapshot_local_waits_history.json", SnapshotWorkflow, 0},
		// Recorded before the tenant lease (repo_history.json) and with it.
		{"testdata/repo_lease_history.json", RepoWorkflow, 0},
		{"testdata/lease_history.json", TenantLeaseWorkflow, 0},
		// A reindex of the published commit recorded before vector-repair
		// (skipped at once) and with it (the points lost and restored).
		{"testdata/snapshot_skip_history.json", SnapshotWorkflow, 0},
		{"testdata/snapshot_vector_repair_history.json", SnapshotWorkflow, 0},
		// A run that gave back its tenant slot and continued as new after
		// one snapshot, waiting for the release's delivery first
		// (release-delivered; TestTenantLeaseReleasedAtContinueAsNew,
		// which the history's shape is checked against below). Replay
		// cannot tell whether the wait is still there (a version marker no
		// code asks for is skipped, and a signal's delivery is no command);
		// that integration test does.
		{"testdata/repo_release_history.json", RepoWorkflow, 1},
	} {
		t.Run(tc.file, func(t *testing.T) {
			if tc.runs > 0 {
				old := snapshotsPerRun
				snapshotsPerRun = tc.runs
				t.Cleanup(func() { snapshotsPerRun = old })
			}
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(SnapshotWorkflow)
			r.RegisterWorkflow(RepoWorkflow)
			r.RegisterWorkflow(TenantLeaseWorkflow)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, tc.file); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A late or replayed webhook push of an older commit, received while a
// newer one waits, does not drop the newer one: both run (the older one
// publishes only if it moves HEAD forward), the newest received last.
func TestRepoWorkflowLatePushKeepsNewest(t *testing.T) {
	env, f := repoEnv(t, 10)
	fwd := func(at time.Duration, commit string) {
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(PushSignal, Push{Tenant: "t", Repo: "r", Location: "loc", Commit: commit, Forward: true})
		}, at)
	}
	fwd(0, "a8")
	fwd(10*time.Second, "a9")
	fwd(20*time.Second, "a8") // the replay
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, 10*time.Minute)
	env.ExecuteWorkflow(RepoWorkflow, "t", "r", (*RepoCarry)(nil))
	if want := []string{"a8", "a8", "a9"}; !slices.Equal(f.commits, want) {
		t.Errorf("snapshots of %v, want %v (a9 must not be dropped)", f.commits, want)
	}
	v, err := env.QueryWorkflow(StatusQuery)
	if err != nil {
		t.Fatal(err)
	}
	var st RepoStatus
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	if st.LastCommit != "a9" || st.Covered != st.Received {
		t.Errorf("status = %+v, want last a9 and every push covered", st)
	}
}

// TestGCShards indexes three commits as shards, collects keeping the
// second (and HEAD, the third), and checks that exactly the shards only
// the first named are gone and both kept snapshots still load. A publish
// of the commit HEAD already names reports the commit before it as
// Previous, so that GC after it keeps that commit.
func TestGCShards(t *testing.T) {
	ctx := context.Background()
	store := blob.NewMem()
	r := testrepo.New(t)
	files := map[string]string{}
	for i := range 40 {
		files[fmt.Sprintf("pkg%02d/f.go", i)] = fmt.Sprintf("package pkg%02d\n\n// F%d is function %d.\nfunc F%d() int { return %d }\n%s", i, i, i, i, i, strings.Repeat("// padding\n", 300))
	}
	var commits []string
	shardsOf := map[string][]string{}
	opt := index.Options{Tenant: "t", Name: "r", ShardBytes: 8 << 10}
	a := &Activities{Store: store}
	for i, change := range []string{"pkg03/f.go", "pkg30/f.go", "pkg31/f.go"} {
		files[change] += fmt.Sprintf("// change %d\n", i)
		c := r.Commit("c", files)
		st, err := index.Build(ctx, store, r.Dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && st.ShardsWritten != 1 {
			t.Fatalf("commit %d wrote %d shards, want 1", i, st.ShardsWritten)
		}
		commits = append(commits, c)
		keys, err := index.ShardKeys(ctx, store, index.SegmentKey("t", "r", c))
		if err != nil || len(keys) < 5 {
			t.Fatalf("shards of %s: %v %v", c, keys, err)
		}
		shardsOf[c] = keys
	}
	res, err := a.GC(ctx, GCInput{Tenant: "t", Repo: "r", Keep: []string{commits[1]}})
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, c := range commits[1:] {
		for _, k := range shardsOf[c] {
			kept[k] = true
		}
		if _, err := index.LoadSegment(ctx, store, index.SegmentKey("t", "r", c)); err != nil {
			t.Fatalf("kept snapshot %s: %v", c, err)
		}
	}
	gone := 0
	for _, k := range shardsOf[commits[0]] {
		ok, err := store.Exists(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if ok != kept[k] {
			t.Errorf("shard %s exists %v, want %v", k, ok, kept[k])
		}
		if !ok {
			gone++
		}
	}
	if gone != 1 || res.Deleted != 2 { // the first commit's segment key and its one own shard
		t.Errorf("GC deleted %d (%d shards), want the first commit's list and one shard", res.Deleted, gone)
	}

	// Publishing the commit HEAD names again: Previous is the commit
	// before it, not "".
	h, err := index.ReadHead(ctx, store, "t", "r")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := a.Publish(ctx, PublishInput{Tenant: "t", Repo: "r", Commit: h.Commit, Segment: h.Segment, Complete: h.Complete})
	if err != nil || pub.Previous != commits[1] {
		t.Fatalf("republish: previous %q (%v), want %s", pub.Previous, err, commits[1])
	}
}

// Every activity SnapshotWorkflow runs through the task queue heartbeats
// within its attempt: a worker that dies mid-attempt (an orchestrator
// restarted mid-snapshot) is noticed after HeartbeatTimeout and the
// attempt retried elsewhere, not only after StartToClose has run out.
func TestSnapshotActivitiesHeartbeat(t *testing.T) {
	for _, o := range []struct {
		name string
		opts workflow.ActivityOptions
	}{{"snapshot", snapshotOpts}, {"short", shortOpts}, {"wait", waitOpts}, {"publish", publishOpts}, {"gc", gcOpts}} {
		if o.opts.HeartbeatTimeout <= 0 || o.opts.HeartbeatTimeout >= o.opts.StartToCloseTimeout {
			t.Errorf("%s options: heartbeat timeout %v, want within start-to-close %v", o.name, o.opts.HeartbeatTimeout, o.opts.StartToCloseTimeout)
		}
	}
	f := &fakeActivities{plan: plan(3),
		embed: &EmbedPlanResult{Model: "m", Dim: 4, Key: "embedplans/t/r/c1.json", Chunks: 20, Missing: 7, Batches: 1}}
	env := f.env(t)
	seen := map[string]bool{}
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.IsLocalActivity {
			return
		}
		seen[info.ActivityType.Name] = true
		if info.HeartbeatTimeout <= 0 || info.HeartbeatTimeout >= info.StartToCloseTimeout {
			t.Errorf("%s: heartbeat timeout %v, want within start-to-close %v", info.ActivityType.Name, info.HeartbeatTimeout, info.StartToCloseTimeout)
		}
	})
	runSnapshot(t, env)
	for _, name := range []string{"Snapshot", "WaitParse", "Graph", "FanOutEmbed", "WaitEmbed", "StoreVectors", "GC"} {
		if !seen[name] {
			t.Errorf("%s did not run through the task queue (ran %v)", name, seen)
		}
	}
}

func TestRevOf(t *testing.T) {
	hash := strings.Repeat("ab", 20)
	for _, c := range []struct {
		p    Push
		want string
	}{
		{Push{Commit: hash, Forward: true, Branch: "main"}, "refs/heads/main"}, // a webhook push: its branch
		{Push{Commit: "feature"}, "feature"},                                   // an index request at a branch
		{Push{Commit: "v1.2.0"}, "v1.2.0"},
		{Push{Commit: "refs/heads/main"}, "refs/heads/main"}, // a reindex after a webhook push
		{Push{Commit: hash}, ""},                             // at a commit: a reindex goes to HEAD
		{Push{Commit: strings.ToUpper(hash)}, ""},
		{Push{Commit: "95183f3"}, ""},  // abbreviated
		{Push{Commit: "cafe"}, "cafe"}, // too short to be one: a name
		{Push{}, ""},
	} {
		if got := RevOf(c.p); got != c.want {
			t.Errorf("RevOf(%+v) = %q, want %q", c.p, got, c.want)
		}
	}
}
