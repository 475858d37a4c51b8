package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/queue"
	"codectx/pkg/source"
)

func TestRepoName(t *testing.T) {
	for _, tc := range []struct{ loc, want string }{
		{"https://github.com/owner/name.git", "owner/name"},
		{"git@github.com:owner/name.git", "owner/name"},
		{"ssh://git@host/group/sub/name", "sub/name"},
		{"file:///srv/git/proj.git", "proj"},
		{"some/dir/proj", "proj"},
		{"some/dir/proj/.git", "proj"},
		{"some/dir/proj.git", "proj"},
	} {
		if got := RepoName(tc.loc); got != tc.want {
			t.Errorf("RepoName(%q) = %q, want %q", tc.loc, got, tc.want)
		}
	}
}

func TestFilterFailed(t *testing.T) {
	m := &index.Manifest{Files: []source.File{{Path: "a.go"}, {Path: "b.py"}, {Path: "c.go"}}, Skipped: []source.Skipped{{Path: "l", Reason: "symlink"}}}
	got := FilterFailed(m, []string{"b.py"})
	var paths []string
	for _, f := range got.Files {
		paths = append(paths, f.Path)
	}
	if !slices.Equal(paths, []string{"a.go", "c.go"}) {
		t.Errorf("files = %v, want [a.go c.go]", paths)
	}
	want := []source.Skipped{{Path: "l", Reason: "symlink"}, {Path: "b.py", Reason: SkipParseFailed}}
	if !slices.Equal(got.Skipped, want) {
		t.Errorf("skipped = %v, want %v", got.Skipped, want)
	}
	if len(m.Files) != 3 || len(m.Skipped) != 1 {
		t.Error("FilterFailed changed its input")
	}
}

// TestParseThenGraph runs the two handlers on a plain directory: the parse
// handler parses each file once (a redelivery reuses the cache) and the
// graph handler writes a segment with every file.
func TestParseThenGraph(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"main.go": "package main\n\nfunc main() { helper() }\n\nfunc helper() {}\n",
		"lib.py":  "def f():\n    return 1\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := OpenSnapshot(ctx, "", dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if !IsWorktree(snap.Commit) {
		t.Fatalf("commit %q is not a worktree name", snap.Commit)
	}
	store := blob.NewMem()
	var parsed []string
	w := &Workers{Store: store, ParseHook: func(p string) { parsed = append(parsed, p) }}
	data, err := json.Marshal(ParseBatch{Tenant: "t", Repo: "r", Commit: snap.Commit, Location: dir, Files: snap.Files})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second delivery finds everything cached
		if err := w.HandleParse(ctx, queue.Message{Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(parsed, []string{"lib.py", "main.go"}) {
		t.Errorf("parsed %v, want each file once", parsed)
	}
	m, err := index.ReadManifest(ctx, snap, "t", "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	mdata, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	mk := ManifestKey("t", "r", snap.Commit)
	if err := store.Put(ctx, mk, mdata); err != nil {
		t.Fatal(err)
	}
	job, err := json.Marshal(GraphJob{Tenant: "t", Repo: "r", Commit: snap.Commit, ManifestKey: mk})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.HandleGraph(ctx, queue.Message{Data: job}); err != nil {
		t.Fatal(err)
	}
	sdata, err := store.Get(ctx, index.SegmentKey("t", "r", snap.Commit))
	if err != nil {
		t.Fatal(err)
	}
	if len(sdata) == 0 {
		t.Fatal("empty segment")
	}
}

// TestParseRejectsChangedWorktreeFile: a plain-directory file edited after
// its snapshot must not be cached under the old blob hash.
func TestParseRejectsChangedWorktreeFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "a.py")
	if err := os.WriteFile(p, []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap, err := OpenSnapshot(ctx, "", dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	snap.Close()
	if err := os.WriteFile(p, []byte("x = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	store := blob.NewMem()
	w := &Workers{Store: store}
	data, _ := json.Marshal(ParseBatch{Commit: snap.Commit, Location: dir, Files: snap.Files})
	if err := w.HandleParse(ctx, queue.Message{Data: data}); err == nil {
		t.Fatal("parse of a changed file succeeded")
	}
	if ok, _ := store.Exists(ctx, ResultKey("", snap.Files[0])); ok {
		t.Error("changed content cached under the old blob hash")
	}
}

func TestSnapCacheSharesOpens(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("package a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c snapCache
	s1, rel1, err := c.get(ctx, "", dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	s2, rel2, err := c.get(ctx, "", dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if s1 != s2 {
		t.Error("two opens of one commit")
	}
	rel1()
	rel2()
	c.closeIdle(0)
	if len(c.m) != 0 {
		t.Errorf("%d snapshots left open", len(c.m))
	}
	if _, _, err := c.get(ctx, "", filepath.Join(dir, "missing"), "", ""); err == nil {
		t.Error("opened a missing directory")
	}
	if len(c.m) != 0 {
		t.Error("a failed open was cached")
	}
}
