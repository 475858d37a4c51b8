package local_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/blob/drivertest"
	"codectx/pkg/blob/local"
)

func open(t *testing.T, dir string) *blob.Bucket {
	t.Helper()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	drivertest.RunConformance(t, func(t *testing.T) *blob.Bucket { return open(t, t.TempDir()) })
}

func TestLayout(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir)
	if err := b.Put(t.Context(), "repos/r1/manifest", []byte("m")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "repos", "r1", "manifest"))
	if err != nil || string(got) != "m" {
		t.Fatalf("file = %q, %v; want %q", got, err, "m")
	}
	// Reopening the directory sees the same objects.
	keys, err := open(t, dir).List(t.Context(), "")
	if err != nil || !slices.Equal(keys, []string{"repos/r1/manifest"}) {
		t.Fatalf("List after reopen = %q, %v", keys, err)
	}
	// Deleting the last object prunes its directories.
	if err := b.Delete(t.Context(), "repos/r1/manifest"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "repos")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("repos/ still present after delete: %v", err)
	}
}

func TestReservedAndShadowedKeys(t *testing.T) {
	b := open(t, t.TempDir())
	ctx := t.Context()
	if err := b.Put(ctx, ".blob/x", []byte("x")); !errors.Is(err, blob.ErrInvalidKey) {
		t.Errorf("Put(.blob/x) err = %v, want ErrInvalidKey", err)
	}
	if err := b.Put(ctx, "a", []byte("a")); err != nil {
		t.Fatal(err)
	}
	// "a" is a file, so "a/b" cannot be a path: an error, not corruption.
	if err := b.Put(ctx, "a/b", []byte("b")); err == nil {
		t.Error("Put(a/b) with object a present succeeded; want error")
	}
	if err := b.Put(ctx, "p/q", []byte("q")); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "p", []byte("p")); err == nil {
		t.Error("Put(p) with object p/q present succeeded; want error")
	}
	if err := b.Create(ctx, "p", []byte("p")); err == nil || errors.Is(err, blob.ErrExists) {
		t.Errorf("Create(p) with object p/q present err = %v; want a non-ErrExists error", err)
	}
	for key, want := range map[string]string{"a": "a", "p/q": "q"} {
		got, err := b.Get(ctx, key)
		if err != nil || string(got) != want {
			t.Errorf("Get(%q) = %q, %v; want %q", key, got, err, want)
		}
	}
}

// TestCrossProcessSwap runs increment loops in two child processes and this
// one against the same directory; the flock'd lock file must keep every
// increment.
func TestCrossProcessSwap(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	const procs, incs = 2, 20
	cmds := make([]*exec.Cmd, procs)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestHelperIncrement$")
		cmds[i].Env = append(os.Environ(), "BLOB_LOCAL_HELPER_DIR="+dir, "BLOB_LOCAL_HELPER_N="+strconv.Itoa(incs))
		cmds[i].Stderr = os.Stderr
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	b := open(t, dir)
	for range incs {
		if err := increment(t.Context(), b, "counter"); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("helper %d: %v", i, err)
		}
	}
	got, err := b.Get(t.Context(), "counter")
	if want := strconv.Itoa((procs + 1) * incs); err != nil || string(got) != want {
		t.Fatalf("counter = %q, %v; want %s", got, err, want)
	}
}

func TestHelperIncrement(t *testing.T) {
	dir := os.Getenv("BLOB_LOCAL_HELPER_DIR")
	if dir == "" {
		t.Skip("helper process for TestCrossProcessSwap")
	}
	n, err := strconv.Atoi(os.Getenv("BLOB_LOCAL_HELPER_N"))
	if err != nil {
		t.Fatal(err)
	}
	b := open(t, dir)
	for range n {
		if err := increment(t.Context(), b, "counter"); err != nil {
			t.Fatal(err)
		}
	}
}

// increment reads the decimal counter at key and swaps in counter+1,
// retrying on conflict.
func increment(ctx context.Context, b *blob.Bucket, key string) error {
	for {
		cur, err := b.Get(ctx, key)
		var old []byte
		n := 0
		if err == nil {
			old = cur
			if n, err = strconv.Atoi(string(cur)); err != nil {
				return err
			}
		} else if !errors.Is(err, blob.ErrNotFound) {
			return err
		}
		if err := b.Swap(ctx, key, old, []byte(strconv.Itoa(n+1))); !errors.Is(err, blob.ErrConflict) {
			return err
		}
	}
}

func TestSweepsOldTempFiles(t *testing.T) {
	dir := t.TempDir()
	open(t, dir)
	tmp := filepath.Join(dir, ".blob", "tmp")
	stale, fresh := filepath.Join(tmp, "put-stale"), filepath.Join(tmp, "put-fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	open(t, dir)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temp file survived Open: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temp file removed: %v", err)
	}
}

// TestPutCache: a cache object (written without fsyncs) is stored and
// replaced like Put, seen by another process's bucket on the directory,
// leaves no temp file, keeps the key rules, and Sync succeeds.
func TestPutCache(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	a, b := open(t, dir), open(t, dir)
	for _, v := range []string{"one", "two, longer"} {
		if err := a.PutCache(ctx, "parse/x/ab/abc", []byte(v)); err != nil {
			t.Fatal(err)
		}
		if got, err := b.Get(ctx, "parse/x/ab/abc"); err != nil || string(got) != v {
			t.Fatalf("get = %q, %v; want %q", got, err, v)
		}
	}
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.ReadDir(filepath.Join(dir, ".blob", "tmp"))
	if err != nil || len(tmp) != 0 {
		t.Fatalf("temp files left: %v, %v", tmp, err)
	}
	if err := a.PutCache(ctx, "parse/x/ab/abc/d", []byte("v")); !errors.Is(err, blob.ErrInvalidKey) {
		t.Fatalf("a key under an object: %v", err)
	}
	if err := a.PutCache(ctx, ".blob/x", []byte("v")); !errors.Is(err, blob.ErrInvalidKey) {
		t.Fatalf("a reserved key: %v", err)
	}
	mem := blob.NewMem()
	if err := mem.PutCache(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if got, err := mem.Get(ctx, "k"); err != nil || string(got) != "v" || mem.Sync(ctx) != nil {
		t.Fatalf("mem: %q, %v", got, err)
	}
}
