package classify

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// fakeSyms is a symbol table backed by a set.
type fakeSyms map[string]bool

func (f fakeSyms) HasSymbol(name string) bool { return f[name] }

func TestClassifyTable(t *testing.T) {
	for _, c := range cases {
		t.Run(c.q, func(t *testing.T) {
			got := Classify(c.q, nil)
			if got.Trigger != c.want {
				t.Errorf("trigger: got %s (conf %.2f, symbols %q, concepts %q), want %s",
					got.Trigger, got.Confidence, got.Symbols, got.Concepts, c.want)
			}
			if c.syms != nil && !equalStrings(got.Symbols, c.syms) {
				t.Errorf("symbols: got %q, want %q", got.Symbols, c.syms)
			}
			if c.target != "" && got.Target != c.target {
				t.Errorf("target: got %q, want %q", got.Target, c.target)
			}
		})
	}
}

// TestAccuracy prints per-trigger accuracy over the labelled table and fails
// below 90% for any trigger. It also checks the table is big enough.
func TestAccuracy(t *testing.T) {
	total := map[Trigger]int{}
	right := map[Trigger]int{}
	for _, c := range cases {
		total[c.want]++
		if Classify(c.q, nil).Trigger == c.want {
			right[c.want]++
		}
	}
	for _, tr := range []Trigger{ExplicitSymbol, SemanticConcept, TemporalHistory, ImplicitContext} {
		acc := float64(right[tr]) / float64(max(total[tr], 1))
		t.Logf("%-17s %3d/%3d  %.1f%%", tr, right[tr], total[tr], 100*acc)
		if total[tr] < 60 {
			t.Errorf("%s: only %d labelled queries, want at least 60", tr, total[tr])
		}
		if acc < 0.9 {
			t.Errorf("%s: accuracy %.1f%% below 90%%", tr, 100*acc)
		}
	}
}

func TestSymbolLookup(t *testing.T) {
	syms := fakeSyms{
		"dispatch": true, "cookies": true, "Config": true, "Session": true,
		"get": true, "run": true, "the": true, "Find": true, "Update": true, "update": true,
		"FastAPI": true, "merge": true,
	}
	tests := []struct {
		q       string
		syms    SymbolLookup
		trigger Trigger
		want    []string
	}{
		// A plain word is a symbol only when the table has it.
		{"how does dispatch work", nil, SemanticConcept, nil},
		{"how does dispatch work", syms, ExplicitSymbol, []string{"dispatch"}},
		// One known word in a sentence: extracted, but still a concept query.
		{"how are cookies persisted across redirects", syms, SemanticConcept, []string{"cookies"}},
		{"how are cookies persisted across redirects", nil, SemanticConcept, nil},
		// Stopwords and common words never, even when the table has them.
		{"get the run output", syms, SemanticConcept, nil},
		{"Find where sessions are closed", syms, SemanticConcept, nil},
		{"Update the docs", syms, SemanticConcept, nil},
		{"merge cookies from the jar", syms, SemanticConcept, []string{"cookies"}},
		// A capitalised common word inside a sentence may be a type.
		{"Calls to Update are slow", syms, ExplicitSymbol, []string{"Update"}},
		{"calls to update are slow", syms, SemanticConcept, nil},
		// Capitalised words the table knows.
		{"what depends on Config", syms, ImplicitContext, []string{"Config"}},
		{"what depends on Config", nil, ImplicitContext, nil},
		{"Session leaks sockets", syms, ExplicitSymbol, []string{"Session"}},
		// A brand name is not CamelCase unless the table has it.
		{"FastAPI integration", nil, SemanticConcept, nil},
		{"FastAPI integration", syms, ExplicitSymbol, []string{"FastAPI"}},
		// Shape symbols do not need the table.
		{"fix parse_url", fakeSyms{}, ExplicitSymbol, []string{"parse_url"}},
	}
	for _, tt := range tests {
		name := tt.q
		if tt.syms == nil {
			name += " (nil syms)"
		}
		t.Run(name, func(t *testing.T) {
			got := Classify(tt.q, tt.syms)
			if got.Trigger != tt.trigger {
				t.Errorf("trigger: got %s, want %s", got.Trigger, tt.trigger)
			}
			if !equalStrings(got.Symbols, tt.want) {
				t.Errorf("symbols: got %q, want %q", got.Symbols, tt.want)
			}
		})
	}
}

func TestSymbolShape(t *testing.T) {
	tests := []struct {
		word string
		want bool
	}{
		{"JsonDecodeError", true}, {"getUser", true}, {"HTTPServer", true}, {"IOError", true},
		{"Python", false}, {"Content", false}, {"APIs", false}, {"URLs", false}, {"HTTP", false},
		{"GitHub", false}, {"OAuth", false}, {"JavaScript", false}, {"IPv6", false}, {"macOS", false},
		{"parse_url", true}, {"MAX_SIZE", true}, {"__init__", true}, {"_emphasis_", false}, {"___", false},
		{"os.path.join", true}, {"self.foo", true}, {"a.b", true}, {"sessions.py", true},
		{"e.g", false}, {"i.e", false}, {"U.S", false}, {"node.js", false},
		{"std::vector", true}, {"a::b::c", true},
		{"utf8", true}, {"sha256", true}, {"urllib3", true}, {"v2", false},
		{"requests/adapters.py", true}, {"pkg/fusion", true}, {"and/or", false}, {"client/server", false},
		{"HTTP/2", false}, {"a/b/c", true},
		{"Content-Type", true}, {"X-Forwarded-For", true}, {"built-in", false}, {"UTF-16", false},
		{"Find", false}, {"Fix", false}, {"x", false}, {"GHz", false},
		{"f64", false}, {"u8", false}, {"int64", false}, {"usize", false},
	}
	for _, tt := range tests {
		if got := isSymbolShape(tt.word); got != tt.want {
			t.Errorf("isSymbolShape(%q) = %v, want %v", tt.word, got, tt.want)
		}
	}
}

func TestTokens(t *testing.T) {
	tests := []struct {
		q    string
		want []string // symbols
	}{
		{"Call foo() then bar(x, y).", []string{"foo", "bar"}},
		{"update file(s) in place", nil},
		{"fix(router): trailing slash", nil},
		{"feat(api)!: drop v1", nil},
		{"Go method (*Router).Mount, and (Router).Handle.", []string{"(*Router).Mount", "(Router).Handle"}},
		{"use `requests.get(url, timeout=1)` here", []string{"requests.get"}},
		{"Vec<u8> and Option<T>", []string{"Vec", "Option"}},
		{"Session's cookies vs Session.cookies's jar", []string{"Session.cookies"}},
		{"see https://example.com/a/b.html and www.example.com", nil},
		{"bump 2.31.0 to 3.0, commit 3f2a9c1", nil},
		{"Session.send Session.send `Session.send`", []string{"Session.send"}},
		{"\"parse_url\" and 'scheme'", []string{"parse_url"}},
		{"", nil},
	}
	for _, tt := range tests {
		got := Classify(tt.q, nil).Symbols
		if !equalStrings(got, tt.want) {
			t.Errorf("Classify(%q).Symbols = %q, want %q", tt.q, got, tt.want)
		}
	}
}

func TestConcepts(t *testing.T) {
	tests := []struct {
		q    string
		want []string
	}{
		{"how are cookies persisted across redirects", []string{"cookies", "persisted", "redirects"}},
		{"Fix erroneous use of 'schema' instead of 'scheme'", []string{"fix", "erroneous", "use", "schema", "scheme"}},
		{"Where is the Retry logic? The retry logic!", []string{"retry", "logic"}},
		{"Session.send drops the timeout", []string{"drops", "timeout"}},
		// Cue words of a history or relationship trigger are intent, not topic.
		{"what changed in the session handling last week", []string{"session", "handling"}},
		{"files related to the auth middleware", []string{"files", "auth", "middleware"}},
	}
	for _, tt := range tests {
		if got := Classify(tt.q, nil).Concepts; !equalStrings(got, tt.want) {
			t.Errorf("Classify(%q).Concepts = %q, want %q", tt.q, got, tt.want)
		}
	}
}

func TestConfidenceAndK(t *testing.T) {
	short := Classify("parse_url", nil)
	i := slices.IndexFunc(cases, func(c tcase) bool { return strings.Contains(c.q, "JSONDecodeError") })
	if i < 0 {
		t.Fatal("the JSONDecodeError PR body is missing from cases")
	}
	long := Classify(cases[i].q, nil) // a long PR body citing one symbol
	if short.Trigger != ExplicitSymbol || long.Trigger != ExplicitSymbol {
		t.Fatalf("got %s and %s, want both %s", short.Trigger, long.Trigger, ExplicitSymbol)
	}
	if !(short.Confidence > long.Confidence) {
		t.Errorf("short symbol query confidence %.2f should exceed long body %.2f", short.Confidence, long.Confidence)
	}
	if short.K != 5 || long.K != 10 {
		t.Errorf("K: got short %d long %d, want 5 and 10", short.K, long.K)
	}
	if got := Classify("fix parse_url and build_index and chunk_lines", nil).K; got != 9 {
		t.Errorf("K for three symbols: got %d, want 9", got)
	}
	// Two strong history cues are more confident than one medium cue.
	strongT := Classify("what changed in sessions.py last week", nil)
	weakT := Classify("regression in proxies", nil)
	if strongT.Trigger != TemporalHistory || weakT.Trigger != TemporalHistory {
		t.Fatalf("got %s and %s, want %s", strongT.Trigger, weakT.Trigger, TemporalHistory)
	}
	if !(strongT.Confidence > weakT.Confidence) {
		t.Errorf("confidence: strong %.2f should exceed weak %.2f", strongT.Confidence, weakT.Confidence)
	}
	for _, c := range cases {
		r := Classify(c.q, nil)
		if r.Confidence <= 0 || r.Confidence > 1 {
			t.Errorf("%q: confidence %v outside (0,1]", c.q, r.Confidence)
		}
		if r.K <= 0 {
			t.Errorf("%q: K %d", c.q, r.K)
		}
	}
	empty := Classify("   ", nil)
	if empty.Trigger != SemanticConcept || empty.Confidence != 0.3 || empty.K != 20 {
		t.Errorf("empty query: got %+v", empty)
	}
}

// A weak cue alone does not fire; two do; a cue in a body counts half.
func TestCueThreshold(t *testing.T) {
	tests := []struct {
		q    string
		want Trigger
	}{
		{"the browser history view flickers", SemanticConcept},
		{"headers changed by hooks are lost", SemanticConcept},
		{"headers changed by hooks no longer reach the server", TemporalHistory},
		{"Avoid duplicate calls to close", SemanticConcept},
		{"Find all calls to close", ImplicitContext},
		{"Use the requests library since the stdlib is slow", SemanticConcept},
		{"Add retry option\n\nThe regression suite needs it.", SemanticConcept},
		{"Fix regression in retries\n\nAdd a test.", TemporalHistory},
		{"Explain the commit signing flow", SemanticConcept},
	}
	for _, tt := range tests {
		if got := Classify(tt.q, nil); got.Trigger != tt.want {
			t.Errorf("Classify(%q) = %s, want %s", tt.q, got.Trigger, tt.want)
		}
	}
}

func TestPrecedence(t *testing.T) {
	tests := []struct {
		q    string
		want Trigger
	}{
		{"what changed in the callers of parse_url", TemporalHistory},
		{"callers of parse_url", ImplicitContext},
		{"parse_url", ExplicitSymbol},
		{"how urls are parsed", SemanticConcept},
	}
	for _, tt := range tests {
		if got := Classify(tt.q, nil).Trigger; got != tt.want {
			t.Errorf("Classify(%q) = %s, want %s", tt.q, got, tt.want)
		}
	}
}

func TestPlans(t *testing.T) {
	tests := []struct {
		tr    Trigger
		lead  string
		depth int
	}{
		// The symbol arm's list is short and exact; tuned against BM25 it
		// weighs a little less (PlanFor), but more than in any other plan.
		{ExplicitSymbol, ArmBM25, 1},
		{SemanticConcept, ArmDense, 0},
		{ImplicitContext, ArmGraph, 2},
		{TemporalHistory, ArmHistory, 1},
	}
	for _, tt := range tests {
		p := PlanFor(tt.tr)
		lead, best := "", 0.0
		for arm, w := range p.Weights {
			if w > best {
				lead, best = arm, w
			}
		}
		if lead != tt.lead || p.GraphDepth != tt.depth {
			t.Errorf("%s: lead arm %s depth %d, want %s depth %d", tt.tr, lead, p.GraphDepth, tt.lead, tt.depth)
		}
	}
	sym := PlanFor(ExplicitSymbol).Weights[ArmSymbol]
	for _, tr := range []Trigger{SemanticConcept, ImplicitContext, TemporalHistory} {
		if w := PlanFor(tr).Weights[ArmSymbol]; w >= sym {
			t.Errorf("%s weighs the symbol arm %.2f, not less than EXPLICIT_SYMBOL's %.2f", tr, w, sym)
		}
	}
	// Plans are copies: changing one result does not change the next.
	a := Classify("parse_url", nil)
	a.Plan.Weights[ArmSymbol] = 0
	if b := Classify("parse_url", nil); b.Plan.Weights[ArmSymbol] != sym {
		t.Errorf("plan weights shared between results")
	}
}

func TestDeterministic(t *testing.T) {
	for _, c := range cases[:40] {
		a, b := Classify(c.q, nil), Classify(c.q, nil)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%q: two runs differ: %+v vs %+v", c.q, a, b)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func BenchmarkClassify(b *testing.B) {
	queries := []string{
		"where is parse_url defined",
		"how are cookies persisted across redirects",
		"what changed in the session handling last week",
		"what else do I need to change if I modify Session.send",
		cases[69].q, // a PR title with a body
	}
	syms := fakeSyms{"dispatch": true, "Config": true}
	for _, q := range queries {
		b.Run(fmt.Sprintf("%d_chars", len(q)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Classify(q, syms)
			}
		})
	}
}

func TestScope(t *testing.T) {
	tests := []struct{ q, want string }{
		{"fix(router): trailing slash", "router"},
		{"feat(sendRedirect)!: add refresh meta fallback", "sendRedirect"},
		{"types(setResponseHeaders): add autocompletion", "setResponseHeaders"},
		{"net/http: reject bad headers", "net/http"},
		{"mux: fix subrouter matching", "mux"},
		{"fix: don't lowercase routes", ""},
		{"Note: this is prose", ""},
		{"todo: later", ""},
		{"chore(two words): x", ""},
		{"wip(x): y", "x"}, {"Fix(x): y", ""},
		{"see http://example.com", ""},
		{"Use value::Serializer::serialize_map", ""},
		{"handle a::b: c", ""},
		{"no header here", ""},
	}
	for _, tt := range tests {
		if got := scopeOf(tt.q); got != tt.want {
			t.Errorf("scopeOf(%q) = %q, want %q", tt.q, got, tt.want)
		}
		if got := Classify(tt.q, nil).Scope; got != tt.want {
			t.Errorf("Classify(%q).Scope = %q, want %q", tt.q, got, tt.want)
		}
	}
}
