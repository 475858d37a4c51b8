package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/codectx"
	"codectx/pkg/dense"
	"codectx/pkg/dense/densetest"
	"codectx/pkg/index"
	"codectx/pkg/pipeline"
	"codectx/pkg/segment"
	"codectx/pkg/testrepo"
	vlocal "codectx/pkg/vector/local"
)

func TestCollectParseCache(t *testing.T) {
	ctx := context.Background()
	r := testrepo.New(t)
	first := r.Commit("initial", testrepo.Small)
	store := blob.NewMem()
	if _, err := index.Build(ctx, store, r.Dir, index.Options{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	r.Commit("change the price table", map[string]string{
		"price/price.go": strings.Replace(testrepo.Small["price/price.go"], `"apple": 3`, `"apple": 5`, 1),
	})
	if _, err := index.Build(ctx, store, r.Dir, index.Options{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	// The repository's own GC drops the first snapshot's segment; a result
	// of an older parser version lingers too.
	if err := store.Delete(ctx, index.SegmentKey(index.DefaultTenant, "shop", first)); err != nil {
		t.Fatal(err)
	}
	stale := "parse/v0/go/ab/abcdef"
	if err := store.Put(ctx, stale, []byte("{}")); err != nil {
		t.Fatal(err)
	}

	dry, err := pipeline.CollectParseCache(ctx, store, pipeline.GCOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	// The old price.go's entry carries its text (no object at ContentKey).
	if dry.Deleted != 2 || dry.Roots != 1 {
		t.Fatalf("dry run = %+v, want 2 to delete (old price.go's result with its text, old version) from 1 root", dry)
	}
	if ok, _ := store.Exists(ctx, stale); !ok {
		t.Fatal("dry run deleted")
	}
	got, err := pipeline.CollectParseCache(ctx, store, pipeline.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got != dry {
		t.Errorf("collect = %+v, want what the dry run said: %+v", got, dry)
	}
	if ok, _ := store.Exists(ctx, stale); ok {
		t.Error("stale parser version kept")
	}
	// Nothing the current snapshot needs is gone: a rebuild reuses all.
	sum, err := index.Build(ctx, store, r.Dir, index.Options{Name: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Parsed != 0 {
		t.Errorf("rebuild parsed %d files, want 0 (all cached)", sum.Parsed)
	}
	again, err := pipeline.CollectParseCache(ctx, store, pipeline.GCOptions{})
	if err != nil || again.Deleted != 0 {
		t.Errorf("second collect = %+v, %v; want nothing deleted", again, err)
	}
}

func TestCollectParseCacheCorruptSegment(t *testing.T) {
	ctx := context.Background()
	store := blob.NewMem()
	if err := store.Put(ctx, "parse/v1/go/ab/abcdef", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, "segments/default/r/abc.seg", []byte("not a segment")); err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.CollectParseCache(ctx, store, pipeline.GCOptions{}); err == nil {
		t.Fatal("collected with an unreadable segment")
	}
	if ok, _ := store.Exists(ctx, "parse/v1/go/ab/abcdef"); !ok {
		t.Error("deleted a cache entry while a root was unreadable")
	}
}

// A snapshot still being indexed has only its manifest: its results stay.
func TestCollectParseCacheKeepsManifestFiles(t *testing.T) {
	ctx := context.Background()
	store := blob.NewMem()
	m := `{"tenant":"t","repo":"r","commit":"c1","files":[{"path":"a/b.go","blob":"0123456789abcdef0123456789abcdef01234567","size":3}]}`
	if err := store.Put(ctx, pipeline.ManifestKey("t", "r", "c1"), []byte(m)); err != nil {
		t.Fatal(err)
	}
	live := index.ParseKey("t", "a/b.go", "0123456789abcdef0123456789abcdef01234567")
	dead := []string{
		index.ParseKey("t", "a/b.go", "ffff456789abcdef0123456789abcdef01234567"),
		// The same content at another path: no root lists it there.
		index.ParseKey("t", "a/c.go", "0123456789abcdef0123456789abcdef01234567"),
		// The same file in another tenant's cache: no root of that tenant lists it.
		index.ParseKey("u", "a/b.go", "0123456789abcdef0123456789abcdef01234567"),
	}
	for _, k := range append([]string{live}, dead...) {
		if err := store.Put(ctx, k, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	st, err := pipeline.CollectParseCache(ctx, store, pipeline.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Kept != 1 || st.Deleted != 3 {
		t.Errorf("stats = %+v, want 1 kept, 3 deleted", st)
	}
	if ok, _ := store.Exists(ctx, live); !ok {
		t.Error("deleted the result the manifest's tenant references")
	}
	if ok, _ := store.Exists(ctx, live); !ok {
		t.Error("deleted a result the manifest references")
	}
}

// vanishingDriver is a store whose manifest key is deleted right after a
// listing of manifests names it, as a repository's GC (or a DELETE)
// running beside codectx gc deletes it.
type vanishingDriver struct {
	*blob.Bucket
	key string
}

func (v vanishingDriver) List(ctx context.Context, prefix string) ([]string, error) {
	keys, err := v.Bucket.List(ctx, prefix)
	if err == nil && strings.HasPrefix(v.key, prefix) && prefix == "manifests/" {
		err = v.Bucket.Delete(ctx, v.key)
	}
	return keys, err
}

// A manifest its repository's GC deletes while codectx gc runs is no
// error (as a segment, vector set or embed plan deleted meanwhile is not):
// gc, documented safe beside running indexers and fit for a cron job,
// failed with "read manifest: blob: not found".
func TestCollectParseCacheManifestDeletedMeanwhile(t *testing.T) {
	ctx := context.Background()
	mem := blob.NewMem()
	m := `{"tenant":"t","repo":"r","commit":"c1","files":[{"path":"a/b.go","blob":"0123456789abcdef0123456789abcdef01234567","size":3}]}`
	if err := mem.Put(ctx, pipeline.ManifestKey("t", "r", "c1"), []byte(m)); err != nil {
		t.Fatal(err)
	}
	// The snapshot that replaced it, and so the root that remains.
	m2 := `{"tenant":"t","repo":"r","commit":"c2","files":[{"path":"a/b.go","blob":"ffff456789abcdef0123456789abcdef01234567","size":3}]}`
	live := index.ParseKey("t", "a/b.go", "ffff456789abcdef0123456789abcdef01234567")
	for k, v := range map[string]string{
		index.ParseKey("t", "a/b.go", "0123456789abcdef0123456789abcdef01234567"): "{}",
		live:                                 "{}",
		pipeline.ManifestKey("t", "r", "c2"): m2,
	} {
		if err := mem.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	store := blob.NewBucket(vanishingDriver{mem, pipeline.ManifestKey("t", "r", "c1")})
	st, err := pipeline.CollectParseCache(ctx, store, pipeline.GCOptions{})
	if err != nil {
		t.Fatalf("collect beside a repository's GC: %v", err)
	}
	if st.Roots != 1 || st.Kept != 1 || st.Deleted != 1 {
		t.Errorf("stats = %+v, want 1 root, 1 kept, 1 deleted", st)
	}
	if ok, _ := mem.Exists(ctx, live); !ok {
		t.Error("deleted the result the remaining manifest references")
	}
}

func TestCollectParseCacheNoRoots(t *testing.T) {
	ctx := context.Background()
	store := blob.NewMem()
	if err := store.Put(ctx, "parse/v1/go/ab/abcdef", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	st, err := pipeline.CollectParseCache(ctx, store, pipeline.GCOptions{})
	if !errors.Is(err, pipeline.ErrNoRoots) || st.Cached != 1 {
		t.Fatalf("collect = %+v, %v; want ErrNoRoots with the count", st, err)
	}
	if ok, _ := store.Exists(ctx, "parse/v1/go/ab/abcdef"); !ok {
		t.Fatal("deleted without roots")
	}
	if st, err := pipeline.CollectParseCache(ctx, store, pipeline.GCOptions{AllowNoRoots: true}); err != nil || st.Deleted != 1 {
		t.Errorf("collect with AllowNoRoots = %+v, %v; want 1 deleted", st, err)
	}
}

// TestCollectEmbeddingCache: the vectors no stored segment, vector set or
// embed plan of their tenant needs are deleted, per tenant; what the
// kept snapshots need stays (a rebuild embeds nothing).
func TestCollectEmbeddingCache(t *testing.T) {
	ctx := context.Background()
	r := testrepo.New(t)
	first := r.Commit("initial", testrepo.Small)
	store := blob.NewMem()
	emb := &densetest.Words{}
	vs := vlocal.New(store, vlocal.Float32)
	build := func(tenant string) *segment.Segment {
		t.Helper()
		if _, err := index.Build(ctx, store, r.Dir, index.Options{Tenant: tenant, Name: "shop"}); err != nil {
			t.Fatal(err)
		}
		seg, err := index.LoadHead(ctx, store, tenant, "shop")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dense.IndexSegment(ctx, store, vs, emb, seg); err != nil {
			t.Fatal(err)
		}
		return seg
	}
	// Tenants a and b index the first commit, then a the second.
	build("a")
	build("b")
	r.Commit("change the price table", map[string]string{
		"price/price.go": strings.Replace(testrepo.Small["price/price.go"], `"apple": 3`, `"apple": 5`, 1),
	})
	seg := build("a")
	// a's repository GC drops the first snapshot's segment; b keeps its own.
	if err := store.Delete(ctx, index.SegmentKey("a", "shop", first)); err != nil {
		t.Fatal(err)
	}
	col := dense.Collection(emb)
	// The chunks of the first commit that the second changed.
	var gone []string
	for _, c := range mustSegment(ctx, t, store, index.SegmentKey("b", "shop", first)).Chunks {
		h := dense.Hash(c)
		if !slices.ContainsFunc(seg.Chunks, func(d codectx.Chunk) bool { return dense.Hash(d) == h }) {
			gone = append(gone, h)
		}
	}
	if len(gone) == 0 {
		t.Fatal("the change left every chunk text as it was")
	}
	// A snapshot of a being indexed has planned a chunk whose vector is
	// cached: its plan keeps it.
	inflight := strings.Repeat("f", 64)
	if err := store.Put(ctx, dense.CacheKey(col, "a", inflight), make([]byte, 4*col.Dim)); err != nil {
		t.Fatal(err)
	}
	plan, _ := json.Marshal(pipeline.EmbedPlan{Tenant: "a", Repo: "other", Commit: "c1", Model: col.Model, Dim: col.Dim, Points: []dense.Point{{Hash: inflight, Path: "x.go"}}})
	if err := store.Put(ctx, pipeline.EmbedPlanKey("a", "other", "c1"), plan); err != nil {
		t.Fatal(err)
	}

	dry, err := pipeline.CollectEmbeddingCache(ctx, store, pipeline.GCOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Deleted != len(gone) {
		t.Fatalf("dry run = %+v, want %d to delete (a's vectors of the changed chunks)", dry, len(gone))
	}
	got, err := pipeline.CollectEmbeddingCache(ctx, store, pipeline.GCOptions{})
	if err != nil || got != dry {
		t.Fatalf("collect = %+v (%v), want what the dry run said: %+v", got, err, dry)
	}
	for _, h := range gone {
		if ok, _ := store.Exists(ctx, dense.CacheKey(col, "a", h)); ok {
			t.Errorf("a's vector of %s kept, though no snapshot of a has it", h[:8])
		}
		if ok, _ := store.Exists(ctx, dense.CacheKey(col, "b", h)); !ok {
			t.Errorf("b's vector of %s deleted, though b's segment has it", h[:8])
		}
	}
	if ok, _ := store.Exists(ctx, dense.CacheKey(col, "a", inflight)); !ok {
		t.Error("the vector an embed plan names was deleted")
	}
	// What a's HEAD needs is all there: indexing it again embeds nothing.
	before := emb.Texts()
	if st, err := dense.IndexSegment(ctx, store, vs, emb, seg); err != nil || st.Embedded != 0 || emb.Texts() != before {
		t.Fatalf("re-index of a's HEAD after GC: %+v (%v), want nothing embedded", st, err)
	}
	if again, err := pipeline.CollectEmbeddingCache(ctx, store, pipeline.GCOptions{}); err != nil || again.Deleted != 0 {
		t.Errorf("second collect = %+v, %v; want nothing deleted", again, err)
	}
}

func mustSegment(ctx context.Context, t *testing.T, store *blob.Bucket, key string) *segment.Segment {
	t.Helper()
	seg, err := index.LoadSegment(ctx, store, key)
	if err != nil {
		t.Fatal(err)
	}
	return seg
}
