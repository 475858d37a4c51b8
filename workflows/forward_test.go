package workflows

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/index"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
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
	// A push naming its branch: while the branch is at cur, a push of old
	// is a replayed or late delivery, and HEAD stays.
	branch := "master"
	if ref, err := repo.Head(); err == nil {
		branch = ref.Name().Short()
	}
	push := SnapshotInput{Tenant: "t", Repo: "r", Location: dir, Commit: old, Forward: true, Branch: branch}
	if p := plan(push); !p.Skipped || p.Behind != old || p.Commit != cur {
		t.Errorf("push of an ancestor, branch %s at the newer commit: plan = %+v, want HEAD %s kept", branch, p, cur)
	}
	if p := plan(SnapshotInput{Tenant: "t", Repo: "r", Location: dir, Commit: old, Forward: true, Branch: "gone"}); !p.Skipped || p.Behind != old {
		t.Errorf("push of an ancestor, its branch deleted since: plan = %+v, want HEAD %s kept", p, cur)
	}
	// The branch reset back to old and force-pushed: the push is planned.
	setBranch := func(commit string) {
		t.Helper()
		if err := repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName(branch), plumbing.NewHash(commit))); err != nil {
			t.Fatal(err)
		}
	}
	setBranch(old)
	if p := plan(push); p.Skipped || p.Behind != "" || p.Commit != old {
		t.Errorf("push of an ancestor that is its branch's tip (reset and force-pushed): plan = %+v, want it planned", p)
	}
	// cur amended into side (a sibling: neither ancestor nor descendant),
	// while HEAD is cur. Pushed while the branch is elsewhere (a late
	// delivery of the replaced commit looks the same) it is not
	// published; as the branch's tip it is. A push without its branch (a
	// signal of an older version) is published, as before.
	side := commit("c.go", 2) // on old: the branch is at old
	setBranch(cur)
	sidePush := push
	sidePush.Commit = side
	if p := plan(sidePush); !p.Skipped || p.Behind != side || p.Commit != cur {
		t.Errorf("push of a commit beside HEAD, its branch elsewhere: plan = %+v, want HEAD %s kept", p, cur)
	}
	if p := plan(SnapshotInput{Tenant: "t", Repo: "r", Location: dir, Commit: side, Forward: true}); p.Skipped || p.Commit != side {
		t.Errorf("push of a commit beside HEAD, no branch named: plan = %+v, want it planned", p)
	}
	setBranch(side)
	if p := plan(sidePush); p.Skipped || p.Behind != "" || p.Commit != side {
		t.Errorf("push of a commit beside HEAD that is its branch's tip (amended and force-pushed): plan = %+v, want it planned", p)
	}
	// A descendant of HEAD (HEAD at old, side on old) is published while
	// it is on its branch: the tip, or behind a tip that moved on (a busy
	// branch); not once the branch was reset behind it (its delivery came
	// late, after the reset's); without a branch named, as before.
	store.Put(ctx, index.HeadKey("t", "r"), mustJSON(t, index.Head{Commit: old, Segment: "segments/t/r/cur"}))
	ahead := push
	ahead.Commit = side
	for _, c := range []struct {
		name, branchAt string
		in             SnapshotInput
		want           bool // planned
	}{
		{"the branch's tip", side, ahead, true},
		{"the branch moved on", "", ahead, true}, // a commit on side, below
		{"the branch reset behind it", old, ahead, false},
		{"no branch named", old, SnapshotInput{Tenant: "t", Repo: "r", Location: dir, Commit: side, Forward: true}, true},
	} {
		if c.branchAt != "" {
			setBranch(c.branchAt)
		} else {
			setBranch(side)
			commit("d.go", 3) // the branch (checked out) moves on to a child of side
		}
		p := plan(c.in)
		if got := !p.Skipped && p.Commit == side; got != c.want {
			t.Errorf("push of a descendant of HEAD, %s: plan = %+v, want planned %v", c.name, p, c.want)
		}
	}
	store.Put(ctx, index.HeadKey("t", "r"), head)
	// A push of a commit the repository has no more (force-pushed away
	// before the snapshot ran): not published, HEAD kept; an operator's
	// request of it is an error.
	gone := strings.Repeat("ab", 20)
	if p := plan(SnapshotInput{Tenant: "t", Repo: "r", Location: dir, Commit: gone, Forward: true, Branch: branch}); !p.Skipped || p.Behind != gone || p.Commit != cur {
		t.Errorf("push of a commit the repository lacks: plan = %+v, want HEAD %s kept, %s not published", p, cur, gone)
	}
	if _, err := env.ExecuteActivity(a.Snapshot, SnapshotInput{Tenant: "t", Repo: "r", Location: dir, Commit: gone}); err == nil {
		t.Errorf("operator's request of a commit the repository lacks: no error")
	}
	for _, b := range []string{"-x", "a..b", "HEAD@{1}", "m~1", "a b", "x:y"} {
		in := push
		in.Branch = b
		if _, err := env.ExecuteActivity(a.Snapshot, in); err == nil {
			t.Errorf("push of branch %q: no error, want it refused", b)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
