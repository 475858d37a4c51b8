package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/testrepo"
)

// TestUpDeleteRemovesClone: DELETE of a repository indexed from a URL
// removes its clone from up's clone cache, which held its source until
// the cache's age bound (7 days); another repository's clone stays. The
// deleted repository's status is 404 until it is reindexed.
func TestUpDeleteRemovesClone(t *testing.T) {
	root := t.TempDir()
	commitTree(t, filepath.Join(root, "shop"), map[string]string{"cart/cart.go": "package cart\n\n// Total sums the cart.\nfunc Total() int { return 1 }\n"})
	commitTree(t, filepath.Join(root, "lib"), map[string]string{"lib/lib.go": "package lib\n\n// Help helps.\nfunc Help() int { return 2 }\n"})
	base := testrepo.SmartHTTP(t, root)
	data := t.TempDir()
	addr := freeAddr(t)
	cl := &api.Client{BaseURL: "http://" + addr}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	up := startUp(t, "--data", data, "--listen", addr, "--allow-hosts", strings.TrimPrefix(base, "http://"))
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	for _, repo := range []string{"shop", "lib"} {
		if _, err := cl.Index(ctx, api.IndexRequest{Repo: repo, Location: base + "/" + repo + "/.git"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.WaitIndexed(ctx, "", repo, ""); err != nil {
			t.Fatal(err)
		}
	}
	clones := func() []string {
		ents, err := os.ReadDir(filepath.Join(data, "clones"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "default@") {
				names = append(names, e.Name())
			}
		}
		return names
	}
	before := clones()
	if len(before) != 2 {
		t.Fatalf("clones after indexing two URLs: %v", before)
	}
	res, err := cl.Delete(ctx, "", "shop")
	if err != nil {
		t.Fatal(err)
	}
	after := clones()
	if len(after) != 1 || strings.Contains(after[0], "shop") {
		t.Errorf("clones after DELETE of shop (%d objects): %v, want lib's alone", res.Deleted, after)
	}
	if _, err := cl.Query(ctx, api.QueryRequest{Repo: "lib", Query: "Help", Budget: 500}); err != nil {
		t.Errorf("lib after shop's DELETE: %v", err)
	}

	// The deleted repository's status is 404, as a query of it is: its
	// workflow, terminated by the DELETE, still answers queries, and its
	// status told the deleted repository's counts and commit, idle.
	if st, err := cl.Status(ctx, "", "shop"); !api.IsNotFound(err) {
		t.Errorf("status of shop after its DELETE = %+v, %v; want 404", st, err)
	}
	if out, err := runCLI(t, "repos", "status", "--server", cl.BaseURL, "shop"); err == nil || !strings.Contains(err.Error(), "unknown repository") {
		t.Errorf("repos status shop after its DELETE = %q, %v; want unknown repository", out, err)
	}
	if st, err := cl.Status(ctx, "", "lib"); err != nil || st.Head == nil {
		t.Errorf("status of lib after shop's DELETE = %+v, %v", st, err)
	}
	// Reindexed (from where the ended run last fetched), it is known again.
	if _, err := cl.Reindex(ctx, "", "shop"); err != nil {
		t.Fatalf("reindex of shop after its DELETE: %v", err)
	}
	if st, err := cl.WaitIndexed(ctx, "", "shop", ""); err != nil || st.Head == nil {
		t.Errorf("shop indexed again after its DELETE: %+v, %v", st, err)
	}
}
