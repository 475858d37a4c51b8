package source

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// hostileRepo is a bare repository whose objects a test writes one by one.
func hostileRepo(t *testing.T) (string, *git.Repository) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "hostile.git")
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	return dir, repo
}

// setMaster points master (HEAD's branch) at a commit of tree with parent.
func commitOn(t *testing.T, repo *git.Repository, tree plumbing.Hash, msg string, parents ...plumbing.Hash) plumbing.Hash {
	t.Helper()
	c := store(t, repo.Storer, &object.Commit{Author: *sig(1), Committer: *sig(1), Message: msg, TreeHash: tree, ParentHashes: parents})
	if err := repo.Storer.SetReference(plumbing.NewHashReference("refs/heads/master", c)); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSecurityTreeBomb: a tree names its subtrees by hash, so five trees
// of 100 entries, each naming the next 100 times, describe 10^8 files in
// under a kilobyte. The listing walked them all (a clone of a few hundred
// bytes held the lister for as long as memory lasted); it must stop at
// maxEntries with ErrTooManyEntries.
func TestSecurityTreeBomb(t *testing.T) {
	defer func(n int) { maxEntries = n }(maxEntries)
	maxEntries = 50000
	dir, repo := hostileRepo(t)
	st := repo.Storer
	blob := store(t, st, &object.Blob{}, "package p\n")
	tree := store(t, st, &object.Tree{Entries: []object.TreeEntry{{Name: "f.go", Mode: filemode.Regular, Hash: blob}}})
	for range 4 {
		var es []object.TreeEntry
		for i := range 100 {
			es = append(es, object.TreeEntry{Name: fmt.Sprintf("d%03d", i), Mode: filemode.Dir, Hash: tree})
		}
		tree = store(t, st, &object.Tree{Entries: es})
	}
	commitOn(t, repo, tree, "bomb\n")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Open(ctx, dir, Options{})
	if err == nil {
		s.Close()
		t.Fatalf("listed %d files of a tree of 10^8 entries", len(s.Files))
	}
	if !errors.Is(err, ErrTooManyEntries) {
		t.Fatalf("Open = %v, want ErrTooManyEntries", err)
	}
}

// TestSecurityDeepTree: every level of the tree walk holds its path, so a
// chain of 20,000 nested one-entry trees (a few hundred KiB packed) cost
// memory and time quadratic in the depth, in the listing and again in
// the history's diff (40,000 levels: 1.7 GB and 12 s). A path past
// MaxPathBytes is skipped with SkipPathTooLong and not walked further,
// and the history lists none.
func TestSecurityDeepTree(t *testing.T) {
	dir, repo := hostileRepo(t)
	st := repo.Storer
	blob := store(t, st, &object.Blob{}, "package p\n")
	tree := store(t, st, &object.Tree{Entries: []object.TreeEntry{{Name: "f.go", Mode: filemode.Regular, Hash: blob}}})
	for range 20000 {
		tree = store(t, st, &object.Tree{Entries: []object.TreeEntry{
			{Name: "a", Mode: filemode.Dir, Hash: tree},
			{Name: "b.go", Mode: filemode.Regular, Hash: blob},
		}})
	}
	commitOn(t, repo, tree, "deep\n")
	s, err := Open(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, f := range s.Files {
		if len(f.Path) > MaxPathBytes {
			t.Fatalf("listed a path of %d bytes", len(f.Path))
		}
	}
	if len(s.Files) < MaxPathBytes/2-8 {
		t.Errorf("listed %d files, want those within MaxPathBytes (about %d)", len(s.Files), MaxPathBytes/2)
	}
	long := 0
	for _, k := range s.Skipped {
		if k.Reason == SkipPathTooLong {
			long++
		}
	}
	if long == 0 || long > 4 {
		t.Errorf("%d entries skipped as %s, want the few at the bound", long, SkipPathTooLong)
	}
	cs, err := s.History(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		for _, p := range c.Files {
			if len(p) > MaxPathBytes {
				t.Fatalf("history lists a path of %d bytes", len(p))
			}
		}
	}
}

// TestSecurityHistoryAmplification: tree objects are shared, so a history
// whose commits move one directory of 20,000 files back and forth between
// two names makes every commit change 40,000 paths, from one directory's
// objects (100 commits: 4 million paths from a pack of a few hundred KiB;
// 200 commits of 100,000 files took 30 s and 2.8 GB). The history keeps
// at most MaxHistoryPaths paths in all, each message at most
// MaxMessageBytes, and each author's name and address MaxAuthorBytes.
func TestSecurityHistoryAmplification(t *testing.T) {
	dir, repo := hostileRepo(t)
	st := repo.Storer
	blob := store(t, st, &object.Blob{}, "x\n")
	es := make([]object.TreeEntry, 20000)
	for i := range es {
		es[i] = object.TreeEntry{Name: fmt.Sprintf("f%06d.txt", i), Mode: filemode.Regular, Hash: blob}
	}
	sub := store(t, st, &object.Tree{Entries: es})
	a := store(t, st, &object.Tree{Entries: []object.TreeEntry{{Name: "a", Mode: filemode.Dir, Hash: sub}}})
	b := store(t, st, &object.Tree{Entries: []object.TreeEntry{{Name: "b", Mode: filemode.Dir, Hash: sub}}})
	c := commitOn(t, repo, a, "root\n")
	for i := 1; i < 100; i++ {
		tree := a
		if i%2 == 1 {
			tree = b
		}
		c = commitOn(t, repo, tree, fmt.Sprintf("move %d\n", i), c)
	}
	last := store(t, st, &object.Commit{Author: object.Signature{Name: strings.Repeat("n", 1<<20), Email: strings.Repeat("e", 1<<20), When: sig(1).When},
		Committer: *sig(1), Message: strings.Repeat("m", 4<<20) + "\n", TreeHash: b, ParentHashes: []plumbing.Hash{c}})
	if err := repo.Storer.SetReference(plumbing.NewHashReference("refs/heads/master", last)); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cs, err := s.History(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	paths := 0
	for _, c := range cs {
		paths += len(c.Files)
	}
	if paths > MaxHistoryPaths {
		t.Errorf("history of %d commits holds %d paths, over MaxHistoryPaths (%d)", len(cs), paths, MaxHistoryPaths)
	}
	if len(cs) == 0 || len(cs[0].Message) > MaxMessageBytes {
		t.Fatalf("history: %d commits, the newest message %d bytes (MaxMessageBytes %d)", len(cs), len(cs[0].Message), MaxMessageBytes)
	}
	if len(cs[0].Author) > 2*MaxAuthorBytes+3 {
		t.Errorf("the newest author is %d bytes, past twice MaxAuthorBytes (%d) and \" <>\"", len(cs[0].Author), MaxAuthorBytes)
	}
	if len(cs[1].Files) != 40000 {
		t.Errorf("a move of 20,000 files lists %d paths, want 40000", len(cs[1].Files))
	}
}
