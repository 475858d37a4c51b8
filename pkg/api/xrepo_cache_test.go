package api

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/codectx"
	"codectx/pkg/index"
	"codectx/pkg/segment"
)

// codeSeg is a segment of acme's repo with one Go file and a package.json
// of each of sizes, whose texts it stores.
func codeSeg(t *testing.T, store *blob.Bucket, repo string, sizes ...int64) *segment.Segment {
	t.Helper()
	seg := &segment.Segment{
		Meta:   segment.Meta{Tenant: "acme", Repo: repo, Commit: "c1", Built: "b1"},
		Chunks: []codectx.Chunk{{Kind: codectx.KindModule, Name: repo + "/lib", Imports: []string{"fmt"}}},
	}
	for i, n := range sizes {
		h := fmt.Sprintf("b%09x", n)
		if ok, _ := store.Exists(context.Background(), index.ContentKey(h)); !ok {
			if err := store.Put(context.Background(), index.ContentKey(h), make([]byte, n)); err != nil {
				t.Fatal(err)
			}
		}
		seg.Files = append(seg.Files, segment.File{Path: fmt.Sprintf("m%d/package.json", i), Language: codectx.Text, Blob: h, Size: n})
	}
	seg.Files = append(seg.Files, segment.File{Path: "lib/lib.go", Language: codectx.Go, Chunks: []int{0}})
	return seg
}

// The cross-repository cache of a tenant stays bounded when its queries'
// manifests are past the graph's budget. Such a build keeps no graph but
// keeps the inputs it read whole; the cache started over only at 8 graphs
// kept, so queries over ever new repositories grew it without end. And
// the code files of a repository whose manifests were past the budget
// are still in its input.
func TestCrossGraphCacheBounded(t *testing.T) {
	s := &Server{Store: blob.NewMem()}
	const mib = 1 << 20
	// 15 x 4 MiB and 3.75 MiB: the budget less a quarter MiB, kept.
	var kept []*segment.Segment
	for i := range 15 {
		kept = append(kept, codeSeg(t, s.Store, fmt.Sprintf("big%02d", i), mib, mib, mib, mib))
	}
	kept = append(kept, codeSeg(t, s.Store, "big15", mib, mib, mib, 3*mib/4))
	most := 0
	for q := range 60 {
		segs := append([]*segment.Segment{}, kept...)
		segs = append(segs, codeSeg(t, s.Store, fmt.Sprintf("over%03d", q), mib/2)) // past the budget
		for i := range 5 {
			segs = append(segs, codeSeg(t, s.Store, fmt.Sprintf("code%03d-%d", q, i))) // read whole
		}
		if g := s.crossGraph(context.Background(), "acme", segs); g == nil {
			t.Fatal("no graph")
		}
		tn := s.xrepo.tenant("acme")
		tn.mu.Lock()
		most = max(most, len(tn.repos))
		if tn.bytes > maxGraphManifestBytes+mib {
			t.Errorf("query %d: the cache keeps %d bytes of inputs", q, tn.bytes)
		}
		tn.mu.Unlock()
	}
	// A query reads its repositories at once, so which of them the budget
	// leaves out depends on the order they come in: a query's repository
	// past the budget may be read whole and a kept one not. A start-over
	// keeps what its build used (the 16, and at most 6 of the query's
	// own), and the next maxXGraphs-1 builds add at most 6 each.
	if limit := 16 + 6 + (maxXGraphs-1)*6; most > limit {
		t.Errorf("the tenant's cache kept up to %d inputs over 60 queries past the budget, want at most %d", most, limit)
	}

	r, whole := s.xrepoRepo(context.Background(), codeSeg(t, s.Store, "late", mib), &manifestBudget{left: 10})
	if whole || len(r.Files) != 1 || !strings.HasSuffix(r.Files[0].Module, "/lib") {
		t.Errorf("a repository past the budget: whole %v, files %+v; want not whole, its one code file kept", whole, r.Files)
	}
}

// The caches of all tenants together stay within maxXBytes: six tenants
// that each fill theirs (60 MiB of manifests) held 360 MiB before. The
// largest other tenant's cache goes first, so a small tenant's stays.
func TestCrossGraphCacheBoundedAcrossTenants(t *testing.T) {
	s := &Server{Store: blob.NewMem()}
	const mib = 1 << 20
	segsOf := func(tenant string, n int, sizes ...int64) []*segment.Segment {
		var segs []*segment.Segment
		for i := range n {
			seg := codeSeg(t, s.Store, fmt.Sprintf("r%02d", i), sizes...)
			seg.Meta.Tenant = tenant
			segs = append(segs, seg)
		}
		return segs
	}
	small := segsOf("small", 2, 1024)
	if s.crossGraph(context.Background(), "small", small) == nil {
		t.Fatal("no graph")
	}
	kept := func() (total int64) {
		s.xrepo.mu.Lock()
		defer s.xrepo.mu.Unlock()
		for _, tn := range s.xrepo.tenants {
			tn.mu.Lock()
			total += tn.bytes
			tn.mu.Unlock()
		}
		return total
	}
	for i := range 6 {
		name := fmt.Sprintf("big%d", i)
		if s.crossGraph(context.Background(), name, segsOf(name, 15, mib, mib, mib, mib)) == nil {
			t.Fatal("no graph")
		}
		if n := kept(); n > maxXBytes {
			t.Errorf("after %d tenants at their bound, the caches keep %d MiB; want at most %d", i+1, n>>20, maxXBytes>>20)
		}
	}
	s.xrepo.mu.Lock()
	tn := s.xrepo.tenants["small"]
	s.xrepo.mu.Unlock()
	if tn == nil || len(tn.graphs) != 1 {
		t.Errorf("the small tenant's cache was dropped for the big ones'")
	}
}
