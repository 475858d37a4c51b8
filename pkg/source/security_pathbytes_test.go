package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// longNameBomb stores a tree naming the next one twice, levels deep,
// down to a tree holding a file of a name long bytes long (skipped as
// path_too_long) and f.go of content: 2^levels paths of the long name,
// from objects of a few kilobytes.
func longNameBomb(t *testing.T, repo *git.Repository, levels, long int, content string) plumbing.Hash {
	t.Helper()
	st := repo.Storer
	b := store(t, st, &object.Blob{}, content)
	tree := store(t, st, &object.Tree{Entries: []object.TreeEntry{
		{Name: strings.Repeat("a", long), Mode: filemode.Regular, Hash: b},
		{Name: "f.go", Mode: filemode.Regular, Hash: b},
	}})
	for range levels {
		tree = store(t, st, &object.Tree{Entries: []object.TreeEntry{
			{Name: "d0", Mode: filemode.Dir, Hash: tree},
			{Name: "d1", Mode: filemode.Dir, Hash: tree},
		}})
	}
	return tree
}

// TestSecurityListingBytes: MaxEntries counts paths, but a name may be
// of any length, so a tree naming one subtree many times, holding a file
// of a long name, listed megabytes of paths per entry (a 208 KB
// repository: 64 paths of 4 MiB, up's heap +900 MB, a manifest of
// 268 MB). The paths a listing walks are bounded in bytes.
func TestSecurityListingBytes(t *testing.T) {
	defer func(n int) { maxListingBytes = n }(maxListingBytes)
	maxListingBytes = 1 << 20
	dir, repo := hostileRepo(t)
	commitOn(t, repo, longNameBomb(t, repo, 6, 64<<10, "package p\n"), "bomb\n")
	s, err := Open(context.Background(), dir, Options{})
	if err == nil {
		n := 0
		for _, sk := range s.Skipped {
			n += len(sk.Path)
		}
		s.Close()
		t.Fatalf("listed %d skipped paths of %d bytes under a bound of %d", len(s.Skipped), n, maxListingBytes)
	}
	if !errors.Is(err, ErrTooManyEntries) {
		t.Fatalf("Open = %v, want ErrTooManyEntries", err)
	}
}

// TestSecurityHistoryBytes: the same tree changed by every commit made
// every diff of the history walk all its long paths, none of which
// counted (they are not listed). The bytes of the paths a history walks
// are bounded: it ends before the commit that would pass the bound.
func TestSecurityHistoryBytes(t *testing.T) {
	defer func(n int) { maxHistoryBytes = n }(maxHistoryBytes)
	maxHistoryBytes = 1 << 20
	dir, repo := hostileRepo(t)
	var parent []plumbing.Hash
	for i := range 5 {
		c := commitOn(t, repo, longNameBomb(t, repo, 6, 64<<10, fmt.Sprintf("package p%d\n", i)), "bomb\n", parent...)
		parent = []plumbing.Hash{c}
	}
	s, err := Open(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hist, err := s.History(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	// Each diff walks 64 paths of 64 KiB, past the bound.
	if len(hist) != 0 {
		t.Errorf("history of %d commits, want none: each walks 4 MiB of paths, past %d", len(hist), maxHistoryBytes)
	}
	// Short paths are within it: every commit of a small history.
	dir2, repo2 := hostileRepo(t)
	parent = nil
	for i := range 5 {
		c := commitOn(t, repo2, longNameBomb(t, repo2, 3, 10, fmt.Sprintf("package p%d\n", i)), "small\n", parent...)
		parent = []plumbing.Hash{c}
	}
	s2, err := Open(context.Background(), dir2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if hist, err := s2.History(context.Background(), 0); err != nil || len(hist) != 5 {
		t.Errorf("small history: %d commits, %v; want 5", len(hist), err)
	}
}

// TestSecurityListingBytesQuoted: a name that is not UTF-8 is listed
// quoted, each such byte as \xff, four times its length: the bound was
// charged the name's bytes, so 1 MiB of them listed 4 MiB of paths (and
// 5 MiB in a manifest's JSON, and in the snapshot's named skipped files).
func TestSecurityListingBytesQuoted(t *testing.T) {
	defer func(n int) { maxListingBytes = n }(maxListingBytes)
	maxListingBytes = 1 << 20
	for _, tc := range []struct {
		name string
		n    int // names of 64 KiB
		ok   bool
	}{
		{"within", 2, true},       // 128 KiB of names, 512 KiB quoted
		{"past quoted", 8, false}, // 512 KiB of names, 2 MiB quoted
	} {
		dir, repo := hostileRepo(t)
		b := store(t, repo.Storer, &object.Blob{}, "package p\n")
		es := []object.TreeEntry{{Name: "f.go", Mode: filemode.Regular, Hash: b}}
		for i := range tc.n {
			es = append(es, object.TreeEntry{Name: strings.Repeat("\xff", 64<<10) + fmt.Sprint(i), Mode: filemode.Regular, Hash: b})
		}
		commitOn(t, repo, store(t, repo.Storer, &object.Tree{Entries: es}), "bad names\n")
		s, err := Open(context.Background(), dir, Options{})
		if tc.ok {
			if err != nil || len(s.Skipped) != tc.n {
				t.Fatalf("%s: Open = %v; want %d names skipped", tc.name, err, tc.n)
			}
			s.Close()
			continue
		}
		if err == nil {
			n := 0
			for _, sk := range s.Skipped {
				n += len(sk.Path)
			}
			s.Close()
			t.Fatalf("%s: listed %d skipped paths of %d bytes under a bound of %d", tc.name, len(s.Skipped), n, maxListingBytes)
		}
		if !errors.Is(err, ErrTooManyEntries) {
			t.Fatalf("%s: Open = %v, want ErrTooManyEntries", tc.name, err)
		}
	}
}
