package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// TestUpReindexKeepsRevision: a repository indexed at a branch that is
// not the location's HEAD is reindexed at that branch's new tip, not
// moved to HEAD (reindex signalled no revision), and its status names
// the revision.
func TestUpReindexKeepsRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	dir := filepath.Join(t.TempDir(), "shop")
	commitTree(t, dir, map[string]string{"cart/cart.go": "package cart\n\n// Total sums the cart.\nfunc Total() int { return 1 }\n"})
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	head, err := repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	main := head.Name()
	feature := plumbing.NewBranchReferenceName("feature")
	checkout := func(b plumbing.ReferenceName, create bool) {
		t.Helper()
		if err := wt.Checkout(&git.CheckoutOptions{Branch: b, Create: create}); err != nil {
			t.Fatal(err)
		}
	}
	onFeature := func(name, body string, when int64) string {
		t.Helper()
		checkout(feature, false)
		defer checkout(main, false)
		return commitFile(t, dir, name, body, when)
	}
	checkout(feature, true)
	checkout(main, false)
	f1 := onFeature("cart/tax.go", "package cart\n\n// Tax adds the tax.\nfunc Tax() int { return 2 }\n", 1700000100)
	mainTip := commitFile(t, dir, "cart/ship.go", "package cart\n\n// Ship ships.\nfunc Ship() int { return 3 }\n", 1700000200)

	data := t.TempDir()
	addr := freeAddr(t)
	cl := &api.Client{BaseURL: "http://" + addr, PollInterval: 100 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	up := startUp(t, "--data", data, "--listen", addr)
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	if _, err := cl.Index(ctx, api.IndexRequest{Repo: "shop", Location: dir, Commit: "feature"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.WaitIndexed(ctx, "", "shop", f1); err != nil {
		t.Fatal(err)
	}
	f2 := onFeature("cart/fee.go", "package cart\n\n// Fee adds a fee.\nfunc Fee() int { return 4 }\n", 1700000300)
	if _, err := cl.Reindex(ctx, "", "shop"); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	st, err := cl.WaitIndexed(wctx, "", "shop", f2)
	if err != nil {
		t.Fatalf("reindex of shop, indexed at feature: %v", err)
	}
	if st.Head == nil || st.Head.Commit != f2 || st.Rev != "feature" {
		t.Errorf("after the reindex: head %+v, revision %q; want feature's tip %s (not %s, the location's HEAD), revision feature", st.Head, st.Rev, f2, mainTip)
	}
}
