package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/blob/local"
	"codectx/pkg/index"
	"codectx/pkg/segment"
)

// indexRepo indexes a directory of n Go files into store as repo name.
func indexRepo(t *testing.T, store *blob.Bucket, name string, n int) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		body := fmt.Sprintf("package %s\n\n// Handle%d serves request %d of %s.\nfunc Handle%d(n int) int {\n\treturn n + %d\n}\n", name, i, i, name, i, i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.go", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := index.Build(context.Background(), store, dir, index.Options{Name: name, Workers: 1}); err != nil {
		t.Fatal(err)
	}
}

// TestCacheBoundedByBytes serves three repositories through a server whose
// cache holds two of them: the least recently used one is dropped, the
// loaded bytes stay within the budget, and a segment over the whole budget
// is still served.
func TestCacheBoundedByBytes(t *testing.T) {
	store := blob.NewMem()
	for _, r := range []string{"alpha", "beta", "gamma"} {
		indexRepo(t, store, r, 30)
	}
	ctx := context.Background()
	// What a segment is charged once queried (its heap grows by the
	// tables the search derives), measured through a scratch server.
	scratch := &Server{Store: store, Routes: QueryRoutes, CacheSize: 1 << 40}
	_, sc := newServer(t, scratch)
	size := func(repo string) int64 {
		if _, err := sc.Query(ctx, QueryRequest{Repo: repo, Query: "Handle7 serves request", Budget: 500}); err != nil {
			t.Fatal(err)
		}
		h, err := index.ReadHead(ctx, store, index.DefaultTenant, repo)
		if err != nil {
			t.Fatal(err)
		}
		scratch.segs.mu.Lock()
		defer scratch.segs.mu.Unlock()
		return scratch.segs.m[h.Segment].Value.(*segEntry).size
	}
	budget := size("alpha") + size("beta") + size("gamma")/2
	s := &Server{Store: store, Routes: QueryRoutes, CacheSize: budget}
	_, c := newServer(t, s)
	ask := func(repo string) {
		t.Helper()
		resp, err := c.Query(ctx, QueryRequest{Repo: repo, Query: "Handle7 serves request", Budget: 500})
		if err != nil || len(resp.Chunks) == 0 {
			t.Fatalf("query %s: %v, %+v", repo, err, resp)
		}
		if n, b, _ := s.segs.stats(); b > budget && n > 1 {
			t.Fatalf("after %s: %d segments hold %d bytes, over the budget %d", repo, n, b, budget)
		}
	}
	ask("alpha")
	ask("beta")
	ask("alpha") // beta is now the least recently used
	ask("gamma")
	if n, _, _ := s.segs.stats(); n != 2 {
		t.Errorf("cached segments = %d, want 2", n)
	}
	hits := func() int { _, _, h := s.segs.stats(); return h }
	h0 := hits()
	ask("alpha")
	if hits() != h0+1 {
		t.Errorf("alpha was evicted, want beta evicted (the least recently used)")
	}
	ask("beta") // a miss: loaded again
	if hits() != h0+1 {
		t.Errorf("beta was still cached")
	}

	// /metrics reports the cache as stats() has it.
	ts, _ := newServer(t, s)
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	n, b, h := s.segs.stats()
	for _, want := range []string{
		fmt.Sprintf("codectx_segment_cache_segments %d\n", n),
		fmt.Sprintf("codectx_segment_cache_budget_bytes %g\n", float64(budget)),
		fmt.Sprintf("codectx_segment_cache_bytes %g\n", float64(b)),
		fmt.Sprintf("codectx_segment_cache_hits_total %d\n", h),
		"codectx_segment_cache_misses_total 4\n", // alpha, beta, gamma, beta again
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics: no %q", want)
		}
	}

	// A budget below any one segment still serves, one segment at a time.
	tiny := &Server{Store: store, Routes: QueryRoutes, CacheSize: 1}
	_, tc := newServer(t, tiny)
	for _, r := range []string{"alpha", "beta", "alpha"} {
		if _, err := tc.Query(ctx, QueryRequest{Repo: r, Query: "Handle1"}); err != nil {
			t.Fatalf("query %s with a 1-byte budget: %v", r, err)
		}
		if n, _, _ := tiny.segs.stats(); n != 1 {
			t.Errorf("1-byte budget: %d segments cached, want 1", n)
		}
	}
}

// TestCacheEvictsMapped serves repositories of a local store, whose shards
// are mapped, through a cache that holds one at a time: each eviction
// releases the mapped shards (pages dropped), and a query of the evicted
// segment still in hand, or of a reload, answers exactly as before.
func TestCacheEvictsMapped(t *testing.T) {
	store, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"alpha", "beta"} {
		indexRepo(t, store, r, 30)
	}
	ctx := context.Background()
	s := &Server{Store: store, Routes: QueryRoutes, CacheSize: 1}
	_, c := newServer(t, s)
	answer := func(repo string) string {
		t.Helper()
		resp, err := c.Query(ctx, QueryRequest{Repo: repo, Query: "Handle7 serves request", Budget: 500})
		if err != nil || len(resp.Chunks) == 0 {
			t.Fatalf("query %s: %v, %+v", repo, err, resp)
		}
		return fmt.Sprintf("%+v", resp.Chunks)
	}
	want := answer("alpha")
	h, err := index.ReadHead(ctx, store, index.DefaultTenant, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.segs.get(ctx, h.Segment)
	if err != nil {
		t.Fatal(err)
	}
	for i := range held.Chunks { // what a search reads
		_ = strings.Count(held.Chunks[i].Body, "x")
	}
	s.segs.used([]*segment.Segment{held})
	st := s.segs.cacheStats()
	if st.MappedBytes == 0 || st.HeapBytes == 0 || st.Bytes != st.HeapBytes+st.MappedBytes {
		t.Fatalf("cache stats %+v: want mapped and heap bytes", st)
	}
	for range 3 {
		answer("beta") // evicts alpha: its shard's pages are dropped
		if got := answer("alpha"); got != want {
			t.Fatalf("after eviction: %s, want %s", got, want)
		}
	}
	answer("beta")
	// The evicted segment, still held, reads back from its file.
	if n := len(held.Chunks); n == 0 || held.Chunks[n-1].Body == "" {
		t.Fatalf("released segment unreadable")
	}
}

// TestCacheTellsMapped checks that a server's OnMapped hears the resident
// mapped bytes the cache charges as segments are queried and evicted.
func TestCacheTellsMapped(t *testing.T) {
	store, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"net/http", "text/template"} { // net/http: several MiB mapped
		if _, err := index.Build(context.Background(), store, filepath.Join(runtime.GOROOT(), "src", p), index.Options{Name: filepath.Base(p)}); err != nil {
			t.Fatal(err)
		}
	}
	var told []int64
	s := &Server{Store: store, Routes: QueryRoutes, CacheSize: 1, OnMapped: func(n int64) { told = append(told, n) }}
	_, c := newServer(t, s)
	ctx := context.Background()
	for _, r := range []string{"http", "template", "http"} {
		if _, err := c.Query(ctx, QueryRequest{Repo: r, Query: "parse the request header", Budget: 2000}); err != nil {
			t.Fatal(err)
		}
		s.segs.mu.Lock()
		if len(told) == 0 || told[len(told)-1] != s.segs.told || abs(s.segs.told-(s.segs.bytes-s.segs.heap)) >= 1<<20 {
			t.Errorf("after %s: told %v, the cache holds %d mapped bytes", r, told, s.segs.bytes-s.segs.heap)
		}
		s.segs.mu.Unlock()
	}
}

func abs(n int64) int64 { return max(n, -n) }

// TestCacheLendsPrevious checks that a repository's new HEAD is joined
// with the shards it shares taken from the repository's segment loaded
// before (one file changed: all shards but one), that another repository's
// segment lends nothing, and that once the previous segment is evicted the
// next one is read whole.
func TestCacheLendsPrevious(t *testing.T) {
	ctx := context.Background()
	store := blob.NewMem()
	dir := t.TempDir()
	write := func(i int, extra string) {
		body := fmt.Sprintf("package p\n\n// Handle%d serves request %d.\nfunc Handle%d(n int) int {\n\treturn n + %d\n}\n%s", i, i, i, i, extra)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.go", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		write(i, "")
	}
	build := func() string {
		if _, err := index.Build(ctx, store, dir, index.Options{Name: "p", Workers: 1, ShardBytes: 1 << 10}); err != nil {
			t.Fatal(err)
		}
		h, err := index.ReadHead(ctx, store, index.DefaultTenant, "p")
		if err != nil {
			t.Fatal(err)
		}
		return h.Segment
	}
	indexRepo(t, store, "other", 5)
	c := newSegCache(store, 1<<40, nil)
	h, err := index.ReadHead(ctx, store, index.DefaultTenant, "other")
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.get(ctx, h.Segment)
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.get(ctx, build())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(first.BM25.Parts()); n < 4 {
		t.Fatalf("%d shards, want 4 or more", n)
	}
	if n := sharedParts(first, other); n != 0 {
		t.Fatalf("another repository lent %d shards", n)
	}
	write(7, "\nfunc Changed() {}\n")
	second, err := c.get(ctx, build())
	if err != nil {
		t.Fatal(err)
	}
	if n, all := sharedParts(second, first), len(second.BM25.Parts()); n != all-1 {
		t.Fatalf("%d of %d shards taken from the previous snapshot, want %d", n, all, all-1)
	}
	if len(second.Lookup("Changed")) != 1 {
		t.Fatal("the changed file's function is not found")
	}
	// Evicted, the repository's last segment lends nothing.
	c.mu.Lock()
	c.max = 1
	c.evict(nil)
	c.max = 1 << 40
	c.mu.Unlock()
	write(8, "\nfunc Changed2() {}\n")
	third, err := c.get(ctx, build())
	if err != nil {
		t.Fatal(err)
	}
	if n := sharedParts(third, second); n != 0 {
		t.Fatalf("an evicted segment lent %d shards", n)
	}
}

// sharedParts is the number of BM25 parts (shards) of seg that prev holds.
func sharedParts(seg, prev *segment.Segment) int {
	old := map[any]bool{}
	for _, p := range prev.BM25.Parts() {
		old[p] = true
	}
	n := 0
	for _, p := range seg.BM25.Parts() {
		if old[p] {
			n++
		}
	}
	return n
}

// TestCacheFairAcrossTenants: a cache that holds about three segments,
// acme's one repository and beta's five. Beta querying its five in turn
// evicts its own segments, not acme's: acme's next query is a hit. With
// plain LRU acme's segment went first.
func TestCacheFairAcrossTenants(t *testing.T) {
	store := blob.NewMem()
	build := func(tenant, name string) {
		dir := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			body := fmt.Sprintf("package %s\n\n// Handle%d serves request %d of %s.\nfunc Handle%d(n int) int {\n\treturn n + %d\n}\n", name, i, i, name, i, i)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.go", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := index.Build(context.Background(), store, dir, index.Options{Name: name, Tenant: tenant, Workers: 1}); err != nil {
			t.Fatal(err)
		}
	}
	build("acme", "shop")
	beta := []string{"b0", "b1", "b2", "b3", "b4"}
	for _, r := range beta {
		build("beta", r)
	}
	ctx := context.Background()
	s := &Server{Store: store, Routes: QueryRoutes, CacheSize: 1 << 40}
	_, c := newServer(t, s)
	ask := func(tenant, repo string) {
		t.Helper()
		if _, err := c.Query(ctx, QueryRequest{Tenant: tenant, Repo: repo, Query: "Handle7 serves request", Budget: 500}); err != nil {
			t.Fatalf("query %s/%s: %v", tenant, repo, err)
		}
	}
	ask("acme", "shop")
	_, one, _ := s.segs.stats()
	// Room for about three segments of this size.
	s.segs.mu.Lock()
	s.segs.max = 3*one + one/2
	s.segs.mu.Unlock()
	hits := func() int { _, _, h := s.segs.stats(); return h }
	for range 3 {
		for _, r := range beta {
			ask("beta", r)
		}
	}
	h0 := hits()
	ask("acme", "shop")
	if hits() != h0+1 {
		t.Errorf("beta's five repositories evicted acme's one: acme's query was a miss")
	}
	if n, b, _ := s.segs.stats(); b > s.segs.max && n > 1 {
		t.Errorf("%d segments hold %d bytes, over the budget %d", n, b, s.segs.max)
	}
}
