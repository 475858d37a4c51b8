package source

import (
	"context"
	"slices"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestHistoryMissingTrees: a treeless partial clone (git clone
// --filter=tree:0) holds the trees of HEAD only. Its listing was complete,
// but the history's diff of HEAD against its parent failed the whole
// snapshot with "tree of ...: object not found", so the repository could
// not be indexed at all. A commit whose parent's trees are missing is a
// boundary, as past a shallow clone's: listed with all its files, and the
// history ends there.
func TestHistoryMissingTrees(t *testing.T) {
	dir, repo := hostileRepo(t)
	st := repo.Storer
	blob := store(t, st, &object.Blob{}, "package p\n")
	gone := plumbing.NewHash("0123456789abcdef0123456789abcdef01234567")
	old := commitOn(t, repo, gone, "old\n")
	sub := store(t, st, &object.Tree{Entries: []object.TreeEntry{
		{Name: "a.go", Mode: filemode.Regular, Hash: blob},
		{Name: "gone", Mode: filemode.Dir, Hash: gone},
	}})
	mid := commitOn(t, repo, sub, "mid\n", old)
	tree := store(t, st, &object.Tree{Entries: []object.TreeEntry{
		{Name: "a.go", Mode: filemode.Regular, Hash: blob},
		{Name: "b.go", Mode: filemode.Regular, Hash: blob},
	}})
	head := commitOn(t, repo, tree, "head\n", mid)

	s, err := Open(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Files) != 2 {
		t.Fatalf("listed %v", s.Files)
	}
	hs, err := s.History(context.Background(), 0)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	// mid's tree names a missing subtree: head is diffed against nothing.
	if len(hs) != 1 || hs[0].Hash != head.String() || !slices.Equal(hs[0].Files, []string{"a.go", "b.go"}) {
		t.Fatalf("history %+v, want head with all its files", hs)
	}

	// A parent with its trees, whose own parent has none: both listed.
	commitOn(t, repo, tree, "next\n", head)
	s2, err := Open(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	hs, err = s2.History(context.Background(), 0)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	if len(hs) != 2 || hs[1].Hash != head.String() || len(hs[0].Files) != 0 {
		t.Fatalf("history %+v, want next (no files changed) and head", hs)
	}
}
