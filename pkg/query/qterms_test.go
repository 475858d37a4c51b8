package query

import (
	"context"
	"math"
	"slices"
	"testing"
)

// TestTermDump checks the query-term dump of a feature dump: the terms'
// shape features, and that each candidate's term scores add up to its
// whole-file BM25 score (file_bm25_rel) and its best chunk's BM25 score
// (bm25_rel), so term weights can be learned offline.
func TestTermDump(t *testing.T) {
	seg := serverSeg(t)
	q := "Fix `acceptLoop` of the server\n\nThe socket was never closed"
	feat, rk := candidateFeatures(t, seg, q)
	d := rk.Terms
	if d == nil || len(d.Terms) == 0 {
		t.Fatal("no term dump")
	}
	if !slices.Equal(d.Names, TermFeatureNames) || len(d.X) != len(d.Terms) || len(d.Hits) != len(d.Terms) ||
		len(d.FileQ) != len(d.Terms) || len(d.ChunkW) != len(d.Terms) || len(d.ChunkHits) != len(d.Terms) {
		t.Fatalf("ragged dump: %d terms, %d x, %d hits", len(d.Terms), len(d.X), len(d.Hits))
	}
	x := func(term, name string) float64 {
		t.Helper()
		i := slices.Index(d.Terms, term)
		if i < 0 {
			t.Fatalf("no term %q in %v", term, d.Terms)
		}
		return d.X[i][slices.Index(TermFeatureNames, name)]
	}
	for _, tt := range []struct {
		term, name string
		want       float64
	}{
		{"acceptloop", "camel", 1},
		{"acceptloop", "backticked", 1},
		{"acceptloop", "ident_whole", 1},
		{"acceptloop", "symbol", 1},
		{"accept", "ident_part", 1},
		{"server", "in_title", 1},
		{"server", "title_only", 1},
		{"server", "path_log", math.Log1p(2)},
		{"socket", "in_title", 0},
		{"socket", "camel", 0},
		{"fix", "change_verb", 1},
		{"fix", "name_term", 0},
		{"server", "name_term", 1},
	} {
		if v := x(tt.term, tt.name); v != tt.want {
			t.Errorf("%s %s = %v, want %v", tt.term, tt.name, v, tt.want)
		}
	}
	// A candidate's whole-file score is the sum of its terms' scores; its
	// best chunk's score the best over its chunks of the chunk terms' sums.
	n := len(rk.Candidates)
	file := make([]float64, n)
	chunk := map[int]float64{}
	chunkFile := map[int]int{}
	for j := range d.Terms {
		if d.FileQ[j] {
			for _, h := range d.Hits[j] {
				file[int(h[0])] += h[1]
			}
		}
		for _, h := range d.ChunkHits[j] {
			chunk[int(h[1])] += h[2] * d.ChunkW[j]
			chunkFile[int(h[1])] = int(h[0])
		}
	}
	best := make([]float64, n)
	for id, v := range chunk {
		best[chunkFile[id]] = math.Max(best[chunkFile[id]], v)
	}
	fileTop, chunkTop := slices.Max(file), slices.Max(best)
	for i, c := range rk.Candidates {
		if want := feat(c.Path, "file_bm25_rel"); math.Abs(file[i]/fileTop-want) > 1e-5 {
			t.Errorf("%s: summed whole-file score %.4f of the top, file_bm25_rel %.4f", c.Path, file[i]/fileTop, want)
		}
		if want := feat(c.Path, "bm25_rel"); want > 0 && math.Abs(best[i]/chunkTop-want) > 1e-5 {
			t.Errorf("%s: summed best-chunk score %.4f of the top, bm25_rel %.4f", c.Path, best[i]/chunkTop, want)
		}
	}
}

// BenchmarkTermDump times the query-term dump of the top 20 files, per
// query, on $GOROOT/src/cmd/compile (the query benchmarks' segment and
// queries): the upper bound of what re-weighting the query's terms would
// add to a query (the dump scans each term's posting lists once in the
// whole-file and once in the chunk index; a shipped re-weighting would
// score 20 files with one weighted search of each).
func BenchmarkTermDump(b *testing.B) {
	e, queries := compileEngine(b)
	cands := make([][]Candidate, len(queries))
	for i, q := range queries {
		rk, err := e.Search(context.Background(), Request{Query: q, Route: true, Ranker: RankRRF})
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range rk.Files[:min(20, len(rk.Files))] {
			cands[i] = append(cands[i], Candidate{Path: f.Path})
		}
	}
	e.termDump(queries[0], cands[0]) // the path-token memo
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.termDump(queries[i%len(queries)], cands[i%len(queries)])
	}
}
