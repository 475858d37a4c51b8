package query

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"codectx/pkg/query/rank"
	"codectx/pkg/tokenize"
)

// chunkFixture is a package whose file hook.go holds a short type and
// long functions that all match the query.
func chunkFixture(t *testing.T) *Engine {
	t.Helper()
	var hook strings.Builder
	hook.WriteString("package hook\n\n// Signature is a delivery's signature header.\ntype Signature struct{ Value string }\n")
	for i, name := range []string{"VerifySignature", "ParseSignature", "SignDelivery"} {
		fmt.Fprintf(&hook, "\n// %s checks the webhook signature of a delivery.\nfunc %s(secret, body []byte, sig Signature) bool {\n", name, name)
		for j := range 3 + 4*i {
			fmt.Fprintf(&hook, "\tif len(body) == %d && sig.Value != \"\" { // signature step %d\n\t\treturn false\n\t}\n", j, j)
		}
		hook.WriteString("\treturn len(secret) > 0\n}\n")
	}
	files := map[string]string{
		"hook/hook.go":  hook.String(),
		"hook/other.go": "package hook\n\n// Delivery is one webhook delivery.\ntype Delivery struct{ Body []byte }\n\nfunc (d Delivery) Size() int { return len(d.Body) }\n",
		"util/util.go":  "package util\n\n// Max returns the larger signature length.\nfunc Max(a, b int) int {\n\tif a > b {\n\t\treturn a\n\t}\n\treturn b\n}\n",
	}
	return &Engine{Seg: buildSeg(t, files)}
}

func chunkModel(t *testing.T, lines float64) *rank.Model {
	t.Helper()
	m, err := rank.Parse([]byte(fmt.Sprintf(`{"kind":"linear","features":["log_lines"],"mean":[0],"scale":[1],"weights":[%g]}`, lines)), ChunkFeatureNames)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The chunk ranker's features are computed for the top files' chunks, in
// their ranges: a file's best fused chunk has rel 1, one chunk is its
// first, each chunk has one kind, and the shares lie in [0, 1].
func TestChunkFeatures(t *testing.T) {
	e := chunkFixture(t)
	rk, err := e.Search(context.Background(), Request{Query: "where is the webhook signature verified", ChunkFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rk.Chunks) < 4 {
		t.Fatalf("%d chunk candidates, want hook.go's chunks at least", len(rk.Chunks))
	}
	col := func(name string) int { return slices.Index(ChunkFeatureNames, name) }
	type file struct{ best, first float64 }
	by := map[string]*file{}
	for _, c := range rk.Chunks {
		if len(c.X) != len(ChunkFeatureNames) {
			t.Fatalf("%d features, want %d", len(c.X), len(ChunkFeatureNames))
		}
		f := by[c.Path]
		if f == nil {
			f = &file{}
			by[c.Path] = f
		}
		f.best = max(f.best, c.X[col("rel")])
		f.first += c.X[col("first")]
		ch := e.Seg.Chunks[c.ID]
		if got, want := c.X[col("log_lines")], math.Log1p(float64(ch.EndLine-ch.StartLine+1)); got != want {
			t.Errorf("%s:%d log_lines %v, want %v", c.Path, ch.StartLine, got, want)
		}
		kinds := 0.0
		for i, n := range ChunkFeatureNames {
			v := c.X[i]
			if strings.HasPrefix(n, "kind_") {
				kinds += v
			}
			if n != "log_lines" && (v < 0 || v > 1 || math.IsNaN(v)) {
				t.Errorf("%s:%d %s = %v, want within [0, 1]", c.Path, ch.StartLine, n, v)
			}
		}
		if kinds != 1 {
			t.Errorf("%s:%d (%s) has %v kind flags, want 1", c.Path, ch.StartLine, ch.Kind, kinds)
		}
	}
	for p, f := range by {
		if f.best != 1 || f.first != 1 {
			t.Errorf("%s: best rel %v, %v first chunks; want 1 and 1", p, f.best, f.first)
		}
	}
	if c := rk.Chunks[0]; c.X[col("cover")] == 0 {
		t.Errorf("the best chunk holds none of the query's terms: %+v", c)
	}
}

// A chunk model reorders the chunks inside each file, and only there: the
// files, their order and each file's set of chunk scores stay those of the
// fused order, which RankRRF keeps.
func TestChunkModelOrdersInsideFiles(t *testing.T) {
	e := chunkFixture(t)
	req := Request{Query: "where is the webhook signature verified"}
	ask := func(m *rank.Model, ranker string) *Ranking {
		t.Helper()
		e.ChunkModel = m
		r := req
		r.ChunkRanker = ranker
		rk, err := e.Search(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		return rk
	}
	lines := func(rk *Ranking, path string) (out []int, scores []float64) {
		for _, s := range rk.Fused {
			id, _ := strconv.Atoi(s.ID)
			if c := e.Seg.Chunks[id]; c.Path == path {
				out = append(out, c.EndLine-c.StartLine+1)
				scores = append(scores, s.Score)
			}
		}
		return out, scores
	}
	fused := ask(nil, "")
	long, short := ask(chunkModel(t, 1), ""), ask(chunkModel(t, -1), "")
	kept := ask(chunkModel(t, 1), RankRRF)
	fl, fs := lines(fused, "hook/hook.go")
	if len(fl) < 4 {
		t.Fatalf("hook.go has %d fused chunks, want 4", len(fl))
	}
	for name, c := range map[string]struct {
		rk   *Ranking
		desc bool
	}{"longest first": {long, true}, "shortest first": {short, false}} {
		got, scores := lines(c.rk, "hook/hook.go")
		want := slices.Clone(got)
		slices.Sort(want)
		if c.desc {
			slices.Reverse(want)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: hook.go's chunks in lines %v, want %v", name, got, want)
		}
		if !slices.Equal(scores, fs) {
			t.Errorf("%s: hook.go's scores %v, want the fused ones %v", name, scores, fs)
		}
		if fmt.Sprint(c.rk.Files) != fmt.Sprint(fused.Files) {
			t.Errorf("%s: files %v, want %v", name, c.rk.Files, fused.Files)
		}
	}
	if got, _ := lines(kept, "hook/hook.go"); !slices.Equal(got, fl) {
		t.Errorf("rrf chunk ranker: lines %v, want the fused order %v", got, fl)
	}
}

func TestNameFeatures(t *testing.T) {
	for _, tc := range []struct {
		name, query  string
		words, exact float64
	}{
		{"removeItems", "remove items from the cart", 1, 0},
		{"Cart.removeItems", "call removeItems twice", 1, 1},
		{"parseHTTPHeaders", "parse http headers", 1, 0},
		{"isEmpty", "the cart is empty", 1, 0},
		{"add_entries", "add entries", 1, 0},
		{"Count", "the account total", 0, 0},
		{"Count", "count the items", 1, 1},
		{"(*Router).Mount", "mount a router", 1, 1},
		{"flushBuffer", "flush on close", 0.5, 0},
	} {
		qset := map[string]bool{}
		for _, w := range tokenize.QueryTokens(tc.query) {
			qset[w] = true
		}
		if w, e := nameFeatures(tc.name, qset); w != tc.words || e != tc.exact {
			t.Errorf("%s against %q: name_words %v, name_exact %v; want %v, %v", tc.name, tc.query, w, e, tc.words, tc.exact)
		}
	}
}
