package source

import (
	"context"
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
