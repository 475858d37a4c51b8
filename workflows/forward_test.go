package workflows

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/index"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"go.temporal.io/sdk/testsuite"
)

// A push (Forward) of an ancestor of the published commit is skipped with
// HEAD kept; an operator's request for the same commit is planned.
func TestSnapshotForwardOnly(t *testing.T) {
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, _ := repo.Worktree()
	commit := func(name string, n int64) string {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("package a\n\nfunc "+name[:1]+"() {}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		wt.Add(name)
		h, err := wt.Commit(name, &git.CommitOptions{Author: &object.Signature{Name: "A", Email: "a@x", When: time.Unix(1700000000+n, 0)}})
		if err != nil {
			t.Fatal(err)
		}
		return h.String()
	}
	old, cur := commit("a.go", 0), commit("b.go", 1)
	ctx := context.Background()
	store := blob.NewMem()
	head, _ := json.Marshal(index.Head{Commit: cur, Segment: "segments/t/r/cur"})
	store.Put(ctx, index.HeadKey("t", "r"), head)
	store.Put(ctx, "segments/t/r/cur", []byte("x"))
	a := &Activities{Store: store}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	plan := func(in SnapshotInput) SnapshotPlan {
		t.Helper()
		v, err := env.ExecuteActivity(a.Snapshot, in)
		if err != nil {
			t.Fatal(err)
		}
		var p SnapshotPlan
		if err := v.Get(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := plan(SnapshotInput{Tenant: "t", Repo: "r", Location: dir, Commit: old, Forward: true})
	if !p.Skipped || p.Behind != old || p.Commit != cur || p.Segment != "segments/t/r/cur" {
		t.Errorf("push of an ancestor: plan = %+v, want skipped, behind %s, HEAD %s kept", p, old, cur)
	}
	if p := plan(SnapshotInput{Tenant: "t", Repo: "r", Location: dir, Commit: old}); p.Skipped || p.Commit != old {
		t.Errorf("operator's request of an older commit: plan = %+v, want it planned", p)
	}
}
