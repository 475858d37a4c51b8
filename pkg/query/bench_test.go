package query_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/query"
	"codectx/pkg/segment"
	"codectx/pkg/source"
)

var benchQueries = []string{
	"escape analysis of closures",
	"inline small functions cost budget",
	"(*Func).newValue",
	"how are phi nodes placed during ssa construction",
	"dead code elimination pass",
	"what depends on types2.Checker",
	"register allocation spill",
	"bounds check elimination",
	"typecheck generic instantiation",
	"write export data",
	"loop rotation",
	"devirtualize interface calls",
	"nil check elimination",
	"stack frame layout",
	"fix miscompilation in rewrite rules",
	"what changed recently in the inliner",
	"constant folding of shifts",
	"ir.Name escapes",
	"debug line numbers for statements",
	"walk range loops",
}

var (
	benchOnce sync.Once
	benchSeg  *segment.Segment
	benchErr  error
)

// benchSegment indexes $GOROOT/src/cmd/compile (about 10k chunks: 9k
// symbols and 1.2k line windows) once.
func benchSegment(b *testing.B) *segment.Segment {
	benchOnce.Do(func() {
		dir := filepath.Join(runtime.GOROOT(), "src", "cmd", "compile")
		snap, err := source.Open(context.Background(), dir, source.Options{})
		if err != nil {
			benchErr = err
			return
		}
		defer snap.Close()
		benchSeg, _, benchErr = index.BuildSegment(context.Background(), blob.NewMem(), snap, "go/compile", index.Options{})
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchSeg
}

func benchQuery(b *testing.B, arms []string, route bool, budget int, ranker string) {
	seg := benchSegment(b)
	eng := &query.Engine{Seg: seg}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := benchQueries[i%len(benchQueries)]
		start := time.Now()
		if _, err := eng.Query(context.Background(), query.Request{Query: q, Budget: budget, Arms: arms, Route: route, Ranker: ranker}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
	b.ReportMetric(float64(len(seg.Chunks)), "chunks")
}

// BenchmarkQueryFull is the whole pipeline: classify, every arm, fuse,
// rerank with the learned model, pack 8k.
func BenchmarkQueryFull(b *testing.B) { benchQuery(b, nil, true, 8000, "") }

// BenchmarkQueryFullRRF is the whole pipeline with the RRF file order (no
// learned reranking): the learned ranker's cost is the difference.
func BenchmarkQueryFullRRF(b *testing.B) { benchQuery(b, nil, true, 8000, query.RankRRF) }

// BenchmarkQueryBM25 is the chunk BM25 arm alone, packed into 8k.
func BenchmarkQueryBM25(b *testing.B) { benchQuery(b, []string{query.ArmBM25}, false, 8000, "") }

// BenchmarkSearchFull is retrieval and fusion without packing.
func BenchmarkSearchFull(b *testing.B) { benchSearch(b, "") }

// BenchmarkSearchFullRRF is BenchmarkSearchFull without learned reranking.
func BenchmarkSearchFullRRF(b *testing.B) { benchSearch(b, query.RankRRF) }

func benchSearch(b *testing.B, ranker string) {
	seg := benchSegment(b)
	eng := &query.Engine{Seg: seg}
	rankUS := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rk, err := eng.Search(context.Background(), query.Request{Query: benchQueries[i%len(benchQueries)], Route: true, Ranker: ranker})
		if err != nil {
			b.Fatal(err)
		}
		rankUS += rk.Timings["rank"]
	}
	// The learned ranker's own time (features and scoring), per query.
	b.ReportMetric(float64(rankUS)/float64(b.N), "rank-us")
}

// BenchmarkPack is the packer alone (PackAll of rankings searched before
// the timer starts), the 20 queries in rotation at budget 8000: after the
// first round every text's pieces are in the count caches, as on a server
// that has answered them before.
func BenchmarkPack(b *testing.B) {
	seg := benchSegment(b)
	eng := &query.Engine{Seg: seg}
	var parts [][]query.Part
	for _, q := range benchQueries {
		rk, err := eng.Search(context.Background(), query.Request{Query: q, Route: true})
		if err != nil {
			b.Fatal(err)
		}
		parts = append(parts, []query.Part{{Seg: seg, Ranking: rk}})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		query.PackAll(parts[i%len(parts)], query.Request{Query: benchQueries[i%len(parts)], Budget: 8000}, nil)
	}
}

// BenchmarkHistoryQuestion is a history question ("what changed recently
// in the inliner") on the benchmark segment with a history of 500
// commits (1-8 of its files each, made up: $GOROOT is no repository) and
// without one: the difference is the history arm and the commits the
// answer lists, packed at the head of the context.
func BenchmarkHistoryQuestion(b *testing.B) {
	seg := benchSegment(b)
	hist := make([]segment.Commit, 500)
	words := []string{"inline", "escape", "ssa", "fix", "rewrite", "loop", "types2", "export", "debug", "walk", "cost", "budget"}
	for i := range hist {
		c := segment.Commit{Hash: fmt.Sprintf("%040x", i+1), Author: "Dev <dev@example.com>",
			When: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Duration(i) * time.Hour).Format(time.RFC3339)}
		c.Message = fmt.Sprintf("cmd/compile: %s %s in %s", words[i%len(words)], words[(i*7)%len(words)], words[(i*5)%len(words)])
		for j := range 1 + i%8 {
			c.Files = append(c.Files, seg.Files[(i*131+j*17)%len(seg.Files)].Path)
		}
		hist[i] = c
	}
	eng := &query.Engine{Seg: seg}
	for _, tc := range []struct {
		name string
		hist []segment.Commit
	}{{"none", nil}, {"history", hist}} {
		b.Run(tc.name, func(b *testing.B) {
			seg.History = tc.hist
			b.Cleanup(func() { seg.History = nil })
			listed := 0
			for b.Loop() {
				resp, err := eng.Query(context.Background(), query.Request{Query: "what changed recently in the inliner", Budget: 8000, Route: true})
				if err != nil {
					b.Fatal(err)
				}
				listed = len(resp.Commits)
			}
			b.ReportMetric(float64(listed), "commits")
		})
	}
}

// BenchmarkPackAllMerge is PackAll over three repositories (the benchmark
// segment, $GOROOT/src/net/http and $GOROOT/src/go), the 20 queries in
// rotation at budget 8000, with the fused scores alone (merge=score) and
// with the repositories' gates (gated, the default) side by side: the
// difference is repoGates.
func BenchmarkPackAllMerge(b *testing.B) {
	segs := []*segment.Segment{benchSegment(b)}
	for _, d := range []string{"net/http", "go"} {
		snap, err := source.Open(context.Background(), filepath.Join(runtime.GOROOT(), "src", d), source.Options{})
		if err != nil {
			b.Fatal(err)
		}
		seg, _, err := index.BuildSegment(context.Background(), blob.NewMem(), snap, "go/"+d, index.Options{})
		snap.Close()
		if err != nil {
			b.Fatal(err)
		}
		segs = append(segs, seg)
	}
	var parts [][]query.Part
	for _, q := range benchQueries {
		var ps []query.Part
		for _, seg := range segs {
			rk, err := (&query.Engine{Seg: seg}).Search(context.Background(), query.Request{Query: q, Route: true})
			if err != nil {
				b.Fatal(err)
			}
			ps = append(ps, query.Part{Seg: seg, Ranking: rk})
		}
		parts = append(parts, ps)
	}
	for _, m := range []struct{ name, merge string }{{"score", query.MergeScore}, {"gated", ""}} {
		b.Run("merge="+m.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				query.PackAll(parts[i%len(parts)], query.Request{Query: benchQueries[i%len(parts)], Budget: 8000, Merge: m.merge}, nil)
			}
		})
	}
}
