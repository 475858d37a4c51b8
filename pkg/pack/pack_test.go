package pack

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"codectx/pkg/tokens"
)

const commit = "0123456789abcdef0123456789abcdef01234567"

func cand(path string, start, end int, score float64, body string) Candidate {
	return Candidate{
		Repo: "acme/app", Commit: commit, Path: path, StartLine: start, EndLine: end,
		Symbol: fmt.Sprintf("f%d", start), Kind: "function",
		Signature: fmt.Sprintf("func f%d()", start), Doc: "f does things.",
		Body: body, Score: score, Signals: []string{"bm25"},
	}
}

func bigBody(n int) string {
	return strings.Repeat("\tx := compute(x, y) // step\n", n)
}

// check asserts the invariants every result must satisfy, against the
// budget the caller asked for (not the one the result reports).
func check(t *testing.T, r Result, asked int, count func(string) int) {
	t.Helper()
	out := r.Render()
	n := count(out)
	if r.Budget != asked {
		t.Fatalf("result reports budget %d, asked for %d", r.Budget, asked)
	}
	if asked <= 0 && (out != "" || len(r.Chunks) != 0) {
		t.Fatalf("budget %d: got output %q", asked, out)
	}
	if n > asked && asked >= 0 {
		t.Fatalf("Count(Render()) = %d > asked budget %d", n, asked)
	}
	if r.Tokens != n {
		t.Fatalf("Tokens = %d, Count(Render()) = %d", r.Tokens, n)
	}
	for _, p := range r.Chunks {
		if !strings.Contains(out, p.Text) {
			t.Fatalf("chunk text %q not in render", p.Text)
		}
		if got := count(p.Text); got != p.Tokens {
			t.Fatalf("chunk Tokens = %d, Count(Text) = %d", p.Tokens, got)
		}
		if !strings.HasPrefix(p.Text, "// "+OneLine(Provenance(p.Candidate))) {
			t.Fatalf("chunk text %q does not start with its provenance header", p.Text)
		}
	}
}

func paths(r Result) []string {
	var out []string
	for _, p := range r.Chunks {
		out = append(out, fmt.Sprintf("%s#%d", p.Path, p.StartLine))
	}
	return out
}

func TestProvenance(t *testing.T) {
	tests := []struct {
		c    Candidate
		want string
	}{
		{Candidate{Repo: "acme/app", Commit: commit, Path: "a/b.go", StartLine: 10, EndLine: 42}, "acme/app@0123456789ab:a/b.go#L10-42"},
		{Candidate{Repo: "r", Commit: "abc", Path: "x.py", StartLine: 1, EndLine: 1}, "r@abc:x.py#L1-1"},
		{Candidate{Path: "x"}, "@:x#L0-0"},
	}
	for _, tt := range tests {
		if got := Provenance(tt.c); got != tt.want {
			t.Errorf("Provenance(%+v) = %q, want %q", tt.c, got, tt.want)
		}
	}
}

func TestHeader(t *testing.T) {
	c := Candidate{Repo: "acme/app", Commit: commit, Path: "a.go", StartLine: 10, EndLine: 42, Symbol: "(*R).Mount", Kind: "method"}
	tests := []struct {
		signals []string
		g       Granularity
		sym     string
		want    string
	}{
		{[]string{"bm25", "graph"}, Full, c.Symbol, "// acme/app@0123456789ab:a.go#L10-42 (*R).Mount (method) [bm25,graph]"},
		{[]string{"bm25"}, Stub, c.Symbol, "// acme/app@0123456789ab:a.go#L10-42 (*R).Mount (method, stub) [bm25]"},
		{nil, Full, "", "// acme/app@0123456789ab:a.go#L10-42 (method)"},
		{nil, Full, "a\nb", "// acme/app@0123456789ab:a.go#L10-42 a b (method)"},
	}
	for _, tt := range tests {
		c := c
		c.Symbol = tt.sym
		if got := Header(c, tt.signals, tt.g); got != tt.want {
			t.Errorf("Header(%q, %v, %s) = %q, want %q", tt.sym, tt.signals, tt.g, got, tt.want)
		}
	}
}

func TestPackGranularity(t *testing.T) {
	c := cand("a.go", 10, 40, 1, "// f does things.\nfunc f10() {\n"+bigBody(30)+"}\n")
	full := fullString(c, c.Signals)
	stub, head, rest := stubText(c, c.Signals, true)
	if head != Header(c, c.Signals, Stub) || head+rest != stub {
		t.Fatalf("stubText parts %q + %q, want the header %q and the rest of %q", head, rest, Header(c, c.Signals, Stub), stub)
	}
	sig, _, _ := stubText(c, c.Signals, false)
	sep := tokens.Count(Sep)
	tests := []struct {
		name    string
		budget  int
		want    Granularity
		text    string
		dropped int
	}{
		{"fits full", tokens.Count(full) + sep, Full, full, 0},
		{"degrades to stub", tokens.Count(full) - 1, Stub, stub, 0},
		{"degrades to signature", tokens.Count(stub) - 1, Stub, sig, 0},
		{"skip", tokens.Count(sig) - 1, "", "", 1},
		{"zero budget", 0, "", "", 1},
		{"negative budget", -5, "", "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Pack([]Candidate{c}, Options{Budget: tt.budget})
			check(t, r, tt.budget, tokens.Count)
			if r.Dropped != tt.dropped {
				t.Errorf("Dropped = %d, want %d", r.Dropped, tt.dropped)
			}
			if tt.want == "" {
				if len(r.Chunks) != 0 {
					t.Fatalf("got %d chunks, want none", len(r.Chunks))
				}
				return
			}
			if len(r.Chunks) != 1 {
				t.Fatalf("got %d chunks, want 1", len(r.Chunks))
			}
			got := r.Chunks[0]
			if got.Granularity != tt.want || got.Text != tt.text {
				t.Errorf("got %s %q, want %s %q", got.Granularity, got.Text, tt.want, tt.text)
			}
			if r.Render() != tt.text {
				t.Errorf("Render = %q, want %q", r.Render(), tt.text)
			}
		})
	}
	if !strings.Contains(stub, "\n// f does things.\nfunc f10()") || strings.Contains(sig, "does things") {
		t.Errorf("stub %q / signature stub %q: wrong shape", stub, sig)
	}
}

func TestPackDedup(t *testing.T) {
	big := 1000000
	tests := []struct {
		name    string
		cands   []Candidate
		budget  int
		want    []string // path#start in output order
		signals [][]string
		deduped int
	}{
		{
			name:    "partial overlap keeps the stronger",
			cands:   []Candidate{cand("a.go", 1, 20, 0.5, "low"), cand("a.go", 10, 30, 0.9, "high")},
			budget:  big,
			want:    []string{"a.go#10"},
			signals: [][]string{{"bm25"}},
			deduped: 1,
		},
		{
			name: "contained weaker is folded into the stronger container",
			cands: []Candidate{
				cand("a.go", 1, 50, 0.9, "container"),
				{Repo: "acme/app", Commit: commit, Path: "a.go", StartLine: 5, EndLine: 9, Body: "inner", Score: 0.2, Signals: []string{"graph"}},
			},
			budget:  big,
			want:    []string{"a.go#1"},
			signals: [][]string{{"bm25", "graph"}},
			deduped: 1,
		},
		{
			name: "stronger contained is merged into the container",
			cands: []Candidate{
				{Repo: "acme/app", Commit: commit, Path: "a.go", StartLine: 5, EndLine: 9, Body: "inner", Score: 0.9, Signals: []string{"graph"}},
				cand("a.go", 1, 50, 0.3, "container"),
			},
			budget:  big,
			want:    []string{"a.go#1"},
			signals: [][]string{{"graph", "bm25"}},
			deduped: 1,
		},
		{
			name:    "other files and disjoint ranges are kept",
			cands:   []Candidate{cand("a.go", 1, 5, 0.9, "x"), cand("a.go", 6, 9, 0.8, "y"), cand("b.go", 1, 5, 0.7, "z")},
			budget:  big,
			want:    []string{"a.go#1", "a.go#6", "b.go#1"},
			signals: [][]string{{"bm25"}, {"bm25"}, {"bm25"}},
		},
		{
			name:    "exact duplicate",
			cands:   []Candidate{cand("a.go", 1, 5, 0.9, "x"), cand("a.go", 1, 5, 0.9, "x")},
			budget:  big,
			want:    []string{"a.go#1"},
			signals: [][]string{{"bm25"}},
			deduped: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Pack(tt.cands, Options{Budget: tt.budget})
			check(t, r, tt.budget, tokens.Count)
			if got := paths(r); !slices.Equal(got, tt.want) {
				t.Errorf("chunks = %v, want %v", got, tt.want)
			}
			for i, p := range r.Chunks {
				if i < len(tt.signals) && !slices.Equal(p.Signals, tt.signals[i]) {
					t.Errorf("chunk %d signals = %v, want %v", i, p.Signals, tt.signals[i])
				}
			}
			if r.Deduped != tt.deduped {
				t.Errorf("Deduped = %d, want %d", r.Deduped, tt.deduped)
			}
		})
	}
}

func TestPackMergedFallsBackToInner(t *testing.T) {
	inner := cand("a.go", 20, 24, 0.9, "func inner() {}")
	outer := cand("a.go", 1, 400, 0.3, "type T struct{}\n"+bigBody(400))
	outer.Symbol, outer.Signature, outer.Doc = "T", "type T struct", ""
	it := &item{main: outer, best: &inner, score: 0.9, signals: []string{"bm25"}}
	want := fullString(inner, it.signals)
	r := Pack([]Candidate{inner, outer}, Options{Budget: tokens.Count(want) + 1})
	check(t, r, tokens.Count(want)+1, tokens.Count)
	if len(r.Chunks) != 1 || r.Chunks[0].Text != want || r.Chunks[0].Granularity != Full {
		t.Fatalf("got %+v, want the inner chunk in full: %q", r.Chunks, want)
	}
	if r.Chunks[0].Score != 0.9 {
		t.Errorf("Score = %v, want merged 0.9", r.Chunks[0].Score)
	}
}

func TestPackOrder(t *testing.T) {
	var cs []Candidate
	for i, p := range []string{"a", "b", "c", "d", "e"} {
		cs = append(cs, cand(p+".go", 100, 110, 1-float64(i)/10, "body "+p))
	}
	cs = append(cs, cand("a.go", 1, 5, 0.1, "weak but earlier in file"))
	r := Pack(cs, Options{Budget: 100000})
	check(t, r, 100000, tokens.Count)
	want := []string{"a.go#1", "a.go#100", "c.go#100", "e.go#100", "d.go#100", "b.go#100"}
	if got := paths(r); !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
	wantRender := strings.Join([]string{r.Chunks[0].Text, r.Chunks[1].Text, r.Chunks[2].Text, r.Chunks[3].Text, r.Chunks[4].Text, r.Chunks[5].Text}, Sep)
	if r.Render() != wantRender {
		t.Errorf("Render = %q, want %q", r.Render(), wantRender)
	}
	r = Pack(cs, Options{Budget: 100000, Ranked: true})
	check(t, r, 100000, tokens.Count)
	want = []string{"a.go#1", "a.go#100", "b.go#100", "c.go#100", "d.go#100", "e.go#100"}
	if got := paths(r); !slices.Equal(got, want) {
		t.Errorf("ranked order = %v, want %v", got, want)
	}
}

func TestPackOptions(t *testing.T) {
	a1 := cand("a.go", 1, 5, 0.9, bigBody(20))
	a2 := cand("a.go", 10, 15, 0.8, bigBody(20))
	b1 := cand("b.go", 1, 5, 0.5, bigBody(20))
	two := tokens.Count(fullString(a1, a1.Signals)) + tokens.Count(fullString(a2, a2.Signals)) + 2*tokens.Count(Sep)
	tests := []struct {
		name    string
		opt     Options
		want    []string
		dropped int
	}{
		{"score order", Options{Budget: two}, []string{"a.go#1", "a.go#10"}, 1},
		{"file first", Options{Budget: two, FileFirst: true}, []string{"a.go#1", "b.go#1"}, 1},
		{"max per file", Options{Budget: 100000, MaxPerFile: 1}, []string{"a.go#1", "b.go#1"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Pack([]Candidate{b1, a2, a1}, tt.opt)
			check(t, r, tt.opt.Budget, tokens.Count)
			if got := paths(r); !slices.Equal(got, tt.want) {
				t.Errorf("chunks = %v, want %v", got, tt.want)
			}
			if r.Dropped != tt.dropped {
				t.Errorf("Dropped = %d, want %d", r.Dropped, tt.dropped)
			}
		})
	}
}

func TestPackPreamble(t *testing.T) {
	c := cand("a.go", 1, 5, 1, "func f() {}")
	pre := "Context for: how does f work?"
	r := Pack([]Candidate{c}, Options{Budget: 10000, Preamble: pre})
	check(t, r, 10000, tokens.Count)
	if want := pre + Sep + r.Chunks[0].Text; r.Render() != want {
		t.Errorf("Render = %q, want %q", r.Render(), want)
	}
	r = Pack([]Candidate{c}, Options{Budget: tokens.Count(pre) + 2, Preamble: pre})
	check(t, r, tokens.Count(pre)+2, tokens.Count)
	if r.Render() != pre || r.Dropped != 1 {
		t.Errorf("tight budget: Render = %q, Dropped = %d; want the preamble alone, 1 dropped", r.Render(), r.Dropped)
	}
	r = Pack([]Candidate{c}, Options{Budget: 3, Preamble: strings.Repeat("long preamble ", 10)})
	check(t, r, 3, tokens.Count)
	if r.Preamble != "" {
		t.Errorf("oversized preamble emitted: %q", r.Preamble)
	}
}

// sepHeavy is a counter that is far from additive: each separator in the
// text costs 50 tokens, though Count(Sep) alone says 1. Pack must still
// keep the render within budget, by its final check.
func sepHeavy(s string) int {
	if s == Sep {
		return 1
	}
	return tokens.Count(s) + 50*strings.Count(s, Sep)
}

func TestPackNonAdditiveCounter(t *testing.T) {
	var cs []Candidate
	for i := range 10 {
		cs = append(cs, cand(fmt.Sprintf("f%d.go", i), 1, 3, float64(10-i), "x"))
	}
	r := Pack(cs, Options{Budget: 300, Count: sepHeavy})
	check(t, r, 300, sepHeavy)
	if len(r.Chunks) == 0 || r.Dropped == 0 {
		t.Errorf("got %d chunks, %d dropped; want the final check to trim some", len(r.Chunks), r.Dropped)
	}
	if got, want := len(r.Chunks)+r.Dropped, 10; got != want {
		t.Errorf("chunks+dropped = %d, want %d", got, want)
	}
}

var alphabet = []string{
	"a", "Z", "func", " ", "\t", "\n", "\r\n", "{", "}", "//", "日本語", "é", "\u0301", "😀", "\xff",
	"123", "'s", "\"", " \n", "\u2028", "<|endoftext|>", "\n\n",
}

func randString(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(alphabet[r.Intn(len(alphabet))])
	}
	return b.String()
}

func randCands(r *rand.Rand) []Candidate {
	n := r.Intn(25)
	cs := make([]Candidate, n)
	for i := range cs {
		start := r.Intn(60) - 2
		c := Candidate{
			Repo: []string{"acme/app", "x/y", ""}[r.Intn(3)], Commit: commit[:r.Intn(41)],
			Path:      []string{"a.go", "b/c.py", "日本.rs", "d\n.ts"}[r.Intn(4)],
			StartLine: start, EndLine: start + r.Intn(30) - 3,
			Symbol: randString(r, r.Intn(3)), Kind: []string{"function", "", "window"}[r.Intn(3)],
			Signature: randString(r, r.Intn(8)), Doc: randString(r, r.Intn(20)),
			Score: r.NormFloat64(), Signals: []string{"bm25", "graph", "vector"}[:r.Intn(4)],
		}
		switch r.Intn(25) {
		case 0, 1:
			c.Body = ""
		case 2:
			c.Body = bigBody(500 + r.Intn(1000)) // ~7k-21k tokens
		case 3, 4:
			c.Score = math.NaN()
			fallthrough
		default:
			c.Body = randString(r, r.Intn(400))
		}
		cs[i] = c
	}
	return cs
}

func TestPackProperty(t *testing.T) {
	r := rand.New(rand.NewSource(42))
	for i := range 500 {
		cs := randCands(r)
		opt := Options{Budget: r.Intn(20001), MaxPerFile: r.Intn(3), FileFirst: r.Intn(2) == 0,
			Lead: r.Intn(4), Deep: r.Intn(3), DeepShare: r.Float64() / 2, TailStubs: r.Intn(2) == 0}
		switch r.Intn(5) {
		case 0:
			opt.Budget = -r.Intn(10)
		case 1:
			opt.Budget = r.Intn(40)
		}
		if r.Intn(3) == 0 {
			opt.Preamble = randString(r, r.Intn(50))
		}
		res := Pack(cs, opt)
		t.Run(fmt.Sprint(i), func(t *testing.T) { check(t, res, opt.Budget, tokens.Count) })
		if got := len(res.Chunks) + res.Dropped + res.Deduped; got != len(cs) {
			t.Fatalf("case %d: chunks %d + dropped %d + deduped %d != %d candidates",
				i, len(res.Chunks), res.Dropped, res.Deduped, len(cs))
		}
	}
}

func FuzzPack(f *testing.F) {
	f.Add("func f() {\n\treturn 1\n}\n", 100, uint8(3), false)
	f.Add("", 0, uint8(1), true)
	f.Add("日本語\xff\u0301 \n \n\t// doc\n", 7, uint8(9), true)
	f.Add(strings.Repeat("x := y\n", 200), 20000, uint8(255), false)
	f.Add("<|endoftext|>\r\n\r\n}", -1, uint8(4), false)
	f.Fuzz(func(t *testing.T, data string, budget int, n uint8, fileFirst bool) {
		if len(data) > 1<<16 {
			return
		}
		var cs []Candidate
		for i := range int(n%8) + 1 {
			// Slice data differently for each candidate so they overlap,
			// collide and differ.
			a, b := 0, len(data)
			if len(data) > 0 {
				a = (i * 7) % len(data)
				b = a + (len(data)-a)/(i+1)
			}
			part := data[a:b]
			cs = append(cs, Candidate{
				Repo: "r", Commit: part[:min(len(part), 3)], Path: fmt.Sprintf("p%d", i%3),
				StartLine: a % 50, EndLine: a%50 + i,
				Symbol: part[:min(len(part), 5)], Kind: "function",
				Signature: part[:len(part)/3], Doc: part[len(part)/3 : len(part)/2], Body: part,
				Score: float64(len(part)%7) - float64(i), Signals: []string{"bm25"},
			})
		}
		res := Pack(cs, Options{Budget: budget % 30000, FileFirst: fileFirst, MaxPerFile: int(n % 3), Preamble: data[:min(len(data), 10)],
			Lead: int(n>>3) % 3, Deep: int(n>>5) % 2, DeepShare: float64(n>>6) / 4, TailStubs: n&4 != 0})
		check(t, res, budget%30000, tokens.Count)
	})
}

func BenchmarkPack(b *testing.B) {
	r := rand.New(rand.NewSource(7))
	cs := make([]Candidate, 200)
	for i := range cs {
		start := r.Intn(2000)
		cs[i] = cand(fmt.Sprintf("pkg%d/file%d.go", i%17, i%40), start, start+10+r.Intn(60), r.Float64(), bigBody(5+r.Intn(60)))
	}
	for b.Loop() {
		Pack(cs, Options{Budget: 8000})
	}
}

// fullString is the full rendering's text.
func fullString(c Candidate, signals []string) string {
	head, body := fullText(c, signals)
	return head + body
}

// TestRenderingSame checks that renderings compare by their joined text,
// wherever the text is split between head and body.
func TestRenderingSame(t *testing.T) {
	r := func(head, body string) rendering { return rendering{head: head, body: body} }
	tests := []struct {
		a, b rendering
		want bool
	}{
		{r("// h\n", "body"), r("// h\n", "body"), true},
		{r("// h\nbody", ""), r("// h\n", "body"), true},
		{r("// h", "\nbody"), r("// h\nbo", "dy"), true},
		{r("", ""), r("", ""), true},
		{r("// h\n", "body"), r("// h\n", "bodY"), false},
		{r("// h\n", "body"), r("// H\n", "body"), false},
		{r("// h\n", "body"), r("// h\n", "body "), false},
		{r("// h\nbody", ""), r("// h\n", "bodx"), false},
	}
	for _, tt := range tests {
		for _, pair := range [][2]rendering{{tt.a, tt.b}, {tt.b, tt.a}} {
			if got := pair[0].same(pair[1]); got != tt.want {
				t.Errorf("(%q+%q).same(%q+%q) = %v, want %v", pair[0].head, pair[0].body, pair[1].head, pair[1].body, got, tt.want)
			}
		}
	}
}

// TestPackPrep checks that candidates carrying a Prep pack exactly as
// those without: the same chunks, texts, counts and drops, for Preps
// shared across many packs (their tails remember counts from earlier
// budgets).
func TestPackPrep(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for i := range 300 {
		cs := randCands(r)
		with := make([]Candidate, len(cs))
		for j, c := range cs {
			c.Prep = NewPrep(c, nil)
			with[j] = c
		}
		for range 4 {
			opt := Options{Budget: r.Intn(3000), MaxPerFile: r.Intn(3), FileFirst: r.Intn(2) == 0, Ranked: r.Intn(2) == 0}
			if r.Intn(4) == 0 {
				opt.Budget = r.Intn(60)
			}
			want, got := Pack(cs, opt), Pack(with, opt)
			for j := range got.Chunks {
				got.Chunks[j].Prep = nil
			}
			// Printed, not DeepEqual: NaN scores are equal as text.
			if g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want); g != w {
				t.Fatalf("case %d, %+v: with Preps\n%s\nwithout\n%s", i, opt, g, w)
			}
		}
	}
}

// TestPackResultsOwnTheirText packs candidate sets with Preps, then packs
// many more (which write the pooled header buffers again) and checks that
// the first results still read as they did: no text a pack returns may
// point into its header buffer (a header with an empty body, joined with
// +, is the header's own bytes).
func TestPackResultsOwnTheirText(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	type kept struct {
		res  Result
		text string
	}
	var first []kept
	for i := range 600 {
		cs := randCands(r)
		for j := range cs {
			cs[j].Prep = NewPrep(cs[j], nil)
		}
		res := Pack(cs, Options{Budget: 200 + r.Intn(3000), FileFirst: r.Intn(2) == 0})
		if i < 200 {
			first = append(first, kept{res, strings.Clone(fmt.Sprintf("%+v", res))})
		}
	}
	for i, k := range first {
		if got := fmt.Sprintf("%+v", k.res); got != k.text {
			t.Fatalf("result %d changed after later packs:\n%s\nwas\n%s", i, got, k.text)
		}
	}
}

// TestPackPrepLongRanking packs long rankings of ASCII candidates (the
// query engine's case: most of them cannot fit once the budget is nearly
// spent, and the Preps' bounds drop them unrendered) with and without
// Preps, at budgets from tiny to ample: identical results.
func TestPackPrepLongRanking(t *testing.T) {
	r := rand.New(rand.NewSource(17))
	word := func() string {
		return []string{"value", "Func", "ssa", "rewrite", "x", "n", "ir.Name", "(*Func).newValue", "types2", "_", "42"}[r.Intn(11)]
	}
	for i := range 120 {
		n := 50 + r.Intn(350)
		cs := make([]Candidate, n)
		for j := range cs {
			start := 1 + r.Intn(2000)
			c := Candidate{
				Repo: "go/compile", Commit: commit[:r.Intn(41)],
				Path:      []string{"ssa/rewrite.go", "ir/name.go", "escape/escape.go", "a.go", "inline/inl.go"}[r.Intn(5)],
				StartLine: start, EndLine: start + r.Intn(80) - 2,
				Kind:  []string{"function", "method", "window", ""}[r.Intn(4)],
				Score: r.Float64(), Signals: []string{"bm25", "graph", "symbol"}[:r.Intn(4)],
			}
			if r.Intn(4) > 0 {
				c.Symbol = word() + "." + word()
			}
			if r.Intn(3) > 0 {
				c.Signature = "func " + word() + "(" + word() + " int) " + word()
			}
			if r.Intn(2) == 0 {
				c.Doc = word() + " " + word() + " does " + word() + ".\n" + word()
			}
			var body strings.Builder
			for range r.Intn(60) {
				body.WriteString(word())
				body.WriteString([]string{" ", "\n\t", "(", ")\n", " = ", "\n"}[r.Intn(6)])
			}
			c.Body = body.String()
			if r.Intn(40) == 0 {
				c.Body = "é " + c.Body // not ASCII: no bound
			}
			cs[j] = c
		}
		with := make([]Candidate, n)
		for j, c := range cs {
			c.Prep = NewPrep(c, nil)
			with[j] = c
		}
		for range 3 {
			opt := Options{Budget: 50 + r.Intn(8000), FileFirst: r.Intn(2) == 0, Ranked: r.Intn(2) == 0, MaxPerFile: r.Intn(4)}
			want, got := Pack(cs, opt), Pack(with, opt)
			for j := range got.Chunks {
				got.Chunks[j].Prep = nil
			}
			if g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want); g != w {
				t.Fatalf("case %d, %+v: with Preps\n%s\nwithout\n%s", i, opt, g, w)
			}
		}
	}
}

// TestPackTextIsRender checks PackText's text against the result's own
// Render, at budgets that drop the preamble or everything.
func TestPackTextIsRender(t *testing.T) {
	r := rand.New(rand.NewSource(23))
	for i := range 400 {
		cs := randCands(r)
		opt := Options{Budget: r.Intn(4000) - 5, FileFirst: r.Intn(2) == 0, Preamble: []string{"", "Context:", strings.Repeat("pre ", 50)}[r.Intn(3)]}
		if r.Intn(3) == 0 {
			opt.Count = func(s string) int { return (len(s) + 3) / 4 }
		}
		res, text := PackText(cs, opt)
		if w := res.Render(); text != w {
			t.Fatalf("case %d: PackText's text\n%q\nRender\n%q", i, text, w)
		}
	}
}

// The breadth pass leads with depth where the answer most likely is: the
// top file's best chunks whole, then the other files' best chunks as
// stubs, each made whole at the end where it then fits, in score order.
func TestPackLeadDeepTailStubs(t *testing.T) {
	a1 := cand("a.go", 1, 5, 0.9, bigBody(20))
	a2 := cand("a.go", 10, 15, 0.8, bigBody(20))
	b1 := cand("b.go", 1, 5, 0.5, bigBody(20))
	c1 := cand("c.go", 1, 5, 0.4, bigBody(20))
	d1 := cand("d.go", 1, 5, 0.3, bigBody(20))
	cs := []Candidate{d1, c1, b1, a2, a1}
	sep := tokens.Count(Sep)
	full := func(c Candidate) int { return tokens.Count(fullString(c, c.Signals)) }
	stub := func(c Candidate) int {
		r := Pack([]Candidate{c}, Options{Budget: full(c) - 1})
		if len(r.Chunks) != 1 || r.Chunks[0].Granularity != Stub {
			t.Fatalf("no stub of %s: %+v", c.Path, r.Chunks)
		}
		return r.Chunks[0].Tokens
	}
	lead := Options{FileFirst: true, Lead: 1, Deep: 1, DeepShare: 1, TailStubs: true}
	tight := full(a1) + full(a2) + stub(b1) + stub(c1) + stub(d1) + 5*sep
	shown := func(r Result) []string {
		var out []string
		for _, p := range r.Chunks {
			out = append(out, fmt.Sprintf("%s#%d %s", p.Path, p.StartLine, p.Granularity))
		}
		return out
	}
	tests := []struct {
		name string
		opt  Options
		want []string
	}{
		{"breadth first spends the budget on other files' bodies", Options{Budget: tight, FileFirst: true},
			[]string{"a.go#1 full", "a.go#10 stub", "b.go#1 full", "c.go#1 stub", "d.go#1 stub"}},
		{"the top file whole, every other file's signature", with(lead, tight),
			[]string{"a.go#1 full", "a.go#10 full", "b.go#1 stub", "c.go#1 stub", "d.go#1 stub"}},
		{"a stub made whole where it then fits, best first", with(lead, tight+full(b1)-stub(b1)),
			[]string{"a.go#1 full", "a.go#10 full", "b.go#1 full", "c.go#1 stub", "d.go#1 stub"}},
		{"room for all: every body", with(lead, 100000),
			[]string{"a.go#1 full", "a.go#10 full", "b.go#1 full", "c.go#1 full", "d.go#1 full"}},
		// Room for the top file's two bodies only: depth takes them before
		// any other file's stub, if its share lets it.
		{"depth within its share", with(lead, full(a1)+full(a2)+2*sep),
			[]string{"a.go#1 full", "a.go#10 full"}},
		{"no depth without a share", with(Options{FileFirst: true, Lead: 1, Deep: 1, TailStubs: true}, full(a1)+full(a2)+2*sep),
			[]string{"a.go#1 full", "a.go#10 stub", "b.go#1 stub", "c.go#1 stub", "d.go#1 stub"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Pack(cs, tt.opt)
			check(t, r, tt.opt.Budget, tokens.Count)
			got := shown(r)
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("chunks = %v, want %v", got, tt.want)
			}
			if n := len(r.Chunks) + r.Dropped + r.Deduped; n != len(cs) {
				t.Errorf("chunks %d + dropped %d + deduped %d != %d candidates", len(r.Chunks), r.Dropped, r.Deduped, len(cs))
			}
		})
	}
}

func with(o Options, budget int) Options { o.Budget = budget; return o }

// TestProvenanceCommit: a provenance cuts a commit hash to 12 digits and
// keeps a working tree's pseudo-commit whole: "worktree-769aadb151f9" was
// cut to "worktree-769", which no longer named the snapshot.
func TestProvenanceCommit(t *testing.T) {
	for commit, want := range map[string]string{
		"0123456789abcdef0123456789abcdef01234567": "r@0123456789ab:a.go#L1-2",
		"worktree-769aadb151f9":                    "r@worktree-769aadb151f9:a.go#L1-2",
		"abc":                                      "r@abc:a.go#L1-2",
		"":                                         "r@:a.go#L1-2",
	} {
		if got := Provenance(Candidate{Repo: "r", Commit: commit, Path: "a.go", StartLine: 1, EndLine: 2}); got != want {
			t.Errorf("Provenance at %q = %q, want %q", commit, got, want)
		}
	}
}
