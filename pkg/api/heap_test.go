package api

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"codectx/pkg/blob/local"
	"codectx/pkg/index"
)

// heapRepos are packages of the Go tree indexed as repositories by
// TestCacheChargesLiveHeap, of several sizes (about 4 MB of source).
var heapRepos = []string{"encoding/json", "go/parser", "text/template", "regexp", "strconv", "flag", "bufio", "compress/flate", "archive/tar", "database/sql", "net/url", "go/printer"}

// liveHeap is the heap allocated after a collection, the least of three
// readings (anything else allocating meanwhile only adds).
func liveHeap() int64 {
	n := int64(-1)
	for range 3 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if n < 0 || int64(ms.HeapAlloc) < n {
			n = int64(ms.HeapAlloc)
		}
	}
	return n
}

// TestCacheChargesLiveHeap loads real repositories' mapped segments through
// the server's cache, asks each a few questions (which builds the tables
// searchers keep per segment and reads their pages), and compares the heap
// the cache charges with the heap the loaded segments hold after a
// collection, and the mapped bytes it charges with those resident.
func TestCacheChargesLiveHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("indexes 12 packages of the Go tree")
	}
	ctx := context.Background()
	store, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(heapRepos))
	for i, p := range heapRepos {
		names[i] = filepath.Base(p)
		if _, err := index.Build(ctx, store, filepath.Join(runtime.GOROOT(), "src", p), index.Options{Name: names[i], ShardBytes: 256 << 10}); err != nil {
			t.Fatal(err)
		}
	}
	questions := []string{"parse the input and report errors", "buffer size limit", "(*Reader).Read", "how are escapes handled"}
	ask := func(s *Server) {
		t.Helper()
		for _, q := range questions {
			for _, r := range names {
				if _, err := s.search(ctx, Search{Tenant: index.DefaultTenant, Repos: []string{r}, Query: q, Budget: 4000}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// A first server fills what the process keeps across segments (the
	// token counts of the texts packed, bounded on their own), so that the
	// second one's growth is its segments'.
	warm := &Server{Store: store, CacheSize: 1 << 40}
	warm.init()
	ask(warm)
	warm = nil

	s := &Server{Store: store, CacheSize: 1 << 40}
	s.init()
	s.segs.residentEvery = 0 // every request measures the pages it read
	before := liveHeap()
	for _, r := range names {
		if _, err := s.load(ctx, index.DefaultTenant, r); err != nil {
			t.Fatal(err)
		}
	}
	loaded, st := liveHeap()-before, s.segs.cacheStats()
	t.Logf("loaded: the cache charges %d heap bytes, the heap holds %d; %d bytes resident of %d mapped", st.HeapBytes, loaded, st.MappedBytes, mappedOf(s))
	if st.MappedBytes > mappedOf(s)/4 {
		t.Errorf("after loading, %d of %d mapped bytes resident: the pages the checks read were not dropped", st.MappedBytes, mappedOf(s))
	}
	ask(s)
	held := liveHeap() - before
	st = s.segs.cacheStats()
	resident := residentOf(s)
	runtime.KeepAlive(s)
	ratio := float64(st.HeapBytes) / float64(held)
	t.Logf("queried: %d segments, the cache charges %d heap bytes, the heap holds %d (%.2fx); %d resident bytes charged, %d resident, of %d mapped", st.Segments, st.HeapBytes, held, ratio, st.MappedBytes, resident, mappedOf(s))
	if ratio < 0.9 || ratio > 1.2 {
		t.Errorf("the cache charges %.2fx the heap its segments hold, want 0.9-1.2", ratio)
	}
	// Since the last request measured them, pages can only have left
	// (the kernel reclaims clean file pages under memory pressure).
	if st.MappedBytes <= 0 || st.MappedBytes > mappedOf(s) || resident > st.MappedBytes {
		t.Errorf("the cache charges %d resident bytes, %d are resident, of %d mapped", st.MappedBytes, resident, mappedOf(s))
	}
}

func mappedOf(s *Server) int64 {
	s.segs.mu.Lock()
	defer s.segs.mu.Unlock()
	var n int64
	for seg := range s.segs.bySeg {
		n += seg.MappedSize()
	}
	return n
}

func residentOf(s *Server) int64 {
	s.segs.mu.Lock()
	defer s.segs.mu.Unlock()
	var n int64
	for seg := range s.segs.bySeg {
		n += seg.ResidentSize()
	}
	return n
}
