package query_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/codectx"
	"codectx/pkg/index"
	"codectx/pkg/query"
	"codectx/pkg/segment"
	"codectx/pkg/testrepo"
	"codectx/pkg/tokens"
)

func fixture(t *testing.T) *segment.Segment {
	t.Helper()
	r := testrepo.New(t)
	r.Commit("initial shop", testrepo.Small)
	r.Commit("price: add pear to the price table", map[string]string{
		"price/price.go": strings.Replace(testrepo.Small["price/price.go"], `"apple": 3`, `"apple": 3, "pear": 4`, 1),
	})
	return headSeg(t, r, "shop")
}

// headSeg indexes r's HEAD as name in a memory store and loads it.
func headSeg(t *testing.T, r *testrepo.Repo, name string) *segment.Segment {
	t.Helper()
	store := blob.NewMem()
	if _, err := index.Build(context.Background(), store, r.Dir, index.Options{Name: name}); err != nil {
		t.Fatal(err)
	}
	seg, err := index.LoadHead(context.Background(), store, index.DefaultTenant, name)
	if err != nil {
		t.Fatal(err)
	}
	return seg
}

func TestQuery(t *testing.T) {
	seg := fixture(t)
	eng := &query.Engine{Seg: seg}
	tests := []struct {
		q       string
		trigger string
		topFile string
		topArm  string
		wantSym string
	}{
		{q: "Cart.Total", trigger: "EXPLICIT_SYMBOL", topFile: "cart/cart.go", topArm: query.ArmSymbol, wantSym: "(*Cart).Total"},
		{q: "where is create_session defined", trigger: "EXPLICIT_SYMBOL", topFile: "auth/session.py", topArm: query.ArmSymbol, wantSym: "SessionStore.create_session"},
		{q: "how are login sessions expired", trigger: "SEMANTIC_CONCEPT", topFile: "auth/session.py", topArm: query.ArmBM25},
		{q: "what changed recently in the price table", trigger: "TEMPORAL_HISTORY", topFile: "price/price.go", topArm: query.ArmHistory},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			resp, err := eng.Query(context.Background(), query.Request{Query: tt.q, Budget: 4000, Route: true})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Trigger != tt.trigger {
				t.Errorf("trigger = %s, want %s", resp.Trigger, tt.trigger)
			}
			if len(resp.Files) == 0 || resp.Files[0].Path != tt.topFile {
				t.Fatalf("files = %+v, want %s first", resp.Files, tt.topFile)
			}
			if !slices.Contains(resp.Files[0].Signals, tt.topArm) {
				t.Errorf("top file signals = %v, want %s among them", resp.Files[0].Signals, tt.topArm)
			}
			if tt.wantSym != "" {
				found := false
				for _, c := range resp.Chunks {
					found = found || c.Symbol == tt.wantSym
				}
				if !found {
					t.Errorf("no chunk for %s in %+v", tt.wantSym, resp.Chunks)
				}
			}
			for _, c := range resp.Chunks {
				if c.Repo != "shop" || c.Commit != seg.Meta.Commit || c.Path == "" || c.StartLine < 1 || c.EndLine < c.StartLine {
					t.Errorf("chunk without full provenance: %+v", c)
				}
				if !strings.HasPrefix(c.Provenance, "shop@"+seg.Meta.Commit[:12]+":"+c.Path+"#L") {
					t.Errorf("provenance %q", c.Provenance)
				}
				if !strings.Contains(resp.Context, c.Text) {
					t.Errorf("chunk text of %s not in the context", c.Provenance)
				}
			}
		})
	}
}

// The packed context never exceeds the budget, counted in o200k tokens.
func TestBudgetNeverExceeded(t *testing.T) {
	eng := &query.Engine{Seg: fixture(t)}
	for _, budget := range []int{1, 20, 50, 100, 300, 1000, 8000} {
		resp, err := eng.Query(context.Background(), query.Request{Query: "cart total price lookup session", Budget: budget, Route: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := tokens.Count(resp.Context); got > budget || got != resp.Tokens {
			t.Errorf("budget %d: context has %d tokens, response says %d", budget, got, resp.Tokens)
		}
	}
}

func TestArmsAndFilters(t *testing.T) {
	eng := &query.Engine{Seg: fixture(t)}
	resp, err := eng.Query(context.Background(), query.Request{Query: "Cart.Total price", Arms: []string{query.ArmBM25}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.Arms, []string{query.ArmBM25}) {
		t.Errorf("arms = %v, want only bm25", resp.Arms)
	}
	for _, c := range resp.Chunks {
		if !slices.Equal(c.Signals, []string{query.ArmBM25}) {
			t.Errorf("chunk %s signals %v, want only bm25", c.Provenance, c.Signals)
		}
	}
	resp, err = eng.Query(context.Background(), query.Request{Query: "session price cart", Languages: []codectx.Language{codectx.Python}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Chunks) == 0 {
		t.Fatal("no chunks for a python-only query")
	}
	for _, c := range resp.Chunks {
		if !strings.HasSuffix(c.Path, ".py") {
			t.Errorf("python-only query returned %s", c.Path)
		}
	}
	noCart := func(p string) bool { return !strings.HasPrefix(p, "cart/") }
	resp, err = eng.Query(context.Background(), query.Request{Query: "Cart.Total price", Paths: noCart})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range resp.Chunks {
		if !noCart(c.Path) {
			t.Errorf("path-filtered query returned %s", c.Path)
		}
	}
	for _, f := range resp.Files {
		if !noCart(f.Path) {
			t.Errorf("path-filtered query ranked %s", f.Path)
		}
	}
	// No dense embedder configured: the arm is absent, never faked.
	resp, err = eng.Query(context.Background(), query.Request{Query: "cart", Arms: []string{query.ArmDense}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Arms) != 0 || len(resp.Chunks) != 0 {
		t.Errorf("dense-only query without an embedder returned arms %v, %d chunks", resp.Arms, len(resp.Chunks))
	}
}

func TestEmptyQuery(t *testing.T) {
	eng := &query.Engine{Seg: fixture(t)}
	if _, err := eng.Query(context.Background(), query.Request{Query: "   "}); err == nil {
		t.Fatal("empty query succeeded")
	}
}

func TestPathPrior(t *testing.T) {
	tests := []struct {
		path string
		want float64
	}{
		{"src/requests/models.py", 1},
		{"tests/test_models.py", 0.5},
		{"mux_test.go", 0.5},
		{"src/test/java/org/jsoup/nodes/ElementTest.java", 0.5},
		{"src/main/java/org/jsoup/nodes/Element.java", 1},
		{"test/app.test.ts", 0.5},
		{"src/utils/index.ts", 1},
		{"src/app.spec.ts", 0.5},
		{"examples/simplewiki/actions.py", 0.6},
		{"docs/conf.py", 0.6},
		{"vendor/golang.org/x/net/http2/frame.go", 0.4},
		{"node_modules/h3/dist/index.js", 0.4},
		{"src/werkzeug/datastructures.pyi", 0.7},
		{"src/tests.rs", 0.5},
		{"src/latest.rs", 1},
		{"contest/contest.go", 1},
	}
	for _, tt := range tests {
		if got := query.PathPrior(tt.path); got != tt.want {
			t.Errorf("PathPrior(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

// Scale reweighs one ranking: at zero the ranking no longer votes, and the
// fused ranking is the other arms' alone.
func TestScale(t *testing.T) {
	eng := &query.Engine{Seg: fixture(t)}
	ctx := context.Background()
	q := "Cart.Total price"
	only, err := eng.Search(ctx, query.Request{Query: q, Arms: []string{query.ArmBM25}})
	if err != nil {
		t.Fatal(err)
	}
	muted, err := eng.Search(ctx, query.Request{Query: q, Arms: []string{query.ArmBM25, query.ArmSymbol}, Scale: map[string]float64{query.ArmSymbol: 0}})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(rk *query.Ranking) []string {
		var out []string
		for _, s := range rk.Fused {
			out = append(out, fmt.Sprintf("%s:%.6f", s.ID, s.Score))
		}
		return out
	}
	if !slices.Equal(ids(only), ids(muted)) {
		t.Errorf("symbol scaled to 0: fused %v, want the bm25-only ranking %v", ids(muted), ids(only))
	}
	both, err := eng.Search(ctx, query.Request{Query: q, Arms: []string{query.ArmBM25, query.ArmSymbol}})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(ids(only), ids(both)) {
		t.Fatalf("the symbol arm changes nothing for %q: the test cannot tell scaling from no scaling", q)
	}
	for _, name := range []string{"bm25", "bm25-file", "bm25-path", "graph-index", "history"} {
		if !query.IsList(name) {
			t.Errorf("IsList(%q) = false", name)
		}
	}
	if query.IsList("bogus") {
		t.Error(`IsList("bogus") = true`)
	}
}

// Request.Shape replaces the pack's breadth pass: DefaultShape given
// explicitly packs as no shape does, and one that gives the top file the
// whole budget before any other file packs otherwise at some budget.
func TestShape(t *testing.T) {
	eng := &query.Engine{Seg: fixture(t)}
	pack := func(budget int, sh *query.Shape) *query.Response {
		t.Helper()
		resp, err := eng.Query(context.Background(), query.Request{Query: "cart total price lookup session", Budget: budget, Route: true, Shape: sh})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	def := query.DefaultShape
	differ := 0
	for _, budget := range []int{60, 120, 250, 500, 1000} {
		got := pack(budget, nil)
		if same := pack(budget, &def); same.Context != got.Context {
			t.Errorf("budget %d: DefaultShape packs\n%s\nno shape\n%s", budget, same.Context, got.Context)
		}
		if deep := pack(budget, &query.Shape{Lead: 1, Deep: 1, DeepShare: 1}); deep.Context != got.Context {
			differ++
		}
	}
	if differ == 0 {
		t.Error("the top file's depth packs as the default shape at every budget: Shape is not applied")
	}
}
