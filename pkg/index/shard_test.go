package index_test

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
	"sync"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/query"
	"codectx/pkg/segment"
	"codectx/pkg/source"
	"codectx/pkg/testrepo"
)

// recorder is a blob driver over a memory store that records the keys put
// and fails the puts fail says to.
type recorder struct {
	*blob.Bucket
	mu   sync.Mutex
	puts []string
	fail func(key string) bool
}

func (r *recorder) Put(ctx context.Context, key string, data []byte) error {
	r.mu.Lock()
	fail := r.fail != nil && r.fail(key)
	if !fail {
		r.puts = append(r.puts, key)
	}
	r.mu.Unlock()
	if fail {
		return errors.New("injected write failure")
	}
	return r.Bucket.Put(ctx, key, data)
}

func (r *recorder) Swap(ctx context.Context, key string, old, new []byte) error {
	r.mu.Lock()
	r.puts = append(r.puts, key)
	r.mu.Unlock()
	return r.Bucket.Swap(ctx, key, old, new)
}

// written returns the keys put since the last call that start with prefix.
func (r *recorder) written(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, k := range r.puts {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	r.puts = nil
	return out
}

// goRepo commits the non-test Go files of a few standard library packages
// (about 1 MB, with calls and types across packages) into a git repository.
func goRepo(t *testing.T) *testrepo.Repo {
	t.Helper()
	files := map[string]string{}
	for _, pkg := range []string{"encoding/json", "encoding/csv", "encoding/hex", "encoding/base64", "encoding/xml", "bufio", "strconv"} {
		dir := filepath.Join(runtime.GOROOT(), "src", filepath.FromSlash(pkg))
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[pkg+"/"+e.Name()] = string(data)
		}
	}
	files["go.mod"] = "module std\n"
	files["README.md"] = "# std\n\nA few packages of the Go standard library, to test sharding.\n"
	files["tools/gen.py"] = "def generate(table):\n    \"\"\"Write the decode table.\"\"\"\n    return [hex(x) for x in table]\n"
	r := testrepo.New(t)
	r.Commit("import", files)
	r.Commit("docs", map[string]string{"README.md": "# std\n\nSharding test repository.\n"})
	return r
}

var shardQueries = []string{
	"how does the JSON decoder handle unknown fields",
	"Decoder.Decode",
	"where are XML namespaces resolved",
	"csv reader quoted field parsing error",
	"strconv.ParseFloat",
	"base64 URL encoding without padding",
	"bufio.Scanner split function",
	"what calls Unmarshal",
	"hex dump",
	"generate decode table",
}

// sameSegment fails unless got equals want in everything a query reads.
func sameSegment(t *testing.T, got, want *segment.Segment) {
	t.Helper()
	if !reflect.DeepEqual(got.Files, want.Files) {
		t.Fatalf("files differ: %d vs %d", len(got.Files), len(want.Files))
	}
	if !reflect.DeepEqual(got.Chunks, want.Chunks) {
		t.Fatalf("chunks differ: %d vs %d", len(got.Chunks), len(want.Chunks))
	}
	if !reflect.DeepEqual(got.History, want.History) {
		t.Fatalf("history differs")
	}
	for _, p := range []struct {
		what string
		a, b interface{ MarshalBinary() ([]byte, error) }
	}{{"bm25", got.BM25, want.BM25}, {"file bm25", got.FileBM25, want.FileBM25}, {"graph", got.Graph, want.Graph}} {
		a, _ := p.a.MarshalBinary()
		b, _ := p.b.MarshalBinary()
		if !bytes.Equal(a, b) {
			t.Fatalf("%s differs (%d vs %d bytes)", p.what, len(a), len(b))
		}
	}
	gm, wm := got.Meta, want.Meta
	gm.Built, wm.Built = "", ""
	if a, b := mustJSON(gm), mustJSON(wm); a != b {
		t.Fatalf("meta %+v, want %+v", gm, wm)
	}
	for _, c := range want.Chunks {
		if !reflect.DeepEqual(got.Lookup(c.Name), want.Lookup(c.Name)) {
			t.Fatalf("symbol %q: %v, want %v", c.Name, got.Lookup(c.Name), want.Lookup(c.Name))
		}
		for _, n := range []int{1, 3, len(c.Name)} {
			p := c.Name[:min(n, len(c.Name))]
			for _, limit := range []int{1, 8, 1000} {
				if g, w := got.LookupPrefix(p, limit), want.LookupPrefix(p, limit); !reflect.DeepEqual(g, w) {
					t.Fatalf("prefix %q (%d): %v, want %v", p, limit, g, w)
				}
			}
		}
	}
}

func mustJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(data)
}

// sameAnswers fails unless both segments answer the queries identically:
// ranked files, fused chunks, the learned ranker's candidates with their
// features, and the packed context.
func sameAnswers(t *testing.T, got, want *segment.Segment) {
	t.Helper()
	sameAnswersTo(t, got, want, shardQueries)
}

// sameAnswersTo is sameAnswers for the queries given.
func sameAnswersTo(t *testing.T, got, want *segment.Segment, queries []string) {
	t.Helper()
	ctx := context.Background()
	for _, q := range queries {
		for _, ranker := range []string{query.RankLearned, query.RankRRF} {
			req := query.Request{Query: q, Route: true}
			req.Budget, req.Ranker, req.Features = 4000, ranker, true
			a, err := (&query.Engine{Seg: got}).Search(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := (&query.Engine{Seg: want}).Search(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a.Fused, b.Fused) || !reflect.DeepEqual(a.Files, b.Files) || !reflect.DeepEqual(a.Candidates, b.Candidates) {
				t.Fatalf("%q (%s): rankings differ:\n%v\n%v", q, ranker, a.Files, b.Files)
			}
			if len(b.Candidates) == 0 && ranker == query.RankLearned {
				t.Fatalf("%q: no ranker candidates to compare", q)
			}
			pa, pb := (&query.Engine{Seg: got}).Pack(a, req), (&query.Engine{Seg: want}).Pack(b, req)
			pa.Timings, pb.Timings = nil, nil
			ja, _ := json.Marshal(pa)
			jb, _ := json.Marshal(pb)
			if !bytes.Equal(ja, jb) {
				t.Fatalf("%q (%s): packs differ", q, ranker)
			}
			if len(pb.Chunks) == 0 {
				t.Fatalf("%q: empty pack", q)
			}
		}
	}
}

// TestShardedEqualsSegment builds one repository as one segment and as
// many small shards and checks that the joined shards are that segment and
// answer every query the same.
func TestShardedEqualsSegment(t *testing.T) {
	ctx := context.Background()
	r := goRepo(t)
	store := blob.NewMem()
	snap, err := source.Open(ctx, r.Dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	one, _, err := index.BuildSegment(ctx, store, snap, "std", index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{40 << 10, 1 << 30} {
		store := blob.NewMem() // a fresh store: shard ranges are kept from HEAD's
		st, err := index.Build(ctx, store, r.Dir, index.Options{Name: "std", ShardBytes: size})
		if err != nil {
			t.Fatal(err)
		}
		if size < 1<<20 && st.Shards < 8 {
			t.Fatalf("%d shards of %d bytes, want 8 or more", st.Shards, size)
		}
		if size >= 1<<20 && st.Shards != 1 {
			t.Fatalf("%d shards, want 1", st.Shards)
		}
		if st.Chunks != len(one.Chunks) || st.Files != len(one.Files) {
			t.Fatalf("summary: %d chunks, %d files; want %d, %d", st.Chunks, st.Files, len(one.Chunks), len(one.Files))
		}
		got, err := index.LoadHead(ctx, store, index.DefaultTenant, "std")
		if err != nil {
			t.Fatal(err)
		}
		sameSegment(t, got, one)
		sameAnswers(t, got, one)
		// A second build of the same commit reuses every shard.
		st, err = index.Build(ctx, store, r.Dir, index.Options{Name: "std", ShardBytes: size})
		if err != nil {
			t.Fatal(err)
		}
		if st.ShardsWritten != 0 || st.Parsed != 0 {
			t.Fatalf("rebuild wrote %d shards and parsed %d files, want 0", st.ShardsWritten, st.Parsed)
		}
		if !got.InPlace() || !got.BM25.Raw() {
			t.Fatalf("shards were decoded, not used in place")
		}
		// Shards of the format before (a store written by an older build)
		// join into the same segment.
		keys, err := store.List(ctx, index.ShardPrefix(index.DefaultTenant, "std"))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			data, _ := store.Get(ctx, k)
			sh, err := segment.LoadShard(data, true)
			if err != nil {
				t.Fatal(err)
			}
			if data, err = sh.MarshalV1(); err != nil {
				t.Fatal(err)
			}
			if err := store.Put(ctx, k, data); err != nil {
				t.Fatal(err)
			}
		}
		old, err := index.LoadHead(ctx, store, index.DefaultTenant, "std")
		if err != nil {
			t.Fatal(err)
		}
		if old.InPlace() {
			t.Fatalf("old shards reported in place")
		}
		sameSegment(t, old, one)
		sameAnswers(t, old, one)
	}
}

// TestDeltaPublish changes one file and checks that the next build writes
// only the shard holding it (and the shard list), that the result equals
// a fresh single segment of the new commit, and that a shard that fails to
// write leaves HEAD on the old snapshot.
func TestDeltaPublish(t *testing.T) {
	ctx := context.Background()
	r := goRepo(t)
	rec := &recorder{Bucket: blob.NewMem()}
	store := blob.NewBucket(rec)
	opt := index.Options{Name: "std", ShardBytes: 40 << 10}
	st, err := index.Build(ctx, store, r.Dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	shards := index.ShardPrefix(index.DefaultTenant, "std")
	if n := len(rec.written(shards)); n != st.Shards || n < 8 {
		t.Fatalf("first build wrote %d shards of %d", n, st.Shards)
	}
	first := st.Commit

	// One file changes: one shard is written, the others are reused.
	path := "encoding/hex/hex.go"
	data, err := os.ReadFile(filepath.Join(r.Dir, filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(data), "package hex", "package hex\n\n// Sharded marks a delta publish.\nfunc Sharded() string { return \"sharded\" }", 1)
	r.Commit("one file", map[string]string{path: changed})
	st, err = index.Build(ctx, store, r.Dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	w := rec.written("")
	var shardPuts, others []string
	for _, k := range w {
		if strings.HasPrefix(k, shards) {
			shardPuts = append(shardPuts, k)
		} else if !strings.HasPrefix(k, "parse/") {
			others = append(others, k)
		}
	}
	if len(shardPuts) != 1 || st.ShardsWritten != 1 || st.Parsed != 1 {
		t.Fatalf("delta wrote shards %v (summary %d), parsed %d; want one shard, one file", shardPuts, st.ShardsWritten, st.Parsed)
	}
	if len(others) != 2 || others[0] != index.SegmentKey(index.DefaultTenant, "std", st.Commit) || others[1] != index.HeadKey(index.DefaultTenant, "std") {
		t.Fatalf("delta wrote %v, want the shard list then HEAD", others)
	}
	got, err := index.LoadHead(ctx, store, index.DefaultTenant, "std")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := source.Open(ctx, r.Dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	want, _, err := index.BuildSegment(ctx, blob.NewMem(), snap, "std", index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sameSegment(t, got, want)
	sameAnswers(t, got, want)
	if len(got.Lookup("Sharded")) != 1 {
		t.Fatal("the changed file's new function is not indexed")
	}
	second := st.Commit
	h, err := index.ReadHead(ctx, store, index.DefaultTenant, "std")
	if err != nil || h.Previous != first {
		t.Fatalf("head %+v (%v): previous should be %s", h, err, first)
	}

	// A shard that fails to write fails the build before HEAD moves.
	r.Commit("another", map[string]string{path: changed + "\n// Another change.\n"})
	rec.fail = func(key string) bool { return strings.HasPrefix(key, shards) }
	if _, err := index.Build(ctx, store, r.Dir, opt); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("build with a failing shard write: %v", err)
	}
	for _, k := range rec.written("") {
		if !strings.HasPrefix(k, "parse/") {
			t.Fatalf("a failed build wrote %s", k)
		}
	}
	h, err = index.ReadHead(ctx, store, index.DefaultTenant, "std")
	if err != nil || h.Commit != second {
		t.Fatalf("HEAD %+v (%v), want it left on %s", h, err, second)
	}
	if seg, err := index.LoadHead(ctx, store, index.DefaultTenant, "std"); err != nil || len(seg.Lookup("Sharded")) != 1 {
		t.Fatalf("the old snapshot does not load: %v", err)
	}
	rec.fail = nil
	if st, err = index.Build(ctx, store, r.Dir, opt); err != nil || st.ShardsWritten != 1 {
		t.Fatalf("build after the store recovers: %v, %d shards written", err, st.ShardsWritten)
	}
}

// TestOldSegmentHeadLoads checks that a HEAD naming a single segment (the
// format before shards) still loads, and that the next sharded build over
// it works.
func TestOldSegmentHeadLoads(t *testing.T) {
	ctx := context.Background()
	r := goRepo(t)
	store := blob.NewMem()
	if _, err := index.Build(ctx, store, r.Dir, index.Options{Name: "std", ShardBytes: -1}); err != nil {
		t.Fatal(err)
	}
	old, err := index.LoadHead(ctx, store, index.DefaultTenant, "std")
	if err != nil {
		t.Fatal(err)
	}
	if keys, _ := store.List(ctx, "shards/"); len(keys) != 0 {
		t.Fatalf("a single-segment build wrote shards %v", keys)
	}
	r.Commit("more", map[string]string{"tools/more.py": "def more():\n    return 1\n"})
	st, err := index.Build(ctx, store, r.Dir, index.Options{Name: "std", ShardBytes: 40 << 10})
	if err != nil {
		t.Fatal(err)
	}
	got, err := index.LoadHead(ctx, store, index.DefaultTenant, "std")
	if err != nil {
		t.Fatal(err)
	}
	if st.Shards < 8 || len(got.Chunks) <= len(old.Chunks) || len(got.Lookup("more")) == 0 {
		t.Fatalf("%d shards, %d chunks (old %d)", st.Shards, len(got.Chunks), len(old.Chunks))
	}
}

// TestCorruptShard checks that a shard whose bytes changed fails the load
// (checksum) instead of joining into a wrong segment, and that the next
// build writes it again.
func TestCorruptShard(t *testing.T) {
	ctx := context.Background()
	r := goRepo(t)
	store := blob.NewMem()
	opt := index.Options{Name: "std", ShardBytes: 40 << 10}
	if _, err := index.Build(ctx, store, r.Dir, opt); err != nil {
		t.Fatal(err)
	}
	keys, err := store.List(ctx, index.ShardPrefix(index.DefaultTenant, "std"))
	if err != nil || len(keys) < 2 {
		t.Fatal(keys, err)
	}
	data, _ := store.Get(ctx, keys[1])
	data[len(data)/2] ^= 0xff
	if err := store.Put(ctx, keys[1], data); err != nil {
		t.Fatal(err)
	}
	if _, err := index.LoadHead(ctx, store, index.DefaultTenant, "std"); !errors.Is(err, segment.ErrCorrupt) {
		t.Fatalf("load with a corrupt shard: %v, want ErrCorrupt", err)
	}
	st, err := index.Build(ctx, store, r.Dir, opt)
	if err != nil || st.ShardsWritten != 1 {
		t.Fatalf("rebuild: %v, %d shards written, want the corrupt one", err, st.ShardsWritten)
	}
	if _, err := index.LoadHead(ctx, store, index.DefaultTenant, "std"); err != nil {
		t.Fatal(err)
	}
}
