package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/index"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// flakyStore is a blob driver over a real store whose writes of parse
// results fail while it is "full", as a disk that fills up and clears.
type flakyStore struct {
	*blob.Bucket
	full   atomic.Bool
	window atomic.Int64 // how long a full store stays full from its first failed write (0: until cleared)
	until  atomic.Int64 // unix nanos at which it clears (0: not started)
	failed atomic.Int64
}

var errDiskFull = errors.New("no space left on device")

func (f *flakyStore) failing() bool {
	if !f.full.Load() {
		return false
	}
	if w := f.window.Load(); w != 0 {
		f.until.CompareAndSwap(0, time.Now().Add(time.Duration(w)).UnixNano())
		if time.Now().UnixNano() > f.until.Load() {
			f.full.Store(false)
			return false
		}
	}
	return true
}

func (f *flakyStore) Put(ctx context.Context, key string, data []byte) error {
	if strings.HasPrefix(key, "parse/") && f.failing() {
		f.failed.Add(1)
		return errDiskFull
	}
	return f.Bucket.Put(ctx, key, data)
}

// PutCache fails like Put: parse-cache entries and file texts are stored
// with it.
func (f *flakyStore) PutCache(ctx context.Context, key string, data []byte) error {
	if strings.HasPrefix(key, "parse/") && f.failing() {
		f.failed.Add(1)
		return errDiskFull
	}
	return f.Bucket.PutCache(ctx, key, data)
}

// fillFor makes the store full for d from its first failed write on
// (d == 0: until clear is called).
func (f *flakyStore) fillFor(d time.Duration) {
	f.window.Store(int64(d))
	f.until.Store(0)
	f.full.Store(true)
}

// commitFiles writes files into the repository at dir and commits them.
func commitFiles(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	h, err := wt.Commit("change", &git.CommitOptions{Author: &object.Signature{Name: "A", Email: "a@example.com", When: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// manyFiles returns n small Go files whose function names carry tag.
func manyFiles(n int, tag string) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("pkg%d/f%d.go", i%5, i)] = fmt.Sprintf("package pkg%d\n\n// %s%d is generated for the store test.\nfunc %s%d() int { return %d }\n", i%5, tag, i, tag, i, i)
	}
	return m
}

// A blob store that fails writes mid-index must never turn into files
// dead-lettered as bad and a HEAD with gaps (issue 9, item 8):
//   - a short outage (disk full, then cleared) is retried: the snapshot
//     publishes every file;
//   - an outage longer than the retries fails the snapshot: the old HEAD
//     keeps serving, last_error says why, and indexing the same commit
//     again once the store works heals it;
//   - only a file that is itself bad is left out, listed with its reason,
//     and a HEAD with a file left out is indexed again when asked for.
func TestUpStoreOutageNeverLeavesGaps(t *testing.T) {
	repoDir, c1 := gitFixture(t)
	data := t.TempDir()
	addr := freeAddr(t)
	cl := &api.Client{BaseURL: "http://" + addr}

	flaky := &flakyStore{}
	upStoreHook = func(b *blob.Bucket) *blob.Bucket {
		flaky.Bucket = b
		return blob.NewBucket(flaky)
	}
	var poison atomic.Value // path whose parse panics ("" = none)
	poison.Store("")
	upParseHook = func(p string) {
		if p == poison.Load().(string) {
			panic("poisoned " + p)
		}
	}
	// Fast retries, so the test runs in seconds: a job gets 5 deliveries
	// over 1.5s, then WaitParse re-publishes it twice.
	queueBackoff = []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
	infraRetry = []time.Duration{500 * time.Millisecond, time.Second}
	t.Cleanup(func() { upStoreHook, upParseHook, queueBackoff, infraRetry = nil, nil, nil, nil })

	up := startUp(t, "--data", data, "--listen", addr, "--parse-workers", "2")
	up.waitFor(t, "serving line", 3*time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	pushes := 0
	reindex := func(commit string) *api.RepoStatus {
		t.Helper()
		pushes++
		if _, err := cl.Index(ctx, api.IndexRequest{Location: repoDir, Commit: commit}); err != nil {
			t.Fatalf("index %s: %v", commit, err)
		}
		var st *api.RepoStatus
		up.waitFor(t, fmt.Sprintf("snapshot of push %d", pushes), 2*time.Minute, func() bool {
			var err error
			st, err = cl.Status(ctx, "default", "shop")
			return err == nil && st.Done() && st.Covered >= pushes
		})
		return st
	}
	head := func() index.Head {
		t.Helper()
		h, err := index.ReadHead(ctx, flaky.Bucket, "default", "shop")
		if err != nil {
			t.Fatalf("read HEAD: %v", err)
		}
		return h
	}
	segFiles := func(h index.Head) []string {
		t.Helper()
		seg, err := index.LoadSegment(ctx, flaky.Bucket, h.Segment)
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, f := range seg.Files {
			paths = append(paths, f.Path)
		}
		return paths
	}

	// 1. The store is full for 2s from the first write, then clears.
	flaky.fillFor(2 * time.Second)
	st := reindex(c1)
	if st.LastError != "" || st.Failed != 0 || st.Parsed != 4 || len(st.LeftOut) != 0 {
		t.Fatalf("after a 2s outage: status %+v, want 4 parsed, nothing failed", st)
	}
	if n := flaky.failed.Load(); n == 0 {
		t.Fatal("no write failed: the outage did not happen")
	} else {
		t.Logf("short outage: %d writes failed, snapshot complete", n)
	}
	if h := head(); h.Commit != c1 || !h.Complete || len(segFiles(h)) != 4 {
		t.Fatalf("HEAD after a short outage = %+v with files %v, want %s complete with 4 files", h, segFiles(h), c1)
	}

	// 2. The store stays full for longer than the retries: the snapshot
	// fails, HEAD stays at c1 and keeps answering.
	c2 := commitFiles(t, repoDir, manyFiles(30, "Widget"))
	flaky.failed.Store(0)
	flaky.fillFor(0)
	start := time.Now()
	st = reindex(c2)
	t.Logf("long outage: snapshot failed after %v, %d writes failed: %s", time.Since(start).Round(time.Millisecond), flaky.failed.Load(), st.LastError)
	if st.LastError == "" || !strings.Contains(st.LastError, "no space left on device") {
		t.Errorf("status after a long outage = %+v, want last_error naming the store failure", st)
	}
	if h := head(); h.Commit != c1 {
		t.Fatalf("HEAD moved to %s during a store outage (files left out as bad?)", h.Commit)
	}
	resp, err := cl.Query(ctx, api.QueryRequest{Repo: "shop", Query: "Cart Total", Budget: 1000})
	if err != nil || resp.Commit != c1 {
		t.Fatalf("query during the outage: %v, %+v; want an answer from %s", err, resp, c1)
	}

	// 3. The store works again: indexing the same commit heals.
	flaky.full.Store(false)
	st = reindex(c2)
	if st.LastError != "" || st.Failed != 0 || st.LastCommit != c2 || st.Already {
		t.Fatalf("reindex after the outage: %+v, want %s published with nothing failed", st, c2)
	}
	if h := head(); h.Commit != c2 || !h.Complete || len(segFiles(h)) != 34 {
		t.Fatalf("HEAD after the reindex = %+v (%d files), want %s complete with 34 files", h, len(segFiles(h)), c2)
	}

	// 4. A file that is itself bad is left out, with its reason; asking
	// for the commit again retries it (HEAD is not complete).
	poison.Store("bad/bad.go")
	c3 := commitFiles(t, repoDir, map[string]string{"bad/bad.go": "package bad\n\nfunc Bad() {}\n", "ok/ok.go": "package ok\n\nfunc Ok() {}\n"})
	st = reindex(c3)
	if st.LastError != "" || st.Failed != 1 || len(st.LeftOut) != 1 || st.LeftOut[0].Path != "bad/bad.go" || !strings.Contains(st.LeftOut[0].Reason, "poisoned bad/bad.go") {
		t.Fatalf("status with a bad file = %+v, want bad/bad.go left out with its reason", st)
	}
	h := head()
	if files := segFiles(h); h.Commit != c3 || h.Complete || slices.Contains(files, "bad/bad.go") || !slices.Contains(files, "ok/ok.go") {
		t.Fatalf("HEAD with a bad file = %+v, files %v; want %s, not complete, without bad/bad.go", h, files, c3)
	}
	poison.Store("")
	st = reindex(c3)
	if st.Already || st.Failed != 0 || st.Parsed != 1 {
		t.Fatalf("reindex of an incomplete HEAD = %+v, want bad/bad.go parsed (1 parsed, not 'already indexed')", st)
	}
	if h := head(); h.Commit != c3 || !h.Complete || !slices.Contains(segFiles(h), "bad/bad.go") {
		t.Fatalf("HEAD after healing = %+v, want %s complete with bad/bad.go", h, c3)
	}
	// A complete HEAD is skipped as already indexed.
	if st = reindex(c3); !st.Already {
		t.Errorf("reindex of a complete HEAD = %+v, want already indexed", st)
	}
	if got := formatIndexed(st); !strings.Contains(got, "already indexed") {
		t.Errorf("formatIndexed = %q, want it to say already indexed", got)
	}
	logs := up.errs.String()
	if !strings.Contains(logs, "parse job failed") || !strings.Contains(logs, "tenant=default") || !strings.Contains(logs, "commit="+c2) {
		t.Errorf("no log line of the failed store writes with tenant and commit:\n%s", logs)
	}
}
