package index_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/blob/local"
	"codectx/pkg/index"
	"codectx/pkg/segment"
	"codectx/pkg/source"
)

// oneSegment builds r as one segment (in a scratch store).
func oneSegment(t *testing.T, dir string) *segment.Segment {
	t.Helper()
	ctx := context.Background()
	snap, err := source.Open(ctx, dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	one, _, err := index.BuildSegment(ctx, blob.NewMem(), snap, "std", index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return one
}

// TestMappedShards builds shards into a local store and checks that a load
// maps them where they lie (nothing but metadata in the heap), answers as
// one segment, and still answers after its mappings were released (pages
// dropped) and after the shard files were deleted from disk.
func TestMappedShards(t *testing.T) {
	ctx := context.Background()
	r := goRepo(t)
	one := oneSegment(t, r.Dir)
	store, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.Build(ctx, store, r.Dir, index.Options{Name: "std", ShardBytes: 40 << 10}); err != nil {
		t.Fatal(err)
	}
	got, err := index.LoadHead(ctx, store, index.DefaultTenant, "std")
	if err != nil {
		t.Fatal(err)
	}
	if got.MappedSize() == 0 || !got.InPlace() || !got.BM25.Raw() {
		t.Fatalf("shards not mapped: %d bytes mapped", got.MappedSize())
	}
	if got.HeapSize() >= one.HeapSize()/2 {
		t.Errorf("mapped segment holds %d heap bytes, the decoded one %d", got.HeapSize(), one.HeapSize())
	}
	if got.Size() != got.HeapSize()+got.MappedSize() {
		t.Errorf("Size %d != heap %d + mapped %d", got.Size(), got.HeapSize(), got.MappedSize())
	}
	sameSegment(t, got, one)
	sameAnswers(t, got, one)
	body := got.Chunks[len(got.Chunks)/2].Body // aliases a mapping

	got.Release()
	got.Release() // once only
	sameAnswers(t, got, one)
	keys, err := store.List(ctx, index.ShardPrefix(index.DefaultTenant, "std"))
	if err != nil || len(keys) < 8 {
		t.Fatal(keys, err)
	}
	for _, k := range keys {
		p, ok, err := store.LocalPath(k)
		if err != nil || !ok {
			t.Fatal(p, ok, err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	sameSegment(t, got, one)
	sameAnswers(t, got, one)
	if body != one.Chunks[len(one.Chunks)/2].Body {
		t.Fatalf("an aliased body changed after release and delete")
	}
	if _, err := index.LoadHead(ctx, store, index.DefaultTenant, "std"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("load without shard files: %v, want ErrNotFound", err)
	}
}

// TestMappedShardTruncated checks that a shard file cut short (put in
// place by rename, as a store does) fails the mapped load with
// ErrCorrupt instead of faulting.
func TestMappedShardTruncated(t *testing.T) {
	ctx := context.Background()
	r := goRepo(t)
	store, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.Build(ctx, store, r.Dir, index.Options{Name: "std", ShardBytes: 40 << 10}); err != nil {
		t.Fatal(err)
	}
	keys, err := store.List(ctx, index.ShardPrefix(index.DefaultTenant, "std"))
	if err != nil || len(keys) < 2 {
		t.Fatal(keys, err)
	}
	for _, n := range []int{0, 7, 100, -1} {
		data, err := store.Get(ctx, keys[1])
		if err != nil {
			t.Fatal(err)
		}
		cut := data[:len(data)-1]
		if n >= 0 {
			cut = data[:n]
		}
		if err := store.Put(ctx, keys[1], cut); err != nil {
			t.Fatal(err)
		}
		if _, err := index.LoadHead(ctx, store, index.DefaultTenant, "std"); !errors.Is(err, segment.ErrCorrupt) {
			t.Fatalf("shard cut to %d bytes: %v, want ErrCorrupt", len(cut), err)
		}
		if err := store.Put(ctx, keys[1], data); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := index.LoadHead(ctx, store, index.DefaultTenant, "std"); err != nil {
		t.Fatal(err)
	}
}

// TestShardCache loads shards of a store without local files through a
// shard cache: downloaded once, mapped, bounded in bytes, and a corrupt
// cached copy fails the load and is fetched again by the next.
func TestShardCache(t *testing.T) {
	ctx := context.Background()
	r := goRepo(t)
	one := oneSegment(t, r.Dir)
	store := blob.NewMem()
	if _, err := index.Build(ctx, store, r.Dir, index.Options{Name: "std", ShardBytes: 40 << 10}); err != nil {
		t.Fatal(err)
	}
	h, err := index.ReadHead(ctx, store, index.DefaultTenant, "std")
	if err != nil {
		t.Fatal(err)
	}
	key := h.Segment
	dir := t.TempDir()
	cache, err := index.OpenShardCache(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := index.LoadSegmentWith(ctx, store, key, index.LoadOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if got.MappedSize() == 0 || cache.Bytes() != got.MappedSize() {
		t.Fatalf("mapped %d bytes, cache holds %d", got.MappedSize(), cache.Bytes())
	}
	sameSegment(t, got, one)
	sameAnswers(t, got, one)

	// Corrupt one cached file: the load fails, the copy is dropped, the
	// next load downloads it again.
	keys, _ := store.List(ctx, index.ShardPrefix(index.DefaultTenant, "std"))
	p := filepath.Join(dir, filepath.FromSlash(keys[1]))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(p+".x", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".x", p); err != nil {
		t.Fatal(err)
	}
	if _, err := index.LoadSegmentWith(ctx, store, key, index.LoadOptions{Cache: cache}); !errors.Is(err, segment.ErrCorrupt) {
		t.Fatalf("load with a corrupt cached shard: %v, want ErrCorrupt", err)
	}
	again, err := index.LoadSegmentWith(ctx, store, key, index.LoadOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, again, one)

	// A cache bounded below the shards keeps at most the bound plus the
	// one just fetched, and every load still answers.
	small, err := index.OpenShardCache(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	seg, err := index.LoadSegmentWith(ctx, store, key, index.LoadOptions{Cache: small})
	if err != nil {
		t.Fatal(err)
	}
	if small.Bytes() > seg.MappedSize()/int64(len(keys))*4 {
		t.Errorf("bounded cache holds %d bytes of %d", small.Bytes(), seg.MappedSize())
	}
	// The files it deleted are mapped by seg: their disk is held.
	if h := small.HeldBytes(); h == 0 || h+small.Bytes() < seg.MappedSize() {
		t.Errorf("bounded cache: %d bytes held by deleted mapped files, %d cached, %d mapped", h, small.Bytes(), seg.MappedSize())
	}
	if cache.HeldBytes() != 0 {
		t.Errorf("unbounded cache deleted mapped files: %d bytes held", cache.HeldBytes())
	}
	sameAnswers(t, seg, one)
	// Reopened, the cache finds the files left.
	re, err := index.OpenShardCache(dir, 0)
	if err != nil || re.Bytes() != cache.Bytes() {
		t.Fatalf("reopened cache holds %d bytes, want %d (%v)", re.Bytes(), cache.Bytes(), err)
	}
}
