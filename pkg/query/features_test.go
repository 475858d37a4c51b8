package query

import (
	"context"
	"fmt"
	"math"
	"path"
	"slices"
	"testing"

	"codectx/pkg/segment"
)

func TestTestedName(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"pkg/router/tree_test.go", "tree.go"},
		{"tests/test_session.py", "session.py"},
		{"auth/session_test.py", "session.py"},
		{"src/test/java/org/x/CartTest.java", "cart.java"},
		{"src/test/java/org/x/CartTests.java", "cart.java"},
		{"src/utils/url.test.ts", "url.ts"},
		{"lib/router.spec.js", "router.js"},
		{"src/cart.go", ""},
		{"tests/conftest.py", ""},
		{"Test.java", ""},
		{"_test.go", ""},
	} {
		if got := testedName(tt.in); got != tt.want {
			t.Errorf("testedName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := sourceName("src/main/java/org/x/Cart.java"); got != testedName("src/test/java/org/x/CartTest.java") {
		t.Errorf("sourceName(Cart.java) = %q does not match its test", got)
	}
}

// TestFeatures checks the coverage, directory and test-pair features on a
// repository made for it.
func TestFeatures(t *testing.T) {
	seg := buildSeg(t, map[string]string{
		"go.mod":                "module example.com/m\n\ngo 1.22\n",
		"router/tree.go":        "package router\n\n// Insert adds a route to the radix tree.\nfunc Insert(path string) {}\n",
		"router/tree_test.go":   "package router\n\nimport \"testing\"\n\n// radix tree route insert wildcard\nfunc TestInsertWildcard(t *testing.T) { Insert(\"/a/*b\") }\n",
		"router/context.go":     "package router\n\n// Param reads a route parameter.\nfunc Param(name string) string { return name }\n",
		"render/json/render.go": "package json\n\n// Render writes a value.\nfunc Render(v any) {}\n",
	})
	feat, rk := candidateFeatures(t, seg, "radix tree wildcard route insert")
	// Every title word is in the test file; tree.go lacks "wildcard".
	if c := feat("router/tree_test.go", "title_cover"); c != 1 {
		t.Errorf("tree_test.go title_cover = %v, want 1", c)
	}
	if c := feat("router/tree.go", "title_cover"); !(c > 0 && c < 1) {
		t.Errorf("tree.go title_cover = %v, want in (0, 1)", c)
	}
	if c, d := feat("router/context.go", "title_cover"), feat("router/tree.go", "title_cover"); !(c < d) {
		t.Errorf("context.go title_cover %v not below tree.go's %v", c, d)
	}
	if c := feat("router/tree.go", "test_pair"); c <= 0 {
		t.Errorf("tree.go test_pair = %v, want > 0 (its test is a candidate)", c)
	}
	if c := feat("router/context.go", "test_pair"); c != 0 {
		t.Errorf("context.go test_pair = %v, want 0", c)
	}
	if c := feat("router/tree_test.go", "test_pair"); c != 0 {
		t.Errorf("a test file's test_pair = %v, want 0", c)
	}
	first := 0
	for _, c := range rk.Candidates {
		first += int(c.X[slices.Index(FeatureNames, "dir_first")])
	}
	dirs := map[string]bool{}
	for _, c := range rk.Candidates {
		dirs[path.Dir(c.Path)] = true
	}
	if first != len(dirs) {
		t.Errorf("dir_first set on %d candidates, want one per directory (%d)", first, len(dirs))
	}
	if d := feat("router/tree.go", "path_depth"); d != math.Log1p(1) {
		t.Errorf("path_depth of router/tree.go = %v, want log1p(1)", d)
	}
	// The title's words in one chunk: tree.go's Insert holds four of them.
	if r := feat("router/tree.go", "title_chunk_rr"); r <= 0 {
		t.Errorf("tree.go title_chunk_rr = %v, want > 0", r)
	}
	if a, b := feat("router/tree.go", "title_chunk_rel"), feat("router/context.go", "title_chunk_rel"); !(a > b) {
		t.Errorf("title_chunk_rel: tree.go %v not above context.go %v", a, b)
	}
}

// TestLineFeatures checks the per-line features: a file that only the
// second line's words rank high gets line_rr and body_rr, and the share of
// lines ranking it in their top 5.
func TestLineFeatures(t *testing.T) {
	seg := buildSeg(t, map[string]string{
		"go.mod":           "module example.com/m\n\ngo 1.22\n",
		"cache/evict.go":   "package cache\n\n// Evict drops the least recently used cache entry.\nfunc Evict() {}\n",
		"server/listen.go": "package server\n\n// Listen opens the socket of the server.\nfunc Listen(addr string) {}\n",
		"server/close.go":  "package server\n\n// Close shuts the server socket.\nfunc Close() {}\n",
	})
	feat, _ := candidateFeatures(t, seg, "server socket listen\ncache eviction of entries")
	if r := feat("cache/evict.go", "line_rr"); r <= 0 {
		t.Errorf("evict.go line_rr = %v, want > 0 (the second line names it)", r)
	}
	if r := feat("cache/evict.go", "body_rr"); r <= 0 {
		t.Errorf("evict.go body_rr = %v, want > 0", r)
	}
	if r := feat("server/listen.go", "body_rr"); r != 0 {
		t.Errorf("listen.go body_rr = %v, want 0 (only the title names it)", r)
	}
	if a, b := feat("server/listen.go", "line_top5"), feat("cache/evict.go", "line_top5"); a <= 0 || b <= 0 || a > 1 || b > 1 {
		t.Errorf("line_top5: listen.go %v, evict.go %v, want both in (0, 1]", a, b)
	}
}

// TestDefinitionFeatures checks the features that tell files of one
// package apart by what they define: the query's symbols a file defines
// (def_share, def_title, def_best), a file named as a query word
// (stem_ident) and the query's words among its symbol names (sym_cover).
func TestDefinitionFeatures(t *testing.T) {
	seg := buildSeg(t, map[string]string{
		"go.mod":            "module example.com/m\n\ngo 1.22\n",
		"zone/date_zone.go": "package zone\n\n// DateZone is a time zone of a date.\ntype DateZone struct{ name string }\n\n// Offset of the zone.\nfunc (z DateZone) Offset() int { return len(z.name) }\n",
		"zone/formatter.go": "package zone\n\n// Format prints a date zone offset.\nfunc Format(z DateZone) string { return fmt(z.Offset()) }\n\nfunc fmt(n int) string { return \"\" }\n",
		"zone/parse.go":     "package zone\n\n// ParseZone reads a date zone.\nfunc ParseZone(s string) DateZone { return DateZone{s} }\n",
	})
	q := "Fix DateZone offset\n\nFormat printed the date zone offset of DateZone wrongly when parsing"
	feat, _ := candidateFeatures(t, seg, q)
	for _, tt := range []struct {
		file, name string
		want       func(float64) bool
		says       string
	}{
		{"zone/date_zone.go", "def_title", func(v float64) bool { return v == 1 }, "1: it defines DateZone and Offset, the title's symbols"},
		{"zone/formatter.go", "def_title", func(v float64) bool { return v == 0 }, "0: it only uses them"},
		{"zone/date_zone.go", "def_best", func(v float64) bool { return v == 1 }, "1"},
		{"zone/formatter.go", "def_share", func(v float64) bool { return v > 0 && v < 1 }, "in (0, 1): it defines Format"},
		{"zone/date_zone.go", "stem_ident", func(v float64) bool { return v == 1 }, "1: date_zone is DateZone"},
		{"zone/date_zone.go", "stem_ident_title", func(v float64) bool { return v == 1 }, "1"},
		{"zone/formatter.go", "stem_ident", func(v float64) bool { return v == 0 }, "0: formatter is no query word"},
		{"zone/date_zone.go", "sym_cover", func(v float64) bool { return v > 0 }, "above 0"},
	} {
		if v := feat(tt.file, tt.name); !tt.want(v) {
			t.Errorf("%s %s = %v, want %s", tt.file, tt.name, v, tt.says)
		}
	}
	if a, b := feat("zone/date_zone.go", "def_share"), feat("zone/parse.go", "def_share"); !(a > b) {
		t.Errorf("def_share of date_zone.go %v not above parse.go's %v (ParseZone is no query word)", a, b)
	}
	if a, b := feat("zone/date_zone.go", "sym_cover"), feat("zone/formatter.go", "sym_cover"); !(a > b) {
		t.Errorf("sym_cover of date_zone.go %v not above formatter.go's %v (DateZone, Offset vs Format)", a, b)
	}
}

// TestDepths checks that Request.Depth and FileDepth bound the BM25 chunk
// list and the file lists, and that a feature request returns the whole
// fused pool and the deep lists.
func TestDepths(t *testing.T) {
	files := map[string]string{"go.mod": "module example.com/m\n\ngo 1.22\n"}
	for i := range 12 {
		files[fmt.Sprintf("route/r%02d.go", i)] = fmt.Sprintf("package route\n\n// R%d matches a route.\nfunc R%d(route string) bool { return route != \"\" }\n", i, i)
	}
	seg := buildSeg(t, files)
	eng := &Engine{Seg: seg}
	q := "route matching"
	full, err := eng.Search(context.Background(), Request{Query: q, Ranker: RankRRF, Features: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Pool) != len(full.Files) || len(full.Pool) < 12 {
		t.Fatalf("pool of %d files for %d ranked, want all (at least 12)", len(full.Pool), len(full.Files))
	}
	for _, l := range DeepLists {
		if l != armBM25Path && len(full.Deep[l]) < 12 {
			t.Errorf("deep list %s holds %d files, want every route file", l, len(full.Deep[l]))
		}
	}
	short, err := eng.Search(context.Background(), Request{Query: q, Ranker: RankRRF, Arms: []string{ArmBM25}, Depth: 3, FileDepth: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Three chunks and two whole files reach at most five files.
	if len(short.Files) == 0 || len(short.Files) > 5 {
		t.Errorf("depth 3 and file depth 2 rank %d files, want 1 to 5", len(short.Files))
	}
	if short.Pool != nil || short.Deep != nil {
		t.Errorf("pool and deep lists without Features: %v %v", short.Pool, short.Deep)
	}
}

// TestGraphFeatures checks the features of where a change lands on a
// repository made for it: zone/date_zone.go defines the query's symbol,
// zone/formatter.go calls it, cmd/main.go calls the formatter, and the
// formatter's test calls the formatter.
func TestGraphFeatures(t *testing.T) {
	seg := buildSeg(t, map[string]string{
		"go.mod":                 "module example.com/m\n\ngo 1.22\n",
		"zone/date_zone.go":      "package zone\n\n// DateZone is a time zone of a date.\ntype DateZone struct{ name string }\n\n// Offset of the date zone.\nfunc (z DateZone) Offset() int { return len(z.name) }\n\nfunc NewDateZone(s string) DateZone { return DateZone{s} }\n",
		"zone/formatter.go":      "package zone\n\n// Format prints a date zone offset.\nfunc Format(s string) string { return pad(NewDateZone(s).Offset()) }\n\nfunc pad(n int) string { return \"\" }\n",
		"zone/formatter_test.go": "package zone\n\nimport \"testing\"\n\n// date zone offset format\nfunc TestFormat(t *testing.T) { Format(\"utc\") }\n",
		"cmd/main.go":            "package main\n\nimport \"example.com/m/zone\"\n\n// main prints a date zone.\nfunc main() { println(zone.Format(\"utc\")) }\n",
		"other/unrelated.go":     "package other\n\n// Unrelated date work.\nfunc Unrelated() int { return 1 }\n",
	})
	q := "Fix DateZone offset\n\nThe date zone offset of NewDateZone is printed wrongly"
	feat, _ := candidateFeatures(t, seg, q)
	for _, tt := range []struct {
		file, name string
		want       func(float64) bool
		says       string
	}{
		{"zone/formatter.go", "def_calls", func(v float64) bool { return v == 1 }, "1: it calls NewDateZone"},
		{"zone/date_zone.go", "def_calls", func(v float64) bool { return v == 0 }, "0: it defines the symbol itself"},
		{"zone/date_zone.go", "def_called", func(v float64) bool { return v == 0 }, "0: it defines the symbol itself"},
		{"other/unrelated.go", "def_calls", func(v float64) bool { return v == 0 }, "0"},
		{"zone/formatter.go", "prop_out", func(v float64) bool { return v > 0 && v <= 1 }, "in (0, 1]: it calls a top file"},
		{"zone/date_zone.go", "prop_in", func(v float64) bool { return v > 0 && v <= 1 }, "in (0, 1]: a top file calls it"},
		{"zone/formatter.go", "test_imports", func(v float64) bool { return v > 0 }, "above 0: its test calls it"},
		{"zone/date_zone.go", "test_imports", func(v float64) bool { return v == 0 }, "0: no test calls it"},
		{"zone/formatter_test.go", "test_imports", func(v float64) bool { return v == 0 }, "0: a test file"},
		{"other/unrelated.go", "links_top", func(v float64) bool { return v == 0 }, "0: linked to nothing"},
		{"other/unrelated.go", "prop_in_sum", func(v float64) bool { return v == 0 }, "0"},
		{"zone/formatter.go", "links_top", func(v float64) bool { return v >= math.Log1p(2) }, "at least log1p(2): date_zone.go, main.go, its test"},
		{"zone/formatter.go", "deg_rel", func(v float64) bool { return v == 1 }, "1: the most linked file"},
		{"other/unrelated.go", "deg_rel", func(v float64) bool { return v == 0 }, "0"},
	} {
		if v := feat(tt.file, tt.name); !tt.want(v) {
			t.Errorf("%s %s = %v, want %s", tt.file, tt.name, v, tt.says)
		}
	}
	if a, b := feat("zone/formatter.go", "prop_in_sum"), feat("zone/formatter.go", "prop_in"); !(a >= b) {
		t.Errorf("formatter.go prop_in_sum %v below its prop_in %v", a, b)
	}
	// Three of the zone files and their test are in one directory.
	if a, b := feat("zone/formatter.go", "dir_share"), feat("other/unrelated.go", "dir_share"); !(a > b && b == 0) {
		t.Errorf("dir_share of formatter.go %v, unrelated.go %v: want the first above 0, the second 0", a, b)
	}
}

// TestReplayFeatures checks the history replay: past commits' titles run
// through the title-only file ranking, counted against the files each
// commit changed.
func TestReplayFeatures(t *testing.T) {
	seg := buildSeg(t, map[string]string{
		"go.mod":                "module example.com/m\n\ngo 1.22\n",
		"router/tree.go":        "package router\n\n// Insert adds a route to the radix tree.\nfunc Insert(path string) {}\n",
		"router/context.go":     "package router\n\n// Param reads a route parameter.\nfunc Param(name string) string { return name }\n",
		"render/json/render.go": "package json\n\n// Render writes a value.\nfunc Render(v any) {}\n",
	})
	seg.History = []segment.Commit{
		{Hash: "c3", Message: "Merge pull request #3 from a/b\n\nradix tree insert speedup\n", Files: []string{"router/tree.go"}},
		{Hash: "c2", Message: "radix tree cleanup (#2)", Files: []string{"router/context.go"}},
		{Hash: "c1", Message: "zebra quagga", Files: []string{"router/context.go"}},
		{Hash: "c0", Message: "nothing indexed", Files: []string{"gone.go"}},
	}
	if got := commitTitle(seg.History[0].Message); got != "radix tree insert speedup" {
		t.Errorf("commitTitle of a merge = %q", got)
	}
	feat, _ := candidateFeatures(t, seg, "radix tree route insert")
	// tree.go is ranked first for both "radix tree" titles and changed by one.
	if got := feat("router/tree.go", "replay_top"); got != math.Log1p(2) {
		t.Errorf("tree.go replay_top = %v, want log1p(2)", got)
	}
	if got := feat("router/tree.go", "replay_prec"); got != 1.5/4 {
		t.Errorf("tree.go replay_prec = %v, want 1.5/4", got)
	}
	// context.go was changed twice by titles whose words it does not hold.
	if got := feat("router/context.go", "replay_missed"); got != math.Log1p(2) {
		t.Errorf("context.go replay_missed = %v, want log1p(2)", got)
	}
	if got := feat("router/tree.go", "replay_missed"); got != 0 {
		t.Errorf("tree.go replay_missed = %v, want 0", got)
	}
}

// candidateFeatures searches seg for q with features and returns a
// lookup of a candidate's feature by path and name (a missing candidate
// fails the test), and the ranking.
func candidateFeatures(t *testing.T, seg *segment.Segment, q string) (func(p, name string) float64, *Ranking) {
	t.Helper()
	rk, err := (&Engine{Seg: seg}).Search(context.Background(), Request{Query: q, Route: true, Ranker: RankRRF, Features: true, FeatureDepth: 50})
	if err != nil {
		t.Fatal(err)
	}
	return func(p, name string) float64 {
		t.Helper()
		col := slices.Index(FeatureNames, name)
		for _, c := range rk.Candidates {
			if c.Path == p {
				return c.X[col]
			}
		}
		t.Fatalf("%s is not a candidate: %+v", p, rk.Candidates)
		return 0
	}, rk
}
