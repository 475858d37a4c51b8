package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Tree entry names git would not check out ("..", ".git", a slash or a
// backslash inside a name, a name given twice) never become a listed
// path or a history path: an answer's path is opened by its reader
// relative to a checkout. They are skipped as bad_name, quoted.
func TestBadNames(t *testing.T) {
	dir, repo := hostileRepo(t)
	st := repo.Storer
	blob := store(t, st, &object.Blob{}, "package p\n")
	other := store(t, st, &object.Blob{}, "package q\n")
	inner := store(t, st, &object.Tree{Entries: []object.TreeEntry{{Name: "x.go", Mode: filemode.Regular, Hash: blob}}})
	entries := []object.TreeEntry{ // in git's order, as go-git writes only such trees
		{Name: "..", Mode: filemode.Dir, Hash: inner},
		{Name: ".GIT", Mode: filemode.Dir, Hash: inner},
		{Name: "a/b.go", Mode: filemode.Regular, Hash: blob},
		{Name: "dup.go", Mode: filemode.Regular, Hash: blob},
		{Name: "dup.go", Mode: filemode.Regular, Hash: other},
		{Name: "ok.go", Mode: filemode.Regular, Hash: blob},
		{Name: "sub", Mode: filemode.Dir, Hash: inner},
		{Name: `x\..\y.go`, Mode: filemode.Regular, Hash: blob},
	}
	commitOn(t, repo, store(t, st, &object.Tree{Entries: entries}), "bad names\n")
	s, err := Open(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var files []string
	for _, f := range s.Files {
		files = append(files, f.Path)
	}
	if want := []string{"dup.go", "ok.go", "sub/x.go"}; !reflect.DeepEqual(files, want) {
		t.Errorf("listed %v, want %v", files, want)
	}
	bad := map[string]string{}
	for _, sk := range s.Skipped {
		bad[sk.Path] = sk.Reason
	}
	for _, p := range []string{`".."`, `".GIT"`, `"a/b.go"`, `"x\\..\\y.go"`, `"dup.go"`} {
		if bad[p] != SkipBadName {
			t.Errorf("%s skipped as %q, want %q (skipped: %v)", p, bad[p], SkipBadName, s.Skipped)
		}
	}
	hist, err := s.History(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || !reflect.DeepEqual(hist[0].Files, []string{"dup.go", "ok.go", "sub/x.go"}) {
		t.Errorf("history %+v, want one commit of dup.go, ok.go, sub/x.go", hist)
	}
}

// Names that are not UTF-8 are skipped as bad_name, quoted, in a git tree
// and in a plain directory. A path reaches answers and the pipeline's
// messages as a JSON string, where such a byte becomes U+FFFD: the three
// files below were indexed under one path "lat\ufffdin.go", and read of
// that path gave one file's text for another's chunks.
func TestNonUTF8Names(t *testing.T) {
	names := []string{"lat\xe8in.go", "lat\xe9in.go", "lat\ufffdin.go"}
	dir, repo := hostileRepo(t)
	st := repo.Storer
	var entries []object.TreeEntry
	for i, n := range names {
		entries = append(entries, object.TreeEntry{Name: n, Mode: filemode.Regular, Hash: store(t, st, &object.Blob{}, fmt.Sprintf("package p%d\n", i))})
	}
	commitOn(t, repo, store(t, st, &object.Tree{Entries: entries}), "names\n")
	plain := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(plain, n), []byte("package p\n"), 0o644); err != nil {
			t.Skipf("the file system refuses the name %q: %v", n, err)
		}
	}
	for _, where := range []string{dir, plain} {
		s, err := Open(context.Background(), where, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var files []string
		for _, f := range s.Files {
			files = append(files, f.Path)
		}
		skipped := map[string]string{}
		for _, sk := range s.Skipped {
			skipped[sk.Path] = sk.Reason
		}
		s.Close()
		if want := []string{"lat\ufffdin.go"}; !reflect.DeepEqual(files, want) {
			t.Errorf("%s: listed %q, want %q", where, files, want)
		}
		for _, p := range []string{`"lat\xe8in.go"`, `"lat\xe9in.go"`} {
			if skipped[p] != SkipBadName {
				t.Errorf("%s: %s skipped as %q, want %q (skipped: %q)", where, p, skipped[p], SkipBadName, s.Skipped)
			}
		}
	}
	hist, err := func() ([]Commit, error) {
		s, err := Open(context.Background(), dir, Options{})
		if err != nil {
			return nil, err
		}
		defer s.Close()
		return s.History(context.Background(), 0)
	}()
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || !reflect.DeepEqual(hist[0].Files, []string{"lat\ufffdin.go"}) {
		t.Errorf("history %+v, want one commit of lat\ufffdin.go", hist)
	}
}

// TestDotGitNames: the names a checkout on NTFS or HFS+ opens as ".git"
// are bad names, as git's own checks find them (core.protectNTFS,
// core.protectHFS): an answer's path under ".git./hooks" on Windows is
// the checkout's hooks directory. Names that only look alike are not.
func TestDotGitNames(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{".git", false},
		{".GIT", false},
		{".git.", false},
		{".Git . .", false},
		{".git::$INDEX_ALLOCATION", false},
		{"GIT~1", false},
		{".g\u200cit", false},
		{"\ufeff.git", false},
		{".gitignore", true},
		{".git~1", true},
		{"git", true},
		{".gi t", true},
		{"a:b", true},
	} {
		if got := validName(c.name); got != c.ok {
			t.Errorf("validName(%q) = %v, want %v", c.name, got, c.ok)
		}
	}
}

// TestNonUTF8NamesBase: a listing stored before names had to be UTF-8
// holds them as U+FFFD, several files under one path (a manifest is
// JSON). Listed from it, an unchanged subtree kept them so; it is walked
// again.
func TestNonUTF8NamesBase(t *testing.T) {
	dir, repo := hostileRepo(t)
	st := repo.Storer
	var entries []object.TreeEntry
	for i, n := range []string{"lat\xe8in.go", "lat\xe9in.go"} {
		entries = append(entries, object.TreeEntry{Name: n, Mode: filemode.Regular, Hash: store(t, st, &object.Blob{}, fmt.Sprintf("package p%d\n", i))})
	}
	sub := store(t, st, &object.Tree{Entries: entries})
	root := store(t, st, &object.Tree{Entries: []object.TreeEntry{{Name: "sub", Mode: filemode.Dir, Hash: sub}}})
	commitOn(t, repo, root, "names\n")
	// The same tree listed before: its subtree "sub" is unchanged.
	old := &Listing{Tree: root.String()}
	for _, e := range entries {
		old.Files = append(old.Files, File{Path: "sub/lat\ufffdin.go", Blob: e.Hash.String(), Size: 11})
	}
	s, err := Open(context.Background(), dir, Options{Base: old})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Files) != 0 || len(s.Skipped) != 2 || s.Skipped[0].Reason != SkipBadName {
		t.Errorf("listed %v, skipped %v; want no file and two bad names", s.Files, s.Skipped)
	}
}
