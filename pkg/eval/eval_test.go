package eval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/eval"
	"codectx/pkg/query"
	"codectx/pkg/testrepo"
)

func TestReadTasks(t *testing.T) {
	good := `{"id":"a-1","repo":"o/a","base_commit":"abc","query":"fix it","gold_files":["x.go"],"language":"go"}` + "\n\n"
	tasks, err := eval.ReadTasks(strings.NewReader(good))
	if err != nil || len(tasks) != 1 || tasks[0].GoldFiles[0] != "x.go" {
		t.Fatalf("ReadTasks = %+v, %v", tasks, err)
	}
	for _, bad := range []string{`{"id":`, `{"id":"a","repo":"o/a"}`} {
		if _, err := eval.ReadTasks(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadTasks(%q) succeeded", bad)
		}
	}
}

func TestRun(t *testing.T) {
	r := testrepo.New(t)
	base := r.Commit("initial", testrepo.Small)
	tasks := []eval.Task{
		{ID: "shop-1", Repo: "acme/shop", BaseCommit: base, Query: "Fix Cart.Total for empty carts", GoldFiles: []string{"cart/cart.go"}, Language: "go"},
		{ID: "shop-2", Repo: "acme/shop", BaseCommit: base, Query: "expire old login sessions", GoldFiles: []string{"auth/session.py"}, Language: "python"},
	}
	rep, err := eval.Run(context.Background(), tasks, eval.Options{
		GitDirs: map[string]string{"acme/shop": r.Bare()},
		Store:   blob.NewMem(),
		Budgets: []int{500, 4000},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Overall) != len(eval.DefaultConfigs()) {
		t.Fatalf("%d summaries, want one per config", len(rep.Overall))
	}
	for _, s := range rep.Overall {
		if s.Tasks != 2 {
			t.Errorf("%s: %d tasks", s.Config, s.Tasks)
		}
		for _, b := range []int{500, 4000} {
			if s.Recall[b] < 0 || s.Recall[b] > 1 {
				t.Errorf("%s: recall@%d = %v", s.Config, b, s.Recall[b])
			}
		}
	}
	full := rep.Tasks["full"]
	if len(full) != 2 || full[0].R1 != 1 || full[1].R1 != 1 {
		t.Errorf("full pipeline should rank the gold file first on both tasks: %+v", full)
	}
	if full[0].Recall[4000] != 1 {
		t.Errorf("recall@4000 = %v, want 1", full[0].Recall[4000])
	}
	table := eval.FormatTable(rep.Overall, []int{500, 4000})
	if !strings.Contains(table, "baseline: bm25 whole files") || !strings.Contains(table, "R@4k") {
		t.Errorf("table:\n%s", table)
	}
	if _, err := eval.Run(context.Background(), tasks, eval.Options{Store: blob.NewMem()}); err == nil {
		t.Error("Run without --git-dir for the task's repo succeeded")
	}
}

func TestLanguageFile(t *testing.T) {
	tests := []struct {
		lang, path string
		want       bool
	}{
		{"typescript", "src/app.ts", true},
		{"typescript", "src/app.tsx", true},
		{"typescript", "src/types.d.ts", false},
		{"python", "a/b.py", true},
		{"python", "a/b.pyi", false},
		{"rust", "src/lib.rs", true},
		{"java", "A.java", true},
		{"go", "x.go", true},
		{"go", "x.py", false},
	}
	for _, tt := range tests {
		if got := eval.LanguageFile(tt.lang, tt.path); got != tt.want {
			t.Errorf("LanguageFile(%s, %s) = %v, want %v", tt.lang, tt.path, got, tt.want)
		}
	}
}

// A task whose commit is missing is reported and scored zero; the others run.
func TestRunSkipsBrokenTask(t *testing.T) {
	r := testrepo.New(t)
	base := r.Commit("initial", testrepo.Small)
	tasks := []eval.Task{
		{ID: "bad", Repo: "acme/shop", BaseCommit: strings.Repeat("0", 40), Query: "cart total", GoldFiles: []string{"cart/cart.go"}, Language: "go"},
		{ID: "good", Repo: "acme/shop", BaseCommit: base, Query: "Cart.Total", GoldFiles: []string{"cart/cart.go"}, Language: "go"},
	}
	rep, err := eval.Run(context.Background(), tasks, eval.Options{
		GitDirs: map[string]string{"acme/shop": r.Dir}, Store: blob.NewMem(), Budgets: []int{1000},
		Configs: []eval.Config{{Name: "full", Arms: nil, Route: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failed) != 1 || rep.Failed[0].Task != "bad" {
		t.Errorf("failed = %+v, want the bad task", rep.Failed)
	}
	got := rep.Tasks["full"]
	if len(got) != 2 || got[0].Recall[1000] != 0 || got[1].Recall[1000] != 1 {
		t.Errorf("results = %+v", got)
	}
}

func TestReadConfigs(t *testing.T) {
	good := `[{"name":"more graph","route":true,"scale":{"graph":2,"graph-index":2}},{"name":"bm25","arms":["bm25"],"pack":{"lead":2,"deep":1,"deep_share":0.2,"tail_stubs":true}}]`
	cs, err := eval.ReadConfigs(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Scale["graph"] != 2 || !cs[0].Route || cs[1].Arms[0] != "bm25" || cs[0].Pack != nil ||
		cs[1].Pack == nil || *cs[1].Pack != (query.Shape{Lead: 2, Deep: 1, DeepShare: 0.2, TailStubs: true}) {
		t.Errorf("ReadConfigs = %+v", cs)
	}
	bad := map[string]string{
		"not json":      `{`,
		"empty":         `[]`,
		"no name":       `[{"route":true}]`,
		"same name":     `[{"name":"a"},{"name":"a"}]`,
		"unknown arm":   `[{"name":"a","arms":["bm26"]}]`,
		"unknown list":  `[{"name":"a","scale":{"grpah":2}}]`,
		"negative":      `[{"name":"a","scale":{"graph":-1}}]`,
		"unknown field": `[{"name":"a","weights":{}}]`,
		"chunk ranker":  `[{"name":"a","chunk_ranker":"best"}]`,
		"chunk learned": `[{"name":"a","chunk_ranker":"learned"}]`,
		"chunk model":   `[{"name":"a","chunk_model":"no/such/model.json"}]`,
		"pack lead":     `[{"name":"a","pack":{"lead":-1}}]`,
		"pack share":    `[{"name":"a","pack":{"lead":4,"deep":1,"deep_share":1.5}}]`,
		"pack field":    `[{"name":"a","pack":{"leads":4}}]`,
	}
	for what, in := range bad {
		if _, err := eval.ReadConfigs(strings.NewReader(in)); err == nil {
			t.Errorf("%s: ReadConfigs(%s) succeeded", what, in)
		}
	}
}

func TestCandidate(t *testing.T) {
	tests := []struct {
		lang, path string
		want       bool
	}{
		{"typescript", "source/core/Ky.ts", true},
		{"typescript", "index.d.ts", false},
		{"typescript", "index.test-d.ts", true},
		{"typescript", "node_modules/x/index.ts", false},
		{"javascript", "lib/router/index.js", true},
		{"python", "src/werkzeug/datastructures.pyi", false},
		{"rust", "src/de.rs", true},
		{"go", "README.md", false},
	}
	for _, tt := range tests {
		if got := eval.Candidate(tt.lang)(tt.path); got != tt.want {
			t.Errorf("Candidate(%s)(%s) = %v, want %v", tt.lang, tt.path, got, tt.want)
		}
	}
	if eval.Candidate("") != nil || eval.Candidate("cobol") != nil {
		t.Error("an unknown language should accept every path (nil)")
	}
}

// TestConfigModel runs two learned configurations side by side, one with
// a model file of its own, and dumps features deeper than the model
// reranks.
func TestConfigModel(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.json")
	// Prefers the smallest file whatever the query says.
	if err := os.WriteFile(small, []byte(`{"kind":"linear","features":["log_size"],"mean":[0],"scale":[1],"weights":[-1],"depth":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"kind":"linear","features":["no_such_feature"],"mean":[0],"scale":[1],"weights":[1]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{`[{"name":"a","model":"` + bad + `"}]`, `[{"name":"a","model":"` + filepath.Join(dir, "missing.json") + `"}]`} {
		if _, err := eval.ReadConfigs(strings.NewReader(in)); err == nil {
			t.Errorf("ReadConfigs(%s) succeeded", in)
		}
	}
	cs, err := eval.ReadConfigs(strings.NewReader(`[{"name":"shipped","route":true},{"name":"small first","route":true,"model":"` + small + `"}]`))
	if err != nil {
		t.Fatal(err)
	}
	r := testrepo.New(t)
	base := r.Commit("initial", testrepo.Small)
	tasks := []eval.Task{{ID: "shop-1", Repo: "acme/shop", BaseCommit: base, Query: "Fix Cart.Total for empty carts: price lookups and login sessions", GoldFiles: []string{"cart/cart.go"}}}
	var dump bytes.Buffer
	rep, err := eval.Run(context.Background(), tasks, eval.Options{
		GitDirs:  map[string]string{"acme/shop": r.Bare()},
		Store:    blob.NewMem(),
		Configs:  append(eval.DefaultConfigs()[:1], cs...),
		Features: &dump,
	})
	if err != nil {
		t.Fatal(err)
	}
	shipped, smallFirst := rep.Tasks["shipped"][0], rep.Tasks["small first"][0]
	if shipped.R1 != 1 {
		t.Errorf("shipped model: gold not first: %+v", shipped)
	}
	if len(smallFirst.Top) < 2 || smallFirst.Top[0] == shipped.Top[0] {
		t.Errorf("the config's model did not rerank: shipped %v, small first %v", shipped.Top, smallFirst.Top)
	}
	lines := strings.Split(strings.TrimSpace(dump.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d dump lines, want one per task and config", len(lines))
	}
	var d eval.FeatureDump
	if err := json.Unmarshal([]byte(lines[1]), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Files) <= 2 || len(d.Files) > eval.FeatureDepth {
		t.Errorf("dump of the depth-2 model holds %d files, want more than 2 (up to %d)", len(d.Files), eval.FeatureDepth)
	}
	// The gold file's first-stage rank: cart/cart.go is the fused
	// ranking's top file here (the shipped model keeps it first).
	if d.Pool < len(d.Files) || len(d.GoldRanks) != 1 || d.GoldRanks[0] < 1 || d.GoldRanks[0] > d.Pool {
		t.Errorf("pool %d, gold ranks %v: want the gold file's rank in the fused ranking of at least %d files", d.Pool, d.GoldRanks, len(d.Files))
	}
	if d.Files[d.GoldRanks[0]-1].Path != "cart/cart.go" {
		t.Errorf("gold rank %d names %s, want cart/cart.go (dump in RRF order)", d.GoldRanks[0], d.Files[d.GoldRanks[0]-1].Path)
	}
	for _, l := range query.DeepLists {
		if r := d.Deep[l]; len(r) != 1 {
			t.Errorf("deep list %s: gold ranks %v, want one", l, r)
		}
	}
	if r := d.Deep["bm25-file"]; len(r) == 1 && r[0] < 1 {
		t.Errorf("cart/cart.go absent from the deep whole-file BM25 list: %v", r)
	}
	// Graph links among the dumped files: cart/cart.go imports
	// price/price.go, and every link is seen from both ends.
	at := map[string]int{}
	for i, f := range d.Files {
		at[f.Path] = i
	}
	c, okc := at["cart/cart.go"]
	p, okp := at["price/price.go"]
	if !okc || !okp {
		t.Fatalf("cart.go and price.go not both dumped: %v", at)
	}
	if !slices.Contains(d.Files[c].Out, p) || !slices.Contains(d.Files[p].In, c) {
		t.Errorf("cart.go out %v, price.go in %v: want the import edge cart -> price", d.Files[c].Out, d.Files[p].In)
	}
	for i, f := range d.Files {
		for _, j := range f.Out {
			if j == i || j < 0 || j >= len(d.Files) || !slices.Contains(d.Files[j].In, i) {
				t.Errorf("%s links to %d, which does not link back", f.Path, j)
			}
		}
	}
	// The gold file is itself the top file; its best-ranked neighbour
	// among the top files is price.go.
	if len(d.GoldNear) != 1 || d.GoldNear[0] != p+1 {
		t.Errorf("gold near %v, want [%d] (price.go's rank)", d.GoldNear, p+1)
	}
}

// cartTask is a repository whose merge commit changes one line of
// cart.go's Empty, and its task; before is cart.go at the base commit.
func cartTask(t *testing.T) (r *testrepo.Repo, tasks []eval.Task, before string) {
	t.Helper()
	r = testrepo.New(t)
	var body strings.Builder
	body.WriteString("package cart\n")
	for _, name := range []string{"Total", "Add", "Remove", "Clear", "Count", "Empty"} {
		body.WriteString("\n// " + name + " does the cart's " + strings.ToLower(name) + ".\nfunc " + name + "(items []int) int {\n\tn := 0\n\tfor _, it := range items {\n\t\tn += it\n\t}\n\treturn n\n}\n")
	}
	before = body.String()
	base := r.Commit("initial", map[string]string{"go.mod": "module example.com/cart\n\ngo 1.22\n", "cart/cart.go": before})
	after := strings.Replace(before, "func Empty(items []int) int {\n\tn := 0", "func Empty(items []int) int {\n\tn := len(items)", 1)
	merge := r.Commit("fix Empty", map[string]string{"cart/cart.go": after})
	tasks = []eval.Task{{ID: "cart-1", Repo: "acme/cart", BaseCommit: base, MergeCommit: merge,
		Query: "Empty returns the wrong count for an empty cart", GoldFiles: []string{"cart/cart.go"}, Language: "go"}}
	return r, tasks, before
}

// A task with its merge commit is scored on the changed lines too: the
// share of the lines the PR changed that the pack shows whole.
func TestRunChangedLines(t *testing.T) {
	r, tasks, _ := cartTask(t)
	rep, err := eval.Run(context.Background(), tasks, eval.Options{
		GitDirs: map[string]string{"acme/cart": r.Bare()},
		Store:   blob.NewMem(),
		Budgets: []int{4000},
		Configs: []eval.Config{{Name: "full", Route: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Overall {
		if s.LineTasks != 1 || s.Lines[4000] != 1 {
			t.Errorf("%s: %d tasks with lines, lines@4k %v; want the changed line shown", s.Config, s.LineTasks, s.Lines[4000])
		}
	}
	if table := eval.FormatTable(rep.Overall, []int{4000}); !strings.Contains(table, "L@4k") {
		t.Errorf("table without the changed lines:\n%s", table)
	}
}

// --chunk-features writes, for a gold file among the top files, its
// chunks with their features and the changed lines each holds, also with
// --rank-only (no budgets); a chunk model in a configuration is loaded
// and checked against the chunk features.
func TestRunChunkFeatures(t *testing.T) {
	r, tasks, before := cartTask(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "chunk.json")
	if err := os.WriteFile(model, []byte(`{"kind":"linear","features":["log_lines","cover"],"mean":[0,0],"scale":[1,1],"weights":[1,1]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cs, err := eval.ReadConfigs(strings.NewReader(`[{"name":"chunks","route":true,"chunk_model":"` + model + `"}]`))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := eval.Run(context.Background(), tasks, eval.Options{
		GitDirs: map[string]string{"acme/cart": r.Bare()}, Store: blob.NewMem(), RankOnly: true,
		Configs: cs, ChunkFeatures: &out,
	}); err != nil {
		t.Fatal(err)
	}
	var d eval.ChunkDump
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if d.Task != "cart-1" || d.Path != "cart/cart.go" || d.Rank != 1 || d.Changed != 1 || !slices.Equal(d.Names, query.ChunkFeatureNames) {
		t.Errorf("dump %+v", d)
	}
	hit := 0
	for _, c := range d.Chunks {
		if len(c.X) != len(d.Names) {
			t.Errorf("chunk %d-%d: %d features", c.Start, c.End, len(c.X))
		}
		if c.Hits > 0 {
			hit++
			if c.Hits != 1 || !strings.Contains(strings.Join(strings.Split(before, "\n")[c.Start-1:c.End], "\n"), "func Empty") {
				t.Errorf("chunk %d-%d holds %d changed lines, want Empty's one", c.Start, c.End, c.Hits)
			}
		}
	}
	if hit != 1 {
		t.Errorf("%d chunks hold the changed line, want 1: %+v", hit, d.Chunks)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"kind":"linear","features":["rr_bm25-file","log_size"],"mean":[0,0],"scale":[1,1],"weights":[1,1]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := eval.ReadConfigs(strings.NewReader(`[{"name":"a","chunk_model":"` + bad + `"}]`)); err == nil || !strings.Contains(err.Error(), "log_size") {
		t.Errorf("a file model as a chunk model: %v, want an error naming log_size", err)
	}
}

// TestRunOrg: an org-wide run searches the other repositories beside the
// task's, names each ranked file by repository, and counts only the task
// repository's file as gold, though the other holds the same path; the
// whole-file baseline ranks both repositories' files as one collection.
func TestRunOrg(t *testing.T) {
	shop := testrepo.New(t)
	base := shop.Commit("initial", testrepo.Small)
	other := testrepo.New(t)
	other.Commit("initial", map[string]string{
		"cart/cart.go": "package cart\n\n// Total of an empty cart is zero; the cart sums its items.\nfunc Total(items []int) int { return 0 }\n",
	})
	tasks := []eval.Task{{ID: "shop-1", Repo: "acme/shop", BaseCommit: base, Query: "Fix Cart.Total for empty carts", GoldFiles: []string{"cart/cart.go"}, Language: "go"}}
	opt := eval.Options{
		GitDirs: map[string]string{"acme/shop": shop.Bare(), "acme/other": other.Bare()},
		Store:   blob.NewMem(),
		Budgets: []int{4000},
		Configs: []eval.Config{{Name: "baseline", Baseline: true}, {Name: "gated", Route: true}, {Name: "score", Route: true, Merge: query.MergeScore}},
		Org:     true,
	}
	rep, err := eval.Run(context.Background(), tasks, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"baseline", "gated", "score"} {
		r := rep.Tasks[c][0]
		var repos []string
		for _, p := range r.Top {
			repo, _, ok := strings.Cut(p, ":")
			if !ok {
				t.Fatalf("%s: top file %q is not repo:path", c, p)
			}
			repos = append(repos, repo)
		}
		if !slices.Contains(repos, "acme/other") || !slices.Contains(repos, "acme/shop") {
			t.Errorf("%s: top files %v, want both repositories'", c, r.Top)
		}
		gold := slices.Index(r.Top, "acme/shop:cart/cart.go")
		if gold < 0 || r.MRR != 1/float64(gold+1) || r.Recall[4000] != 1 {
			t.Errorf("%s: top %v, MRR %v, recall %v: want the MRR of acme/shop:cart/cart.go and its recall", c, r.Top, r.MRR, r.Recall)
		}
	}
	opt.Features = new(bytes.Buffer)
	if _, err := eval.Run(context.Background(), tasks, opt); err == nil {
		t.Error("an org-wide run with a feature dump succeeded")
	}
	if _, err := eval.ReadConfigs(strings.NewReader(`[{"name":"x","merge":"gated"}]`)); err == nil {
		t.Error(`ReadConfigs took merge "gated"`)
	}
}
