package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"codectx/pkg/source"
	"codectx/pkg/testrepo"
)

// The clone cache is collected by age and then by size, least recently
// used first, and a clone an open snapshot uses is never removed (issue 14
// item 4).
func TestCollectClones(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	urls := map[string]string{}
	for _, name := range []string{"a", "b", "c"} {
		r := testrepo.New(t)
		r.Commit("first", map[string]string{name + ".go": "package " + name + "\n\n// " + strings.Repeat(name, 4000) + "\n"})
		urls[name] = "file://" + filepath.ToSlash(r.Dir)
	}
	open := func(name string) *source.Snapshot {
		t.Helper()
		s, err := OpenSnapshot(ctx, "", urls[name], "", cache)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	dir := func(name string) string { return source.CloneDir(cache, "", urls[name]) }
	exists := func(name string) bool {
		_, err := os.Stat(dir(name))
		return err == nil
	}
	age := func(name string, d time.Duration) {
		t.Helper()
		at := time.Now().Add(-d)
		if err := os.Chtimes(dir(name), at, at); err != nil {
			t.Fatal(err)
		}
	}
	open("a").Close()
	open("b").Close()
	c := open("c") // stays open
	age("a", 10*24*time.Hour)
	age("b", time.Hour)
	age("c", 30*24*time.Hour)

	// By age: a goes; c is older but open.
	res, err := CollectClones(cache, CloneLimits{MaxAge: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 1 || res.InUse != 1 || res.Kept != 2 || exists("a") || !exists("b") || !exists("c") || res.Freed <= 0 {
		t.Fatalf("by age: %+v; a %v b %v c %v, want only a removed, c kept in use", res, exists("a"), exists("b"), exists("c"))
	}
	// By size: everything not in use goes, least recently used first.
	res, err = CollectClones(cache, CloneLimits{MaxBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if exists("b") || !exists("c") || res.InUse != 1 {
		t.Fatalf("by size: %+v; b %v c %v, want b removed, c kept in use", res, exists("b"), exists("c"))
	}
	// The open snapshot still reads its files.
	if _, err := c.Read(c.Files[0]); err != nil {
		t.Fatalf("read from the kept clone: %v", err)
	}
	c.Close()
	// Within the limits nothing goes; a use makes a clone young again.
	open("b").Close()
	age("c", 30*24*time.Hour)
	res, err = CollectClones(cache, CloneLimits{MaxAge: 7 * 24 * time.Hour, MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if !exists("b") || exists("c") || res.Kept != 1 || res.Removed != 1 || res.Bytes <= 0 {
		t.Fatalf("limits: %+v; b %v c %v, want b kept, c (closed, old) removed", res, exists("b"), exists("c"))
	}
	// A removed clone is cloned again when next opened.
	open("a").Close()
	if !exists("a") {
		t.Error("a not cloned again")
	}
}

// Opens and collections running together never remove a clone under an
// open snapshot (run with -race).
func TestCollectClonesConcurrentOpens(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	r := testrepo.New(t)
	r.Commit("first", map[string]string{"a.go": "package a\n"})
	url := "file://" + filepath.ToSlash(r.Dir)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := CollectClones(cache, CloneLimits{MaxBytes: 1}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 20; i++ {
		s, err := OpenSnapshot(ctx, "", url, "", cache)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Read(s.Files[0]); err != nil {
			t.Fatalf("open %d: read: %v", i, err)
		}
		s.Close()
	}
	close(stop)
	wg.Wait()
}

// Clones of the old layout, one per URL for every tenant, are never
// opened again (each tenant clones into a directory of its own): the
// first collection removes them, whatever their age, and keeps the
// tenants' own.
func TestCollectClonesDropsSharedLayout(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	r := testrepo.New(t)
	r.Commit("first", map[string]string{"a.go": "package a\n"})
	url := "file://" + filepath.ToSlash(r.Dir)
	s, err := OpenSnapshot(ctx, "acme", url, "", cache)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	own := source.CloneDir(cache, "acme", url)
	shared := filepath.Join(cache, "h.example_acme_lib-0123456789abcdef0123456789abcdef.git")
	older := filepath.Join(cache, "h.example_acme_app-01234567.git") // a 32-bit hash
	// Not clones of the old layout: an operator's, or the file system's.
	others := []string{filepath.Join(cache, "lost+found"), filepath.Join(cache, "backup"), filepath.Join(cache, "notes-0123.git")}
	for _, d := range append([]string{shared, older}, others...) {
		if err := os.MkdirAll(filepath.Join(d, "objects"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	res, err := CollectClones(cache, CloneLimits{MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{shared, older} {
		if _, err := os.Stat(d); err == nil || res.Removed != 2 {
			t.Errorf("the shared clone %s was kept (%+v)", filepath.Base(d), res)
		}
	}
	for _, d := range others {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s, not a clone, was removed: %v", filepath.Base(d), err)
		}
	}
	if _, err := os.Stat(own); err != nil {
		t.Errorf("acme's clone: %v", err)
	}
	if other := source.CloneDir(cache, "beta", url); other == own {
		t.Errorf("acme and beta share the clone %s", own)
	}
}

// TestRemoveCloneInUse: a deleted repository's clone that a snapshot still
// uses is removed when the snapshot closes it; one not in use at once.
// Removed while the snapshot wrote to it, the removal failed ("directory
// not empty") and DELETE answered 503 (TestAuditDelPushRace in CI).
func TestRemoveCloneInUse(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	r := testrepo.New(t)
	r.Commit("first", map[string]string{"a.go": "package a\n"})
	url := "file://" + filepath.ToSlash(r.Dir)
	dir := source.CloneDir(cache, "acme", url)
	exists := func() bool { _, err := os.Stat(dir); return err == nil }

	s, err := OpenSnapshot(ctx, "acme", url, "", cache)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if removed, err := RemoveClone(ctx, cache, "acme", url, 20*time.Millisecond); !removed || err != nil {
			t.Fatalf("RemoveClone of a clone in use = %v, %v; want it taken", removed, err)
		}
	}
	if !exists() {
		t.Fatal("the clone in use was removed under its snapshot")
	}
	s.Close()
	if exists() {
		t.Fatal("the clone is still there after its snapshot closed")
	}

	// A snapshot that closes within the wait: removed before the call
	// returns.
	closing, err := OpenSnapshot(ctx, "acme", url, "", cache)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, func() { closing.Close() })
	if removed, err := RemoveClone(ctx, cache, "acme", url, 5*time.Second); !removed || err != nil || exists() {
		t.Fatalf("RemoveClone waiting for a snapshot that closes = %v, %v, clone there %v", removed, err, exists())
	}

	// Not in use: removed at once; then there is none.
	s, err = OpenSnapshot(ctx, "acme", url, "", cache)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if removed, err := RemoveClone(ctx, cache, "acme", url, 0); !removed || err != nil || exists() {
		t.Fatalf("RemoveClone = %v, %v, clone there %v", removed, err, exists())
	}
	if removed, err := RemoveClone(ctx, cache, "acme", url, 0); removed || err != nil {
		t.Fatalf("RemoveClone of no clone = %v, %v", removed, err)
	}
	// Another tenant's clone of the same URL is not touched.
	o, err := OpenSnapshot(ctx, "beta", url, "", cache)
	if err != nil {
		t.Fatal(err)
	}
	o.Close()
	RemoveClone(ctx, cache, "acme", url, 0)
	if _, err := os.Stat(source.CloneDir(cache, "beta", url)); err != nil {
		t.Fatalf("beta's clone: %v", err)
	}
}
