package index

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"codectx/pkg/source"
	"codectx/pkg/testrepo"
)

// TestReadManifestFromEqualsReadManifest makes the manifest of every
// commit of a history from the manifest of every other (its listing as
// source.Options.Base and its history), with several history limits on
// either side, and checks it is the same JSON as the manifest made afresh.
func TestReadManifestFromEqualsReadManifest(t *testing.T) {
	ctx := context.Background()
	r := testrepo.New(t)
	var commits []string
	for i, files := range []map[string]string{
		{"go.mod": "module example.com/m\n", "a/a.go": "package a\n", "b/b.go": "package b\n", "b/c/c.go": "package c\n"},
		{"a/a.go": "package a\n\nfunc A() {}\n"},
		{"b/c/go.mod": "module example.com/c\n", "b/c/d.go": "package c\n"},
		{"b/b.go": ""},
		{"go.mod": "module example.com/renamed\n", "z/z.py": "def z(): pass\n"},
		{"a/a.go": "", "b/c/c.go": ""},
	} {
		commits = append(commits, r.Commit(fmt.Sprintf("commit %d", i), files))
	}
	open := func(rev string, base *source.Listing) *source.Snapshot {
		t.Helper()
		s, err := source.Open(ctx, r.Dir, source.Options{Rev: rev, Base: base})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	encode := func(m *Manifest) []byte {
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	limits := []int{0, 1, 3, -1}
	for i, pc := range commits {
		for _, pl := range limits {
			prev, err := ReadManifest(ctx, open(pc, nil), "t", "r", pl)
			if err != nil {
				t.Fatal(err)
			}
			if prev.Tree == "" {
				t.Fatal("a manifest of a git snapshot has no tree")
			}
			for j, c := range commits {
				for _, l := range limits {
					want, err := ReadManifest(ctx, open(c, nil), "t", "r", l)
					if err != nil {
						t.Fatal(err)
					}
					got, err := ReadManifestFrom(ctx, open(c, prev.Listing()), "t", "r", l, prev)
					if err != nil {
						t.Fatal(err)
					}
					if g, w := encode(got), encode(want); !bytes.Equal(g, w) {
						t.Errorf("commit %d limit %d from commit %d limit %d:\n%s\nwant\n%s", j, l, i, pl, g, w)
					}
				}
			}
		}
	}
}
