package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"codectx/pkg/embed/embedtest"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestSecurityCacheReuse: the parse and embedding caches are per tenant.
// Beta indexes a repository holding an exact copy of one of acme's files:
// its status must show nothing reused from either cache (a reuse count, or
// a faster answer, would tell beta that the file exists in another
// tenant's code). Acme's own reindex of a new commit still reuses its
// unchanged files and their vectors.
func TestSecurityCacheReuse(t *testing.T) {
	srv := embedtest.NewServer(64, "hash-embed")
	t.Cleanup(srv.Close)
	s := startSecureUp(t, "--embedder", "openai:"+srv.URL+"#hash-embed")

	copied, err := os.ReadFile(filepath.Join(s.shopDir, "cart", "cart.go"))
	if err != nil {
		t.Fatal(err)
	}
	dir := commitTree(t, filepath.Join(t.TempDir(), "probe"), map[string]string{
		"cart/cart.go":   string(copied),
		"probe/probe.go": "package probe\n\n// Probe is beta's own code.\nfunc Probe() int { return 42 }\n",
	})
	s.index(t, tenantB, "probe", dir)
	st := s.waitSettled(t, tenantB, "probe")
	if st == nil || st.Files != 2 || st.Parsed != 2 || st.Reused != 0 || st.EmbedReused != 0 || st.Embedded == 0 {
		t.Fatalf("beta's status of a copy of acme's file: %+v, want 2 files parsed, 0 reused, nothing reused from the embedding cache", st)
	}

	// Acme commits a new file to shop: the unchanged files come from its
	// own caches.
	before := s.waitSettled(t, tenantA, "shop")
	repo, err := git.PlainOpen(s.shopDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.shopDir, "cart", "discount.go"), []byte("package cart\n\n// Discount takes a share off a total.\nfunc Discount(cents, pct int) int { return cents * (100 - pct) / 100 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Add("cart/discount.go"); err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Commit("discount", &git.CommitOptions{Author: &object.Signature{Name: "A", Email: "a@example.com", When: time.Unix(1700000100, 0)}}); err != nil {
		t.Fatal(err)
	}
	s.index(t, tenantA, "shop", s.shopDir)
	st = s.waitSettled(t, tenantA, "shop")
	if st == nil || st.LastCommit == before.LastCommit || st.Files != before.Files+1 || st.Parsed != 1 || st.Reused != before.Files || st.EmbedReused == 0 {
		t.Fatalf("acme's reindex after a one-file commit: %+v (before: %d files), want 1 parsed, the rest and their vectors reused", st, before.Files)
	}
	s.assertServes(t)
}
