package source

import (
	"fmt"
	"math/rand/v2"
	"path"
	"reflect"
	"sort"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// The history's own tree diff (differ, which stops at MaxHistoryPaths)
// lists the same paths as go-git's DiffTree, commit by commit, over a
// history of random edits: files added, changed, removed, made
// executable, replaced by a directory of the same name and back, at
// several depths.
func TestDifferMatchesDiffTree(t *testing.T) {
	f := newFixture(t)
	rng := rand.New(rand.NewPCG(12, 13))
	dirs := []string{"", "a", "a/b", "a/b/c", "d", "d/e"}
	state := map[string]entry{}
	toggle := "a/b/t.go" // a file, then a directory of that name, and back
	var parent []plumbing.Hash
	for i := range 60 {
		for range 1 + rng.IntN(6) {
			p := path.Join(dirs[rng.IntN(len(dirs))], fmt.Sprintf("f%d.go", rng.IntN(8)))
			e, ok := state[p]
			switch op := rng.IntN(10); {
			case op < 6 || !ok: // add or change
				state[p] = entry{mode: filemode.Regular, data: fmt.Sprintf("package p // %d %d\n", i, rng.Int())}
			case op < 8:
				delete(state, p)
			default: // executable: the same blob, another mode
				e.mode = filemode.Executable
				state[p] = e
			}
		}
		switch i % 10 {
		case 3:
			state[toggle] = entry{mode: filemode.Regular, data: fmt.Sprintf("package t // %d\n", i)}
		case 6:
			delete(state, toggle)
			state[toggle+"/x.go"] = entry{mode: filemode.Regular, data: "package x\n"}
			state[toggle+"/y/z.go"] = entry{mode: filemode.Regular, data: "package y\n"}
		case 9:
			delete(state, toggle+"/x.go")
			delete(state, toggle+"/y/z.go")
		}
		entries := map[string]entry{}
		for p, e := range state {
			entries[p] = e
		}
		parent = []plumbing.Hash{commitTree(t, f.repo, entries, parent...)}
	}

	s, err := Open(ctx, f.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 50 {
		t.Fatalf("History has %d commits of 60", len(got))
	}
	changed := 0
	for _, c := range got {
		commit, err := f.repo.CommitObject(plumbing.NewHash(c.Hash))
		if err != nil {
			t.Fatal(err)
		}
		to, err := commit.Tree()
		if err != nil {
			t.Fatal(err)
		}
		var from *object.Tree
		if commit.NumParents() > 0 {
			p, err := commit.Parent(0)
			if err != nil {
				t.Fatal(err)
			}
			if from, err = p.Tree(); err != nil {
				t.Fatal(err)
			}
		}
		changes, err := object.DiffTree(from, to)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, ch := range changes {
			name := ch.To.Name
			if name == "" {
				name = ch.From.Name
			}
			want = append(want, path.Clean(name))
		}
		sort.Strings(want)
		want = compactStrings(want)
		if len(want) == 0 {
			want = nil
		}
		files := c.Files
		if len(files) == 0 {
			files = nil
		}
		if !reflect.DeepEqual(files, want) {
			t.Errorf("%s (%s): history lists %v, DiffTree %v", c.Hash[:8], c.Message, files, want)
		}
		changed += len(files)
	}
	t.Logf("%d commits, %d changed paths compared", len(got), changed)
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
