package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/segment"
	"codectx/pkg/source"
)

func testManifest(files int, commit string) *index.Manifest {
	m := &index.Manifest{Tenant: "acme", Repo: "shop", Commit: commit, Tree: "t" + commit,
		Skipped:   []source.Skipped{{Path: "vendor/", Reason: "ignored"}},
		GoModules: map[string]string{"tools": "example.com/tools"},
		History:   []segment.Commit{{Hash: commit, Author: "A <a@example.com>", When: "2026-01-02T03:04:05Z", Message: "fix", Files: []string{"a.go"}}},
	}
	for i := range files {
		m.Files = append(m.Files, source.File{Path: fmt.Sprintf("pkg%d/f%d.go", i%50, i), Blob: fmt.Sprintf("%040x", i), Size: int64(100 + i)})
	}
	return m
}

func putManifest(t testing.TB, store *blob.Bucket, key string, m *index.Manifest) {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(context.Background(), key, data); err != nil {
		t.Fatal(err)
	}
}

// TestReadManifestCached checks that a manifest read again comes from the
// cache equal to a fresh decode, that what a reader changes in its copy
// reaches neither the cache nor the next reader, and that the cache is by
// content: other bytes under the same key decode afresh.
func TestReadManifestCached(t *testing.T) {
	ctx := context.Background()
	store := blob.NewMem()
	want := testManifest(200, "c1")
	putManifest(t, store, "manifests/a.json", want)
	fresh := func(key string) *index.Manifest {
		data, err := store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var m index.Manifest
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		return &m
	}
	first, err := ReadManifest(ctx, store, "manifests/a.json")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, fresh("manifests/a.json")) {
		t.Fatal("first read differs from a decode")
	}
	// A reader that changes everything it can.
	first.Commit = "x"
	first.Files[0].Path = "changed.go"
	first.Files = append(first.Files[:1], first.Files[5:]...)
	first.Skipped[0].Reason = "x"
	first.GoModules["tools"] = "x"
	first.History[0].Files[0] = "x"
	second, err := ReadManifest(ctx, store, "manifests/a.json")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(second, fresh("manifests/a.json")) {
		t.Fatalf("second read after a reader's changes differs from a decode: files[0] %+v, %d files", second.Files[0], len(second.Files))
	}
	// The same bytes under another key hit; other bytes under the same
	// key do not.
	putManifest(t, store, "manifests/b.json", want)
	if got, err := ReadManifest(ctx, store, "manifests/b.json"); err != nil || !reflect.DeepEqual(got, fresh("manifests/b.json")) {
		t.Fatalf("same bytes, other key: %v", err)
	}
	putManifest(t, store, "manifests/a.json", testManifest(3, "c2"))
	if got, err := ReadManifest(ctx, store, "manifests/a.json"); err != nil || got.Commit != "c2" || len(got.Files) != 3 {
		t.Fatalf("new bytes under the key: commit %q, %d files, %v", got.Commit, len(got.Files), err)
	}
	// nil and empty stay as decoded.
	empty := &index.Manifest{Tenant: "acme", Repo: "e", Commit: "c3", Files: []source.File{}}
	putManifest(t, store, "manifests/e.json", empty)
	for range 2 {
		if got, err := ReadManifest(ctx, store, "manifests/e.json"); err != nil || got.Files == nil || got.Skipped != nil || got.GoModules != nil {
			t.Fatalf("empty manifest: %+v, %v", got, err)
		}
	}
	if _, err := ReadManifest(ctx, store, "manifests/missing.json"); err == nil {
		t.Fatal("missing manifest read without error")
	}
	if err := store.Put(ctx, "manifests/bad.json", []byte("{")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadManifest(ctx, store, "manifests/bad.json"); err == nil {
		t.Fatal("bad manifest decoded")
	}
}

// TestWriteManifestCaches checks that WriteManifest stores the bytes and
// caches their decode (not the manifest they were encoded from: a path
// that is not valid UTF-8 is stored changed), which ReadManifest then
// returns equal to a fresh decode, and that bytes that do not decode are
// stored and not cached.
func TestWriteManifestCaches(t *testing.T) {
	ctx := context.Background()
	store := blob.NewMem()
	m := testManifest(50, "w1")
	m.Files[3].Path = "bad\xffname.go"
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteManifest(ctx, store, "manifests/w.json", data); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Get(ctx, "manifests/w.json"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("stored bytes differ: %v", err)
	}
	sum := sha256.Sum256(data)
	for i := 0; !manifests.has(sum); i++ {
		if i == 10000 {
			t.Fatal("the written manifest never reached the cache")
		}
		time.Sleep(time.Millisecond)
	}
	var fresh index.Manifest
	if err := json.Unmarshal(data, &fresh); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(ctx, store, "manifests/w.json")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, &fresh) {
		t.Fatal("cached manifest differs from a decode of the stored bytes")
	}
	if got.Files[3].Path == m.Files[3].Path {
		t.Fatal("the test's path was stored unchanged: it no longer tells a decode from the encoded manifest")
	}
	bad := []byte("{")
	if err := WriteManifest(ctx, store, "manifests/bad.json", bad); err != nil {
		t.Fatal(err)
	}
	cacheManifest(bad) // what the background decode does, done again: it must not cache
	if manifests.has(sha256.Sum256(bad)) {
		t.Fatal("bytes that do not decode were cached")
	}
	if _, err := ReadManifest(ctx, store, "manifests/bad.json"); err == nil {
		t.Fatal("bad manifest decoded")
	}
}

// TestManifestCacheBounds checks the entry and byte bounds.
func TestManifestCacheBounds(t *testing.T) {
	c := manifestCache{max: 2, maxBytes: 100}
	sum := func(b byte) (s [32]byte) { s[0] = b; return s }
	m := testManifest(1, "c")
	c.put(sum(1), 40, m)
	c.put(sum(2), 40, m)
	c.put(sum(3), 40, m) // over max entries: 1 goes
	if c.get(sum(1)) != nil || c.get(sum(2)) == nil || c.get(sum(3)) == nil {
		t.Fatal("entry bound: want 2 and 3 kept, 1 gone")
	}
	c.get(sum(2))        // 2 is now the most recent
	c.put(sum(4), 60, m) // 40+40+60 > 100: the least recent (3) goes
	if c.get(sum(3)) != nil || c.get(sum(2)) == nil || c.get(sum(4)) == nil {
		t.Fatal("byte bound: want 2 and 4 kept, 3 gone")
	}
	c.put(sum(5), 101, m) // bigger than the bound: not kept
	if c.get(sum(5)) != nil {
		t.Fatal("an entry over the byte bound was kept")
	}
}

// BenchmarkReadManifest reads a GOROOT-sized manifest (11,500 files)
// decoding it every time and through the cache, side by side.
func BenchmarkReadManifest(b *testing.B) {
	ctx := context.Background()
	store := blob.NewMem()
	putManifest(b, store, "manifests/big.json", testManifest(11500, "c"))
	for _, bc := range []struct {
		name  string
		reset bool
	}{{"decode", true}, {"cached", false}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if bc.reset {
					manifests.mu.Lock()
					manifests.ents = nil
					manifests.mu.Unlock()
				}
				if _, err := ReadManifest(ctx, store, "manifests/big.json"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
