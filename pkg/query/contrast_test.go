package query

import (
	"context"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/segment"
	"codectx/pkg/source"
)

// serverSeg is a segment of three small files: two in server/ (siblings)
// and one in cache/.
func serverSeg(t *testing.T) *segment.Segment {
	t.Helper()
	return buildSeg(t, map[string]string{
		"go.mod":           "module example.com/m\n\ngo 1.22\n",
		"server/listen.go": "package server\n\n// Listen opens the socket of the server and runs the accept loop.\nfunc Listen(addr string) { acceptLoop() }\n\nfunc acceptLoop() {}\n",
		"server/close.go":  "package server\n\n// Close shuts the server socket.\nfunc Close() {}\n",
		"cache/evict.go":   "package cache\n\n// Evict drops the least recently used entry of the server cache.\nfunc Evict() {}\n",
	})
}

// TestContrastFeatures checks the sibling-contrast features (a file
// against the other top files of its directory, and the top file) and the
// pseudo-relevance feedback ones (the query expanded by its top files'
// words).
func TestContrastFeatures(t *testing.T) {
	seg := serverSeg(t)
	feat, rk := candidateFeatures(t, seg, "listen on the server socket")
	if rk.Candidates[0].Path != "server/listen.go" {
		t.Fatalf("top candidate %s, want server/listen.go", rk.Candidates[0].Path)
	}
	for _, tt := range []struct {
		file, name string
		want       func(float64) bool
		says       string
	}{
		{"server/listen.go", "sib_n", func(v float64) bool { return v == math.Log1p(1) }, "log1p(1): close.go is its sibling"},
		{"cache/evict.go", "sib_n", func(v float64) bool { return v == 0 }, "0: alone in cache/"},
		{"server/listen.go", "sib_title", func(v float64) bool { return v > 0 }, "above 0: it holds more of the title than close.go"},
		{"server/close.go", "sib_title", func(v float64) bool { return v < 0 }, "below 0"},
		{"cache/evict.go", "sib_title", func(v float64) bool { return v == 0 }, "0: no sibling"},
		{"server/listen.go", "sib_distinct", func(v float64) bool { return v > 0 }, "above 0: only it holds listen"},
		{"server/close.go", "sib_distinct", func(v float64) bool { return v == 0 }, "0: listen.go holds server and socket too"},
		{"server/listen.go", "top_distinct", func(v float64) bool { return v == 0 }, "0: the top file"},
		{"server/listen.go", "prf_rr", func(v float64) bool { return v > 0 }, "above 0"},
		{"server/listen.go", "prf_rel", func(v float64) bool { return v > 0 && v <= 1 }, "in (0, 1]"},
	} {
		if v := feat(tt.file, tt.name); !tt.want(v) {
			t.Errorf("%s %s = %v, want %s", tt.file, tt.name, v, tt.says)
		}
	}
	// The top file's words that the query lacks are the expansion.
	exp, w := prfWords(seg, []File{{Path: "server/listen.go", Score: 1}}, 3, 10, map[string]bool{"listen": true, "server": true, "socket": true})
	if !slices.Contains(exp, "accept") || slices.Contains(exp, "listen") {
		t.Errorf("expansion %v, want accept and no query word", exp)
	}
	if len(w) != len(exp) || !slices.IsSortedFunc(w, func(a, b float64) int { return -cmpFloat(a, b) }) {
		t.Errorf("weights %v not descending", w)
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compileEngine indexes $GOROOT/src/cmd/compile (the query benchmarks'
// segment) and returns its engine with seven of the benchmarks' queries.
func compileEngine(b *testing.B) (*Engine, []string) {
	b.Helper()
	dir := filepath.Join(runtime.GOROOT(), "src", "cmd", "compile")
	snap, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer snap.Close()
	seg, _, err := index.BuildSegment(context.Background(), blob.NewMem(), snap, "go/compile", index.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return &Engine{Seg: seg}, []string{"escape analysis of closures", "inline small functions cost budget", "dead code elimination pass",
		"register allocation spill", "bounds check elimination", "fix miscompilation in rewrite rules", "walk range loops"}
}

// BenchmarkContrastFeatures times the sibling-contrast and the
// pseudo-relevance feedback features of the top 20 files, per query, on
// $GOROOT/src/cmd/compile (the query benchmarks' segment and queries).
func BenchmarkContrastFeatures(b *testing.B) {
	e, queries := compileEngine(b)
	ins := make([]featureInput, len(queries))
	for i, q := range queries {
		rk, err := e.Search(context.Background(), Request{Query: q, Route: true, Ranker: RankRRF})
		if err != nil {
			b.Fatal(err)
		}
		_, fileBM := e.fileBM25Arm(q, nil, 100, nil)
		ins[i] = featureInput{q: q, files: rk.Files, n: 20, fileBM: fileBM}
	}
	for _, bc := range []struct {
		name string
		f    func(featureInput, []Candidate, func(int, string, float64))
	}{
		{"sibling", func(in featureInput, c []Candidate, set func(int, string, float64)) {
			e.siblingFeatures(in, nameTerms(title(in.q)), c, set)
		}},
		{"prf-one", func(in featureInput, c []Candidate, set func(int, string, float64)) {
			e.prfFeatures(in, c, set, prfVariants[:1])
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				in := ins[i%len(ins)]
				cands := make([]Candidate, min(20, len(in.files)))
				for j := range cands {
					cands[j].Path = in.files[j].Path
				}
				bc.f(in, cands, func(int, string, float64) {})
			}
		})
	}
}
