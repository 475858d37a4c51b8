package source

import (
	"codectx/pkg/testrepo"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// fixture is a non-bare repository in a temporary directory, built with
// go-git's work tree API.
type fixture struct {
	t    testing.TB
	dir  string
	repo *git.Repository
	wt   *git.Worktree
	n    int // commits made, for distinct timestamps
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "proj")
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, dir: dir, repo: repo, wt: wt}
}

// writeFiles writes files (slash paths) under dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// commit writes files, removes the paths in remove, stages everything and
// commits.
func (f *fixture) commit(msg string, files map[string]string, remove ...string) plumbing.Hash {
	f.t.Helper()
	writeFiles(f.t, f.dir, files)
	for _, p := range remove {
		if _, err := f.wt.Remove(p); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := f.wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		f.t.Fatal(err)
	}
	f.n++
	h, err := f.wt.Commit(msg, &git.CommitOptions{Author: sig(f.n)})
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

func sig(n int) *object.Signature {
	return &object.Signature{
		Name:  "Ann Author",
		Email: "ann@example.com",
		When:  time.Date(2024, 1, 1, 0, 0, n, 0, time.UTC),
	}
}

// bareClone clones the fixture bare next to it.
func (f *fixture) bareClone() string {
	f.t.Helper()
	dir := filepath.Join(filepath.Dir(f.dir), "proj.git")
	if _, err := git.PlainClone(dir, true, &git.CloneOptions{URL: f.dir}); err != nil {
		f.t.Fatal(err)
	}
	return dir
}

// entry is a tree entry for writeTree: a blob with data, or a bare hash
// (submodule commits).
type entry struct {
	mode filemode.FileMode
	data string
	hash plumbing.Hash
}

// commitTree writes the tree of entries (slash paths) and a commit of it
// straight into the object storage of repo, and points HEAD's branch at it.
// It can make entries the work tree API cannot, like submodules.
func commitTree(t testing.TB, repo *git.Repository, entries map[string]entry, parents ...plumbing.Hash) plumbing.Hash {
	t.Helper()
	st := repo.Storer
	tree := writeTree(t, st, entries)
	c := &object.Commit{
		Author:       *sig(len(parents)),
		Committer:    *sig(len(parents)),
		Message:      "low-level commit\n",
		TreeHash:     tree,
		ParentHashes: parents,
	}
	h := store(t, st, c)
	head, err := st.Reference(plumbing.HEAD)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetReference(plumbing.NewHashReference(head.Target(), h)); err != nil {
		t.Fatal(err)
	}
	return h
}

func writeTree(t testing.TB, st storer.EncodedObjectStorer, entries map[string]entry) plumbing.Hash {
	t.Helper()
	subs := map[string]map[string]entry{}
	var tree object.Tree
	for p, e := range entries {
		if dir, rest, ok := strings.Cut(p, "/"); ok {
			if subs[dir] == nil {
				subs[dir] = map[string]entry{}
			}
			subs[dir][rest] = e
			continue
		}
		h := e.hash
		if h.IsZero() {
			h = store(t, st, &object.Blob{}, e.data)
		}
		tree.Entries = append(tree.Entries, object.TreeEntry{Name: p, Mode: e.mode, Hash: h})
	}
	for dir, sub := range subs {
		tree.Entries = append(tree.Entries, object.TreeEntry{Name: dir, Mode: filemode.Dir, Hash: writeTree(t, st, sub)})
	}
	// Git orders entries by name, directories as if they ended in "/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(tree.Entries, func(i, j int) bool { return key(tree.Entries[i]) < key(tree.Entries[j]) })
	return store(t, st, &tree)
}

type encoder interface {
	Encode(plumbing.EncodedObject) error
}

// store encodes o (or, for a blob, data) into st.
func store(t testing.TB, st storer.EncodedObjectStorer, o encoder, data ...string) plumbing.Hash {
	t.Helper()
	if _, ok := o.(*object.Blob); ok {
		return testrepo.PutBlob(t, st, strings.Join(data, ""))
	}
	obj := st.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		t.Fatal(err)
	}
	h, err := st.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
