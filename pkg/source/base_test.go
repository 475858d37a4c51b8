package source

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestBaseEqualsWalk lists every commit of a history of many kinds of
// change from the listing of every other commit (Options.Base) and checks
// the result is the full walk's, entry for entry.
func TestBaseEqualsWalk(t *testing.T) {
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	lfs := "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n"
	absent := plumbing.ComputeHash(plumbing.BlobObject, []byte("arrives later\n"))
	reg := func(s string) entry { return entry{mode: filemode.Regular, data: s} }
	trees := []map[string]entry{{
		"main.go":          reg("package main\n"),
		"run.sh":           {mode: filemode.Executable, data: "#!/bin/sh\n"},
		"link":             {mode: filemode.Symlink, data: "main.go"},
		"vendor/lib":       {mode: filemode.Submodule, hash: plumbing.NewHash("1111111111111111111111111111111111111111")},
		"assets/big.bin":   reg(lfs),
		"assets/small.txt": reg("version"),
		"a/b/c/deep.go":    reg("package c\n"),
		"a/b/other.go":     reg("package b\n"),
		"a/b.go":           reg("package a\n"),
		"a0/x.go":          reg("package a0\n"),
		"a-b/y.go":         reg("package ab\n"),
		"part/miss.txt":    {mode: filemode.Regular, hash: absent},
		"part/here.txt":    reg("here\n"),
	}}
	next := func(f func(m map[string]entry)) {
		m := maps.Clone(trees[len(trees)-1])
		f(m)
		trees = append(trees, m)
	}
	next(func(m map[string]entry) { m["a/b/c/deep.go"] = reg("package c // changed\n") })
	next(func(m map[string]entry) { m["a/b/c/new.go"] = reg("package c\n\nfunc New() {}\n") })
	next(func(m map[string]entry) { delete(m, "a/b/other.go") })
	next(func(m map[string]entry) { // a directory renamed
		for _, p := range []string{"a/b/c/deep.go", "a/b/c/new.go"} {
			m["a/b/d/"+p[len("a/b/c/"):]] = m[p]
			delete(m, p)
		}
	})
	next(func(m map[string]entry) { // a file turned into a directory
		delete(m, "a/b.go")
		m["a/b.go/inner.go"] = reg("package inner\n")
	})
	next(func(m map[string]entry) { // a directory turned into a file
		for p := range m {
			if len(p) > 4 && p[:4] == "a/b/" {
				delete(m, p)
			}
		}
		m["a/b"] = reg("now a file\n")
	})
	next(func(m map[string]entry) { m["assets/small.txt"] = reg(lfs) }) // turned into an LFS pointer
	next(func(m map[string]entry) { m["run.sh"] = reg("#!/bin/sh\n") }) // executable bit dropped
	next(func(m map[string]entry) { m["main.go"] = entry{mode: filemode.Symlink, data: "run.sh"} })
	next(func(m map[string]entry) { m["vendor/lib"] = reg("not a submodule\n") }) // submodule replaced
	next(func(m map[string]entry) { m["zz/last.go"] = reg("package zz\n") })
	next(func(m map[string]entry) { clear(m); m["only.go"] = reg("package only\n") })
	var commits []plumbing.Hash
	var parent []plumbing.Hash
	for _, tr := range trees {
		h := commitTree(t, repo, tr, parent...)
		commits, parent = append(commits, h), []plumbing.Hash{h}
	}
	open := func(rev string, base *Listing) *Snapshot {
		t.Helper()
		s, err := Open(ctx, dir, Options{Rev: rev, Base: base})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	check := func(stage string) {
		full := make([]*Snapshot, len(commits))
		for i, c := range commits {
			full[i] = open(c.String(), nil)
		}
		if len(full[0].Skipped) == 0 || full[0].Skipped[2].Reason != SkipMissingObject {
			t.Fatalf("%s: the first tree should list a missing object: %v", stage, full[0].Skipped)
		}
		for i, base := range full {
			for j, want := range full {
				got := open(commits[j].String(), &Listing{Tree: base.Tree, Files: base.Files, Skipped: base.Skipped})
				if got.Tree != want.Tree || !reflect.DeepEqual(got.Files, want.Files) || !reflect.DeepEqual(got.Skipped, want.Skipped) {
					t.Errorf("%s: commit %d from the listing of %d:\nfiles   %v\nwant    %v\nskipped %v\nwant    %v", stage, j, i, got.Files, want.Files, got.Skipped, want.Skipped)
				}
			}
		}
	}
	check("before")
	// The missing blob arrives: a listing that skipped it is not reused.
	stale := open(commits[0].String(), nil)
	store(t, repo.Storer, &object.Blob{}, "arrives later\n")
	fresh := open(commits[0].String(), &Listing{Tree: stale.Tree, Files: stale.Files, Skipped: stale.Skipped})
	want := open(commits[0].String(), nil)
	if !slices.Contains(paths(want.Files), "part/miss.txt") {
		t.Fatalf("the blob stored is not listed: %v", paths(want.Files))
	}
	if !reflect.DeepEqual(fresh.Files, want.Files) || !reflect.DeepEqual(fresh.Skipped, want.Skipped) {
		t.Errorf("after the blob arrived: files %v skipped %v, want %v %v", paths(fresh.Files), fresh.Skipped, paths(want.Files), want.Skipped)
	}
	// A listing of a tree this repository lacks, or none, is a full walk.
	for _, b := range []*Listing{{Tree: "2222222222222222222222222222222222222222", Files: stale.Files}, {Tree: "bad"}, {}} {
		got := open(commits[1].String(), b)
		if want := open(commits[1].String(), nil); !reflect.DeepEqual(got.Files, want.Files) || !reflect.DeepEqual(got.Skipped, want.Skipped) {
			t.Errorf("base %q: files %v, want %v", b.Tree, paths(got.Files), paths(want.Files))
		}
	}
}

// TestNoList opens snapshots that read without listing.
func TestNoList(t *testing.T) {
	f := newFixture(t)
	c := f.commit("one", map[string]string{"a/x.go": "package a\n"})
	listed, err := Open(ctx, f.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer listed.Close()
	for _, dir := range []string{f.dir, f.dir + "/a"} {
		s, err := Open(ctx, dir, Options{NoList: true})
		if err != nil {
			t.Fatal(err)
		}
		if s.Commit != c.String() || s.Files != nil || s.Skipped != nil || s.Tree != "" {
			t.Errorf("%s: commit %s files %v skipped %v tree %q", dir, s.Commit, s.Files, s.Skipped, s.Tree)
		}
		got, err := s.Read(listed.Files[0])
		if err != nil || string(got) != "package a\n" {
			t.Errorf("%s: read %q, %v", dir, got, err)
		}
		s.Close()
	}
	plain := t.TempDir()
	writeFiles(t, plain, map[string]string{"p.txt": "plain\n"})
	s, err := Open(ctx, plain, Options{NoList: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Files != nil || s.Commit != "" {
		t.Errorf("plain: files %v commit %q", s.Files, s.Commit)
	}
	if got, err := s.Read(File{Path: "p.txt"}); err != nil || string(got) != "plain\n" {
		t.Errorf("plain: read %q, %v", got, err)
	}
}

// TestHistoryFromEqualsHistory reads the history of every commit of a
// history with a merge from the history of every other commit, read with
// several limits, and checks it is History's.
func TestHistoryFromEqualsHistory(t *testing.T) {
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	reg := func(s string) entry { return entry{mode: filemode.Regular, data: s} }
	files := map[string]entry{"a.go": reg("a"), "sub/b.go": reg("b")}
	var commits []plumbing.Hash
	commit := func(parents ...plumbing.Hash) {
		commits = append(commits, commitTree(t, repo, maps.Clone(files), parents...))
	}
	commit()
	files["a.go"] = reg("a2")
	commit(commits[0])
	files["sub/c.go"] = reg("c")
	commit(commits[1])
	side := commits[1]
	files["side.go"] = reg("side")
	commit(side) // a side branch off commit 1
	delete(files, "side.go")
	files["sub/b.go"] = reg("b2")
	commit(commits[2], commits[3]) // merge: first parent commit 2
	files["a.go"] = reg("a3")
	commit(commits[4])
	open := func(where, rev string) *Snapshot {
		t.Helper()
		s, err := Open(ctx, where, Options{Rev: rev})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	limits := []int{0, 1, 2, 3, 4, 10}
	for i, bc := range commits {
		bs := open(dir, bc.String())
		for _, bl := range limits {
			bh, err := bs.History(ctx, bl)
			if err != nil {
				t.Fatal(err)
			}
			base := &HistoryBase{Commit: bc.String(), Tree: bs.Tree, Limit: bl, Commits: bh}
			for j, c := range commits {
				s := open(dir, c.String())
				for _, l := range limits {
					want, err := s.History(ctx, l)
					if err != nil {
						t.Fatal(err)
					}
					got, err := s.HistoryFrom(ctx, l, base)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("commit %d limit %d from commit %d limit %d:\ngot  %v\nwant %v", j, l, i, bl, got, want)
					}
				}
			}
		}
	}
	// A base that is not of the whole tree is not used: a wrong history
	// under the right commit would show.
	last := open(dir, commits[5].String())
	wrong := &HistoryBase{Commit: commits[4].String(), Tree: "", Limit: 0, Commits: []Commit{{Hash: "forged"}}}
	for _, b := range []*HistoryBase{wrong, {Commit: commits[4].String(), Tree: last.Tree, Commits: []Commit{{Hash: "forged"}}}} {
		got, err := last.HistoryFrom(ctx, 0, b)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := last.History(ctx, 0); !reflect.DeepEqual(got, want) {
			t.Errorf("base with tree %q used: %v", b.Tree, got)
		}
	}
	// The forged history is used under the commit's own tree: the test
	// above would see a base that is used.
	b4 := open(dir, commits[4].String())
	got, err := last.HistoryFrom(ctx, 0, &HistoryBase{Commit: commits[4].String(), Tree: b4.Tree, Commits: []Commit{{Hash: "forged"}}})
	if err != nil || len(got) != 2 || got[1].Hash != "forged" {
		t.Errorf("a base of the right tree was not used: %v, %v", got, err)
	}
}

// TestHistoryFromSubdir: a snapshot of a subdirectory never takes the
// history of the whole tree.
func TestHistoryFromSubdir(t *testing.T) {
	f := newFixture(t)
	c1 := f.commit("one", map[string]string{"sub/a.go": "a", "b.go": "b"})
	f.commit("two", map[string]string{"b.go": "b2"})
	f.commit("three", map[string]string{"sub/a.go": "a2"})
	root, err := Open(ctx, f.dir, Options{Rev: c1.String()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	rh, err := root.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := Open(ctx, f.dir+"/sub", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	want, err := sub.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sub.HistoryFrom(ctx, 0, &HistoryBase{Commit: c1.String(), Tree: root.Tree, Commits: rh})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 2 || want[1].Files[0] != "a.go" || !reflect.DeepEqual(got, want) {
		t.Errorf("history of sub = %v, want %v", got, want)
	}
}
