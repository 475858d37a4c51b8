package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/pipeline"
	"codectx/pkg/testrepo"
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
	if dry.Deleted != 3 || dry.Roots != 1 {
		t.Fatalf("dry run = %+v, want 3 to delete (old price.go's result and text, old version) from 1 root", dry)
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
	live := index.ParseKey("t", "go", "0123456789abcdef0123456789abcdef01234567")
	dead := []string{
		index.ParseKey("t", "go", "ffff456789abcdef0123456789abcdef01234567"),
		// The same file in another tenant's cache: no root of that tenant lists it.
		index.ParseKey("u", "go", "0123456789abcdef0123456789abcdef01234567"),
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
	if st.Kept != 1 || st.Deleted != 2 {
		t.Errorf("stats = %+v, want 1 kept, 2 deleted", st)
	}
	if ok, _ := store.Exists(ctx, live); !ok {
		t.Error("deleted the result the manifest's tenant references")
	}
	if ok, _ := store.Exists(ctx, live); !ok {
		t.Error("deleted a result the manifest references")
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
