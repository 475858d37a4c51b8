package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"codectx/pkg/codectx"
)

// jsGraph builds a JavaScript repository whose files f0.js..f{n-1}.js
// import each other as listed: edges[i] are the files fi imports.
func jsGraph(n int, edges map[int][]int) Input {
	var in Input
	for i := 0; i < n; i++ {
		f := FileInput{Path: fmt.Sprintf("f%d.js", i), Language: codectx.JavaScript}
		for _, j := range edges[i] {
			f.Imports = append(f.Imports, fmt.Sprintf("./f%d", j))
		}
		in.Files = append(in.Files, f)
	}
	return in
}

// chain is f0 -> f1 -> ... -> f{n-1}.
func chain(n int) Input {
	e := map[int][]int{}
	for i := 0; i+1 < n; i++ {
		e[i] = []int{i + 1}
	}
	return jsGraph(n, e)
}

func complete(n int) Input {
	e := map[int][]int{}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			e[i] = append(e[i], j)
		}
	}
	return jsGraph(n, e)
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func equalScores[K comparable](got, want map[K]float64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || !near(g, w) {
			return false
		}
	}
	return true
}

func TestAdaptiveDepth(t *testing.T) {
	tests := []struct {
		name      string
		in        Input
		wantAvg   float64
		wantDepth int
	}{
		{"empty", Input{}, 0, 3},
		{"chain of 5", chain(5), 8.0 / 5, 3},
		{"complete K4", complete(4), 3, 2},
		{"complete K5", complete(5), 4, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := Build(tt.in)
			if got := g.AvgDegree(); !near(got, tt.wantAvg) {
				t.Errorf("AvgDegree() = %v, want %v", got, tt.wantAvg)
			}
			if got := g.MaxDepth(); got != tt.wantDepth {
				t.Errorf("MaxDepth() = %d, want %d", got, tt.wantDepth)
			}
		})
	}
}

func TestExpandFiles(t *testing.T) {
	g := Build(chain(6)) // f0 - f1 - f2 - f3 - f4 - f5, sparse: depth 3
	tests := []struct {
		name  string
		seeds map[string]float64
		depth int
		want  map[string]float64
	}{
		{
			name:  "one seed, adaptive depth 3",
			seeds: map[string]float64{"f0.js": 1},
			want:  map[string]float64{"f0.js": 1, "f1.js": 0.5, "f2.js": 1.0 / 3, "f3.js": 0.25},
		},
		{
			name:  "explicit depth 1, both directions",
			seeds: map[string]float64{"f2.js": 0.6},
			depth: 1,
			want:  map[string]float64{"f2.js": 0.6, "f1.js": 0.3, "f3.js": 0.3},
		},
		{
			name:  "max over seeds; seeds keep their score",
			seeds: map[string]float64{"f0.js": 1, "f1.js": 0.2, "f5.js": 0.9},
			depth: 3,
			want: map[string]float64{
				"f0.js": 1, "f1.js": 0.2, "f5.js": 0.9,
				"f2.js": 1.0 / 3, // max(1/3 from f0, 0.2/2 from f1, 0.9/4 from f5)
				"f3.js": 0.9 / 3, // max(1/4, 0.2/3, 0.9/3)
				"f4.js": 0.9 / 2, // f5 at hop 1
			},
		},
		{
			name:  "unknown seed is kept, expands nothing",
			seeds: map[string]float64{"nope.js": 0.7},
			want:  map[string]float64{"nope.js": 0.7},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := g.ExpandFiles(tt.seeds, tt.depth)
			if !equalScores(got, tt.want) {
				t.Errorf("ExpandFiles = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestExpandDenseDepth(t *testing.T) {
	// Two K5 cliques joined by a path of two files: dense, so depth 2.
	e := map[int][]int{}
	for _, base := range []int{0, 7} {
		for i := base; i < base+5; i++ {
			for j := i + 1; j < base+5; j++ {
				e[i] = append(e[i], j)
			}
		}
	}
	e[4] = append(e[4], 5)
	e[5] = []int{6}
	e[6] = []int{7}
	g := Build(jsGraph(12, e))
	if g.MaxDepth() != 2 {
		t.Fatalf("MaxDepth() = %d, want 2 (avg %.2f)", g.MaxDepth(), g.AvgDegree())
	}
	got := g.ExpandFiles(map[string]float64{"f0.js": 1}, 0)
	for p, want := range map[string]float64{"f4.js": 0.5, "f5.js": 1.0 / 3} {
		if !near(got[p], want) {
			t.Errorf("score[%s] = %v, want %v", p, got[p], want)
		}
	}
	if _, ok := got["f6.js"]; ok {
		t.Errorf("f6.js is 3 hops away but was reached at depth 2: %v", got)
	}
}

func TestExpandSymbols(t *testing.T) {
	in := Input{Files: []FileInput{
		pyFile("a.py", nil,
			sym(10, "alpha", fn, []string{"beta"}, nil),
			sym(11, "beta", fn, []string{"gamma"}, nil),
			sym(12, "gamma", fn, nil, []string{"Delta"}),
			sym(13, "Delta", class, nil, nil),
			sym(14, "lonely", fn, nil, nil)),
	}}
	g := Build(in)
	got := g.ExpandSymbols(map[int]float64{12: 0.9}, 1)
	want := map[int]float64{12: 0.9, 11: 0.45, 13: 0.45}
	if !equalScores(got, want) {
		t.Errorf("ExpandSymbols(depth 1) = %v, want %v", got, want)
	}
	got = g.ExpandSymbols(map[int]float64{10: 1}, 0) // 5 symbols, sparse: depth 3
	want = map[int]float64{10: 1, 11: 0.5, 12: 1.0 / 3, 13: 0.25}
	if !equalScores(got, want) {
		t.Errorf("ExpandSymbols(adaptive) = %v, want %v", got, want)
	}
}

func TestNeighbors(t *testing.T) {
	fx := goFixture()
	g := Build(fx.in)
	got := g.FileNeighbors("store/helpers.go")
	want := []Neighbor{
		{Path: "cmd/app/main.go", ID: -1, Kind: EdgeImport, Out: false},
		{Path: "cmd/app/serve.go", ID: -1, Kind: EdgeImport, Out: false},
		{Path: "store/db.go", ID: -1, Kind: EdgeCall, Out: false},
		{Path: "store/db.go", ID: -1, Kind: EdgeType, Out: true},
		{Path: "store/db_test.go", ID: -1, Kind: EdgeImport, Out: false},
	}
	if !slices.Equal(got, want) {
		t.Errorf("FileNeighbors(store/helpers.go) =\n %v\nwant\n %v", got, want)
	}
	gotSym := g.SymbolNeighbors(7) // newDB
	wantSym := []Neighbor{
		{Path: "store/db.go", ID: 3, Kind: EdgeType, Out: true},  // newDB -> DB
		{Path: "store/db.go", ID: 4, Kind: EdgeCall, Out: false}, // Open -> newDB
	}
	if !slices.Equal(gotSym, wantSym) {
		t.Errorf("SymbolNeighbors(7) = %v, want %v", gotSym, wantSym)
	}
	if n := g.FileNeighbors("no/such.go"); n != nil {
		t.Errorf("FileNeighbors(unknown) = %v, want nil", n)
	}
	if n := g.SymbolNeighbors(999); n != nil {
		t.Errorf("SymbolNeighbors(unknown) = %v, want nil", n)
	}
}

func TestStats(t *testing.T) {
	fx := goFixture()
	got := Build(fx.in).Stats()
	want := Stats{
		Files: 7, Symbols: 10,
		FileEdges: 14, ImportEdges: 7, FileCallEdges: 5, FileTypeEdges: 2,
		SymbolEdges: 9, CallEdges: 6, TypeEdges: 3,
		Imports: 7, Unresolved: 3,
	}
	if got != want {
		t.Errorf("Stats() =\n %+v\nwant\n %+v", got, want)
	}
}

func TestPageRank(t *testing.T) {
	// A hub f0 with leaves f1..f3, a path f3 - f4 - f5 - f6 and an isolated f7.
	g := Build(jsGraph(8, map[int][]int{0: {1, 2, 3}, 3: {4}, 4: {5}, 5: {6}}))
	pr := g.PageRank(map[string]float64{"f0.js": 2}, 0.85, 50)

	sum := 0.0
	for _, r := range pr {
		sum += r
	}
	if !near(math.Round(sum*1e9)/1e9, 1) {
		t.Errorf("ranks sum to %v, want 1", sum)
	}
	for _, nb := range []string{"f1.js", "f2.js", "f3.js"} {
		for _, far := range []string{"f5.js", "f6.js"} {
			if pr[nb] <= pr[far] {
				t.Errorf("neighbour %s (%.4f) should outrank far %s (%.4f)", nb, pr[nb], far, pr[far])
			}
		}
	}
	if pr["f0.js"] <= pr["f1.js"] {
		t.Errorf("seed f0 (%.4f) should outrank its leaf f1 (%.4f)", pr["f0.js"], pr["f1.js"])
	}
	if _, ok := pr["f7.js"]; ok {
		t.Errorf("isolated unseeded f7 got rank %v, want none", pr["f7.js"])
	}

	// No usable seed: uniform restart, the hub ranks first.
	u := g.PageRank(nil, 0, 0)
	if len(u) != 8 {
		t.Fatalf("uniform PageRank has %d files, want 8", len(u))
	}
	for p, r := range u {
		if p != "f0.js" && r >= u["f0.js"] {
			t.Errorf("uniform: %s (%.4f) >= hub f0 (%.4f)", p, r, u["f0.js"])
		}
	}
}

// TestConcurrentReads is meaningful under -race: every read method shares
// the graph without locks.
func TestConcurrentReads(t *testing.T) {
	g := Build(goFixture().in)
	want := g.ExpandFiles(map[string]float64{"store/db.go": 1}, 0)
	done := make(chan map[string]float64)
	for i := 0; i < 4; i++ {
		go func() {
			g.PageRank(map[string]float64{"store/db.go": 1}, 0.85, 10)
			g.FileNeighbors("store/db.go")
			g.SymbolNeighbors(4)
			g.ExpandSymbols(map[int]float64{4: 1}, 0)
			done <- g.ExpandFiles(map[string]float64{"store/db.go": 1}, 0)
		}()
	}
	for i := 0; i < 4; i++ {
		if got := <-done; !equalScores(got, want) {
			t.Errorf("concurrent ExpandFiles = %v, want %v", got, want)
		}
	}
}

// TestReach checks ReachFiles and ReachSymbols against ExpandFiles and
// ExpandSymbols without their seeds, in node order, over two graphs in
// turn (the pooled scratch state moves between graphs of different sizes).
func TestReach(t *testing.T) {
	files := Build(chain(6))
	syms := Build(Input{Files: []FileInput{
		pyFile("a.py", nil,
			sym(10, "alpha", fn, []string{"beta"}, nil),
			sym(11, "beta", fn, []string{"gamma"}, nil),
			sym(12, "gamma", fn, nil, []string{"Delta"}),
			sym(13, "Delta", class, nil, nil),
			sym(14, "lonely", fn, nil, nil)),
	}})
	big := Build(goFixture().in)
	fileSeeds := []map[string]float64{
		{"f0.js": 1},
		{"f0.js": 1, "f1.js": 0.2, "f5.js": 0.9},
		{"f2.js": 0.6, "nope.js": 3},
		{"f3.js": 0},
		{},
	}
	symSeeds := []map[int]float64{{12: 0.9}, {10: 1, 13: 0.1}, {14: 1}, {99: 1}}
	for round := 0; round < 3; round++ {
		for _, seeds := range fileSeeds {
			for depth := 0; depth <= 3; depth++ {
				want := files.ExpandFiles(seeds, depth)
				got := files.ReachFiles(seeds, depth)
				if !slices.IsSortedFunc(got, func(a, b FileScore) int { return strings.Compare(a.Path, b.Path) }) {
					t.Errorf("ReachFiles(%v, %d) = %v, not in path order", seeds, depth, got)
				}
				m := map[string]float64{}
				for _, f := range got {
					if _, seed := seeds[f.Path]; seed {
						t.Errorf("ReachFiles(%v, %d) has seed %s", seeds, depth, f.Path)
					}
					m[f.Path] = f.Score
				}
				for p := range seeds {
					delete(want, p)
				}
				if !equalScores(m, want) {
					t.Errorf("ReachFiles(%v, %d) = %v, want %v", seeds, depth, m, want)
				}
			}
		}
		big.ReachFiles(map[string]float64{"store/db.go": 1}, 0)
		for _, seeds := range symSeeds {
			for depth := 0; depth <= 3; depth++ {
				want := syms.ExpandSymbols(seeds, depth)
				got := syms.ReachSymbols(seeds, depth)
				if !slices.IsSortedFunc(got, func(a, b SymbolScore) int { return a.ID - b.ID }) {
					t.Errorf("ReachSymbols(%v, %d) = %v, not in id order", seeds, depth, got)
				}
				m := map[int]float64{}
				for _, s := range got {
					m[s.ID] = s.Score
				}
				for id := range seeds {
					delete(want, id)
				}
				if !equalScores(m, want) {
					t.Errorf("ReachSymbols(%v, %d) = %v, want %v", seeds, depth, m, want)
				}
			}
		}
		big.ReachSymbols(map[int]float64{4: 1}, 0)
	}
}

// TestExpandMatchesPerSeedBFS compares the expansion with its
// definition, one BFS per seed keeping the best decayed score per node, on
// random graphs (cycles, hubs, isolated files) with random seed scores
// (zero, equal and negative ones among them), at every depth.
func TestExpandMatchesPerSeedBFS(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for n := range 200 {
		nf := 2 + r.IntN(40)
		e := map[int][]int{}
		for range r.IntN(3 * nf) {
			a, b := r.IntN(nf), r.IntN(nf)
			if a != b {
				e[a] = append(e[a], b)
			}
		}
		g := Build(jsGraph(nf, e))
		seeds := map[string]float64{}
		for range 1 + r.IntN(8) {
			seeds[fmt.Sprintf("f%d.js", r.IntN(nf))] = float64(r.IntN(5)-1) / 4
		}
		for depth := 0; depth <= 4; depth++ {
			want := perSeedBFS(g, seeds, depth)
			got := g.ExpandFiles(seeds, depth)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("case %d depth %d seeds %v: ExpandFiles =\n%v\nwant\n%v", n, depth, seeds, got, want)
			}
		}
	}
}

// perSeedBFS is ExpandFiles as first written: a BFS per seed.
func perSeedBFS(g *Graph, seeds map[string]float64, maxDepth int) map[string]float64 {
	if maxDepth <= 0 {
		maxDepth = g.MaxDepth()
	}
	out := map[string]float64{}
	for p, score := range seeds {
		src, ok := g.fileIdx[p]
		if !ok || score <= 0 {
			continue
		}
		seen := map[int32]bool{src: true}
		cur := []int32{src}
		for d := 1; d <= maxDepth && len(cur) > 0; d++ {
			var next []int32
			s := score / float64(1+d)
			for _, u := range cur {
				for _, a := range g.fadj.at(u) {
					if seen[a.to] {
						continue
					}
					seen[a.to] = true
					next = append(next, a.to)
					if s > out[g.files[a.to]] {
						out[g.files[a.to]] = s
					}
				}
			}
			cur = next
		}
	}
	for p, s := range seeds {
		out[p] = s
	}
	return out
}

func TestFileDegree(t *testing.T) {
	g := Build(goFixture().in)
	for _, p := range append(slices.Clone(g.files), "missing.go") {
		if got, want := g.FileDegree(p), len(g.FileNeighbors(p)); got != want {
			t.Errorf("FileDegree(%s) = %d, want %d", p, got, want)
		}
	}
}
