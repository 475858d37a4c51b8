package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/queue"
	"codectx/pkg/segment"
)

// TestGraphShards runs the graph stage on the same parsed snapshot as one
// segment and as small shards: the shard list's joined index equals the
// segment.
func TestGraphShards(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, pkg := range []string{"encoding/json", "encoding/csv", "encoding/hex"} {
		src := filepath.Join(runtime.GOROOT(), "src", filepath.FromSlash(pkg))
		ents, err := os.ReadDir(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), "_test.go") || !strings.HasSuffix(e.Name(), ".go") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(dir, filepath.FromSlash(pkg), e.Name())
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	build := func(shardBytes int64) (*segment.Segment, []string) {
		store, commit, mk := parsed(t, dir, "t", "r")
		key, err := BuildSegment(ctx, store, GraphJob{Tenant: "t", Repo: "r", Commit: commit, ManifestKey: mk, ShardBytes: shardBytes})
		if err != nil {
			t.Fatal(err)
		}
		seg, err := index.LoadSegment(ctx, store, key)
		if err != nil {
			t.Fatal(err)
		}
		shards, err := index.ShardKeys(ctx, store, key)
		if err != nil {
			t.Fatal(err)
		}
		return seg, shards
	}
	one, none := build(-1)
	got, shards := build(32 << 10)
	if len(none) != 0 || len(shards) < 5 {
		t.Fatalf("%d shards for one segment, %d for 32 KiB shards", len(none), len(shards))
	}
	if !reflect.DeepEqual(got.Files, one.Files) || !reflect.DeepEqual(got.Chunks, one.Chunks) {
		t.Fatal("files or chunks differ")
	}
	for _, p := range [][2]interface{ MarshalBinary() ([]byte, error) }{{got.BM25, one.BM25}, {got.FileBM25, one.FileBM25}, {got.Graph, one.Graph}} {
		a, _ := p[0].MarshalBinary()
		b, _ := p[1].MarshalBinary()
		if !bytes.Equal(a, b) {
			t.Fatal("an index of the joined shards differs from the segment's")
		}
	}
	if s := one.Graph.Stats(); s.CallEdges == 0 || s.TypeEdges == 0 {
		t.Fatalf("graph %+v has no edges to compare", s)
	}
}

// parsed runs the parse stage of the directory dir as tenant/repo into a
// memory store and writes its manifest there, as the orchestrator does
// before a graph job: the store, the snapshot's commit and the manifest's
// key.
func parsed(t *testing.T, dir, tenant, repo string) (*blob.Bucket, string, string) {
	t.Helper()
	ctx := context.Background()
	snap, err := OpenSnapshot(ctx, "", dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	store := blob.NewMem()
	w := &Workers{Store: store}
	data, _ := json.Marshal(ParseBatch{Tenant: tenant, Repo: repo, Commit: snap.Commit, Location: dir, Files: snap.Files})
	if err := w.HandleParse(ctx, queue.Message{Data: data}); err != nil {
		t.Fatal(err)
	}
	m, err := index.ReadManifest(ctx, snap, tenant, repo, 0)
	if err != nil {
		t.Fatal(err)
	}
	mdata, _ := json.Marshal(m)
	mk := ManifestKey(tenant, repo, snap.Commit)
	if err := store.Put(ctx, mk, mdata); err != nil {
		t.Fatal(err)
	}
	return store, snap.Commit, mk
}

// TestGraphJobOfADeletedSnapshot: a graph job whose manifest is removed
// while it builds (a DELETE of the repository) removes what it wrote and
// says so; one whose manifest is gone before it starts writes nothing; a
// redelivery of a job whose segment HEAD names keeps it.
func TestGraphJobOfADeletedSnapshot(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for i := range 40 {
		p := filepath.Join(dir, "p", "f"+strings.Repeat("x", i%3)+string(rune('a'+i%26))+".go")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("package p\n\n// F does a thing.\nfunc F"+string(rune('A'+i%26))+"() {}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	left := func(store *blob.Bucket) []string {
		var keys []string
		for _, root := range []string{"segments/", "shards/"} {
			ks, err := store.List(ctx, index.RepoPrefix(root, "t", "r"))
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, ks...)
		}
		return keys
	}

	store, commit, mk := parsed(t, dir, "t", "r")
	job := GraphJob{Tenant: "t", Repo: "r", Commit: commit, ManifestKey: mk, ShardBytes: 256}
	_, err := buildSegment(ctx, store, job, 0, func(GraphJob) {
		if err := store.Delete(ctx, mk); err != nil { // the DELETE's sweep, done before the writes
			t.Fatal(err)
		}
	})
	if !errors.Is(err, ErrSnapshotGone) {
		t.Errorf("manifest removed during the build: %v, want ErrSnapshotGone", err)
	}
	if keys := left(store); len(keys) > 0 {
		t.Errorf("manifest removed during the build: %d objects left: %v", len(keys), keys)
	}
	if _, err := BuildSegment(ctx, store, job); !errors.Is(err, ErrSnapshotGone) {
		t.Errorf("manifest gone before the build: %v, want ErrSnapshotGone", err)
	}

	// Built, published, then the manifest gone (HEAD from a build that
	// kept none): a redelivery keeps the segment.
	store, commit, mk = parsed(t, dir, "t", "r")
	job = GraphJob{Tenant: "t", Repo: "r", Commit: commit, ManifestKey: mk, ShardBytes: 256}
	key, err := BuildSegment(ctx, store, job)
	if err != nil {
		t.Fatal(err)
	}
	seg, err := store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Publish(ctx, store, "t", "r", commit, key, seg); err != nil {
		t.Fatal(err)
	}
	n := len(left(store))
	if err := store.Delete(ctx, mk); err != nil {
		t.Fatal(err)
	}
	if _, err := BuildSegment(ctx, store, job); err != nil {
		t.Errorf("redelivery of a published job: %v", err)
	}
	if got := len(left(store)); got != n || n < 3 {
		t.Errorf("redelivery of a published job: %d objects, want %d kept (at least a segment and 2 shards)", got, n)
	}
}

// TestStaleGraphJobKeepsOtherBuilds: a graph job delivered again while its
// first worker hung (SIGSTOP, a pause past the ack wait) is built by
// another worker and published; the hung worker, resumed after GC removed
// the snapshot's manifest, finds its snapshot gone. It removes what it
// wrote, and only that: the shards the repository's current build has
// written, which no list names until that build ends, stay.
func TestStaleGraphJobKeepsOtherBuilds(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for i := range 40 {
		p := filepath.Join(dir, "p", "f"+string(rune('a'+i%26))+strings.Repeat("x", i/26)+".go")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("package p\n\n// F does a thing.\nfunc F"+string(rune('A'+i%26))+"() {}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store, commit, mk := parsed(t, dir, "t", "r")
	// The current build's first shard, written before its list.
	current := index.ShardKey("t", "r", "0123456789abcdef0123456789abcdef")
	job := GraphJob{Tenant: "t", Repo: "r", Commit: commit, ManifestKey: mk, ShardBytes: 256}
	_, err := buildSegment(ctx, store, job, 0, func(GraphJob) {
		// While the stale worker was stopped: the snapshot was published
		// and left behind by later ones (GC removed its manifest), and
		// the next build has started.
		if err := store.Delete(ctx, mk); err != nil {
			t.Fatal(err)
		}
		if err := store.Put(ctx, current, []byte("shard of the build in progress")); err != nil {
			t.Fatal(err)
		}
	})
	if !errors.Is(err, ErrSnapshotGone) {
		t.Fatalf("stale job: %v, want ErrSnapshotGone", err)
	}
	if ok, err := store.Exists(ctx, current); err != nil || !ok {
		t.Errorf("the stale job removed the current build's shard %s (exists %v, %v)", current, ok, err)
	}
	left, err := store.List(ctx, index.ShardPrefix("t", "r"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 {
		t.Errorf("after the stale job: shards %v, want only the current build's", left)
	}
	segs, err := store.List(ctx, index.RepoPrefix("segments/", "t", "r"))
	if err != nil || len(segs) != 0 {
		t.Errorf("after the stale job: segments %v (%v), want none", segs, err)
	}
}
