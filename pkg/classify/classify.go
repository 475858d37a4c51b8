// Package classify decides, before retrieval, what kind of question a query
// is, after the trigger taxonomy of the CTX paper: a query names symbols
// (EXPLICIT_SYMBOL), describes behaviour in words (SEMANTIC_CONCEPT), asks
// about change over time (TEMPORAL_HISTORY), or asks about what surrounds
// a piece of code (IMPLICIT_CONTEXT). The answer picks which retrieval arms
// run, how their rankings are weighted in fusion, and how many results to
// aim for. Classification is rule-based, deterministic and takes a few
// microseconds; it needs no model.
//
// # Rules
//
// Symbols are found by spelling, learning from the paper's failure cases
// (sentence-initial "Find"/"Fix"/"Update" taken as identifiers, brand names
// taken as CamelCase):
//
//   - backticked words: always (`hooks`, `--no-cache`);
//   - snake_case, SCREAMING_CASE, __dunder__ (not _markdown emphasis_);
//   - CamelCase with an internal capital: getUser, JsonDecodeError,
//     HTTPServer — not Python, Content, APIs, and not product names
//     (GitHub, OAuth, JavaScript, IPv6: see brands);
//   - dotted names: Session.send, self.foo, os.path.join, sessions.py —
//     not e.g., not versions (2.31.0), not node.js;
//   - :: paths (tokio::spawn), Go method expressions ((*Router).Mount);
//   - calls: foo(), requests.get(url) (reported without the parentheses) —
//     not file(s), not a Conventional Commits prefix like fix(router):;
//   - generics Vec<T> (reported as Vec);
//   - letters mixed with digits: utf8, sha256, urllib3 — not v2, 3.12,
//     commit ids or numbers;
//   - paths: requests/adapters.py, pkg/fusion — not and/or, client/server;
//   - Title-Case-Hyphenated header names: Content-Type, X-Forwarded-For;
//   - the slot of an explicit cue: "where is X defined", "definition of X",
//     "the X function", "what does X do", "def X" (one word, not a stopword);
//   - any other word that syms knows, unless it is an English stopword, or a
//     very common word (get, run, update, fix, file, ...) written in lower
//     case or at the start of a sentence; a capitalised common word inside
//     a sentence ("what depends on Config") may still be looked up.
//
// Quoted words ('schema', "scheme") are not symbols by virtue of the
// quotes: quotes mark strings, messages and scare quotes as often as names.
// So "Fix erroneous use of 'schema' instead of 'scheme'" is
// SEMANTIC_CONCEPT, unless syms knows schema or scheme.
//
// Cues are phrase patterns (see cueTable) with weights: strong 1.0 for
// unambiguous phrases ("what changed", "git blame", "callers of", "depends
// on", "what else"), medium 0.6 for words that usually mean it
// ("regression", "revert", "recently", "commits", "imports"), weak 0.3 for
// words that only help ("changed", "commit", "history", "no longer",
// "affects", "calls to"). A class fires when its non-overlapping cues sum
// to at least 0.5; on a multi-line query (PR title + body) a cue below the
// first line counts half, so boilerplate in a body does not flip a title.
//
// Precedence is temporal > implicit > explicit symbol > concept: a query
// with history cues is TEMPORAL_HISTORY even when it names symbols ("when
// did Session.mount start ignoring prefixes"); then implicit cues ("what
// depends on Config"); then any identifier-shaped symbol makes it
// EXPLICIT_SYMBOL. A capitalised word that syms knows ("Session leaks
// sockets") counts like an identifier-shaped one; lower-case words found
// only through syms make the query EXPLICIT_SYMBOL only when they are at
// least half of its content words ("dispatch hook"), so one known word in a
// sentence ("how are cookies persisted across redirects") stays
// SEMANTIC_CONCEPT with Symbols filled.
//
// Long natural-language bodies that mention one identifier (a PR
// description citing JsonDecodeError) are EXPLICIT_SYMBOL with a lower
// confidence: confidence falls with the share of symbols among content
// words, from 0.95 for "parse_url" down towards 0.55. Symbols are extracted
// for every trigger, and Concepts (content words) too, so each arm can use
// them whichever trigger won.
//
// # Plans
//
// Weights are RRF weights (see package fusion); an arm absent from the map
// is not run. As PlanFor has them (the symbol and graph weights are half
// or less of the first hand-set ones, see PlanFor):
//
//	trigger           symbol bm25 dense graph history  depth  K
//	EXPLICIT_SYMBOL    0.5   0.6  0.3   0.2    -        1     5..10
//	SEMANTIC_CONCEPT   0.15  0.8  1.0   0.1    -        0     20
//	IMPLICIT_CONTEXT   0.35  0.4  0.3   0.5   0.2       2     15
//	TEMPORAL_HISTORY   0.25  0.5  0.3   0.1   1.0       1     10
//
// Reasoning: a named symbol is best served by exact symbol lookup, with
// BM25 to catch mentions and one graph hop for the definition's immediate
// neighbourhood; K is small (5 for one symbol, +2 per further symbol, up to
// 10; 10 when confidence is low) because the answer is a definition, not a
// survey. A concept query has no names to look up: dense similarity leads,
// BM25 catches the vocabulary, and K=20 because behaviour is spread over
// many chunks. An implicit query is about edges, so the graph leads (two
// hops: callers of callers, importers of importers) with symbol lookup to
// anchor the Target; K=15 leaves room for the neighbourhood. A temporal
// query is answered from history (recent commits and the files they
// touched), with symbol and BM25 to map the Target onto chunks; K=10.
package classify

import (
	"strings"
)

// Trigger is the kind of question a query asks.
type Trigger string

const (
	ExplicitSymbol  Trigger = "EXPLICIT_SYMBOL"  // names code identifiers: "where is parse_url defined"
	SemanticConcept Trigger = "SEMANTIC_CONCEPT" // describes behaviour in words: "how are cookies persisted across redirects"
	TemporalHistory Trigger = "TEMPORAL_HISTORY" // change over time: "what changed in the session handling last week"
	ImplicitContext Trigger = "IMPLICIT_CONTEXT" // surrounding code and dependencies: "what depends on Config"
)

// Arm names used in Plan.Weights.
const (
	ArmSymbol  = "symbol"
	ArmBM25    = "bm25"
	ArmDense   = "dense"
	ArmGraph   = "graph"
	ArmHistory = "history"
)

// SymbolLookup is the index's symbol table.
type SymbolLookup interface {
	HasSymbol(name string) bool
}

// Result is the classification of one query.
type Result struct {
	Trigger    Trigger
	Confidence float64  // 0..1
	Symbols    []string // identifiers found, as written (call parentheses dropped), in order, deduped
	Concepts   []string // content words, lowercased, in order, deduped, at most 64; no stopwords, symbols or the cue words of a temporal/implicit trigger
	Target     string   // the X of "related to X", "depends on X", "what changed in X"; else the first symbol for temporal and implicit queries
	Scope      string   // the component of a commit-style prefix: "router" in "fix(router): ...", "net/http" in "net/http: ..."
	K          int      // how many results retrieval should aim for
	Plan       Plan
}

// Plan says which arms to run and how to weight them in fusion.
type Plan struct {
	Weights    map[string]float64 // arm name -> RRF weight; absent arms are not run
	GraphDepth int                // 0 = the graph's adaptive default
}

const (
	threshold   = 0.5 // cue score at which a class fires
	maxConcepts = 64
)

// PlanFor returns a fresh copy of the plan used for trigger t.
//
// Each trigger orders the arms by intent (symbol first for an explicit
// symbol, graph for implicit context, history for temporal queries). The
// symbol and graph weights are half of the first hand-set ones: a sweep of
// both multipliers over 0.25-2, validated by leaving one repository out
// across 13 repositories, chose 0.5 for symbol in every fold and 0.25-0.5
// for graph (held-out MRR 0.798 -> 0.814); see docs/benchmarks.md.
func PlanFor(t Trigger) Plan {
	var p Plan
	switch t {
	case ExplicitSymbol:
		p = Plan{Weights: map[string]float64{ArmSymbol: 0.5, ArmBM25: 0.6, ArmDense: 0.3, ArmGraph: 0.2}, GraphDepth: 1}
	case ImplicitContext:
		p = Plan{Weights: map[string]float64{ArmGraph: 0.5, ArmSymbol: 0.35, ArmBM25: 0.4, ArmDense: 0.3, ArmHistory: 0.2}, GraphDepth: 2}
	case TemporalHistory:
		p = Plan{Weights: map[string]float64{ArmHistory: 1.0, ArmSymbol: 0.25, ArmBM25: 0.5, ArmDense: 0.3, ArmGraph: 0.1}, GraphDepth: 1}
	default:
		p = Plan{Weights: map[string]float64{ArmDense: 1.0, ArmBM25: 0.8, ArmSymbol: 0.15, ArmGraph: 0.1}, GraphDepth: 0}
	}
	return p
}

// Classify classifies query. syms may be nil.
func Classify(query string, syms SymbolLookup) Result {
	toks := tokenize(query)
	if syms != nil {
		for i := range toks {
			t := &toks[i]
			if !t.shape && lookupable(t) && syms.HasSymbol(t.raw) {
				t.look = true
			}
		}
	}
	ms := findCues(toks)
	explicitCue := markSlots(toks, ms)
	scores, used := score(ms, len(toks))

	var r Result
	strongSyms, lookSyms, content := 0, 0, 0
	seen := make(map[string]bool)
	for i := range toks {
		t := &toks[i]
		if t.isSym() {
			content++
			if !seen[t.raw] {
				seen[t.raw] = true
				r.Symbols = append(r.Symbols, t.raw)
				if t.shape || t.slot || t.raw != t.low {
					strongSyms++
				} else {
					lookSyms++
				}
			}
		} else if isContent(t) {
			content++
		}
	}

	intent := nClasses // the class whose cue words are not concepts
	switch {
	case scores[temporal] >= threshold:
		r.Trigger = TemporalHistory
		r.Confidence = cueConfidence(scores[temporal])
		r.K = 10
		intent = temporal
	case scores[implicit] >= threshold:
		r.Trigger = ImplicitContext
		r.Confidence = cueConfidence(scores[implicit])
		r.K = 15
		intent = implicit
	case strongSyms > 0 || lookSyms > 0 && 2*lookSyms >= content:
		r.Trigger = ExplicitSymbol
		density := float64(strongSyms+lookSyms) / float64(max(content, 1))
		r.Confidence = 0.55 + 0.4*min(1, 3*density)
		if explicitCue {
			r.Confidence += 0.05
		}
		if strongSyms == 0 {
			r.Confidence = min(r.Confidence, 0.7)
		}
		r.Confidence = min(r.Confidence, 0.95)
		n := len(r.Symbols)
		r.K = min(10, 5+2*(n-1))
		if r.Confidence < 0.7 {
			r.K = 10
		}
	default:
		r.Trigger = SemanticConcept
		r.K = 20
		switch {
		case content == 0:
			r.Confidence = 0.3
		default:
			r.Confidence = 0.8
			if scores[temporal] > 0 || scores[implicit] > 0 {
				r.Confidence -= 0.15
			}
			if lookSyms > 0 {
				r.Confidence -= 0.15
			}
		}
	}

	seenConcept := make(map[string]bool)
	for i := range toks {
		t := &toks[i]
		if t.isSym() || !isContent(t) || intent < nClasses && used[i][intent] || seenConcept[t.low] {
			continue
		}
		if len(r.Concepts) == maxConcepts {
			break
		}
		seenConcept[t.low] = true
		r.Concepts = append(r.Concepts, t.low)
	}
	r.Confidence = round2(r.Confidence)
	r.Scope = scopeOf(query)
	r.Plan = PlanFor(r.Trigger)
	switch r.Trigger {
	case TemporalHistory:
		r.Target = target(toks, ms, temporal)
	case ImplicitContext:
		r.Target = target(toks, ms, implicit)
	}
	if r.Target == "" && (r.Trigger == TemporalHistory || r.Trigger == ImplicitContext) && len(r.Symbols) > 0 {
		r.Target = r.Symbols[0]
	}
	return r
}

func cueConfidence(s float64) float64 {
	return min(0.95, 0.45+0.35*s)
}

func round2(x float64) float64 {
	return float64(int(x*100+0.5)) / 100
}

// lookupable reports whether a plain word may be looked up in syms.
func lookupable(t *token) bool {
	if len(t.raw) < 2 || t.num || t.ver || t.year || t.date || t.sha || stopwords[t.low] {
		return false
	}
	if !isIdentPath(t.raw) {
		return false
	}
	lower := t.raw == t.low
	if (common[t.low] || fillers[t.low]) && (lower || t.init) {
		return false
	}
	return true
}

// isContent reports whether a non-symbol token is a concept word.
func isContent(t *token) bool {
	if len(t.low) < 2 || t.num || t.ver || t.year || t.date || t.sha {
		return false
	}
	if stopwords[t.low] || fillers[t.low] {
		return false
	}
	r := t.low[0]
	return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r >= 0x80
}

// markSlots turns the one-word slot of an explicit cue into a symbol and
// reports whether any explicit cue matched.
func markSlots(toks []token, ms []match) bool {
	found := false
	for _, m := range ms {
		if m.cue.class != explicit || m.slot0 < 0 {
			continue
		}
		found = true
		j := m.slot0
		for j < m.slot1 && determiners[toks[j].low] {
			j++
		}
		if j >= m.slot1 || j >= len(toks) {
			continue
		}
		// The slot is one word: the slot ends there, or the word ends a
		// clause, or a stopword follows.
		if end := j + 1; end < m.slot1 && !toks[j].stop && !stopwords[toks[end].low] {
			continue
		}
		t := &toks[j]
		if t.isSym() {
			continue
		}
		if len(t.raw) < 2 || stopwords[t.low] || constructs[t.low] || notSlot[t.low] || fillers[t.low] ||
			t.num || t.ver || t.year || t.sha || !isIdentPath(t.raw) {
			continue
		}
		t.slot = true
	}
	return found
}

// slotStop are verbs that end a multi-word target: "why was the retry
// change reverted" -> "retry change".
var slotStop = set(
	"change changed changes break broke broken start started stop stopped",
	"get got become became revert reverted remove removed add added",
	"introduced used defined declared implemented called imported modified",
	"rewritten renamed deleted deprecated touched affected work works worked",
	"fail fails failed failing land landed merged ship shipped appear appeared",
	"last recent recently yesterday today ago lately now again week month year",
	"code logic",
)

// leadSkip are words skipped at the start of a target.
var leadSkip = set("for of on in at to about")

// target extracts the X of the most specific slotted cue of class c.
func target(toks []token, ms []match, c class) string {
	best := -1
	for i, m := range ms {
		if m.cue.class != c || m.slot0 < 0 || m.slot0 >= m.slot1 {
			continue
		}
		if best < 0 || m.lits > ms[best].lits || m.lits == ms[best].lits && m.start < ms[best].start {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	m := ms[best]
	j := m.slot0
	for j < m.slot1 && (determiners[toks[j].low] || leadSkip[toks[j].low]) && !toks[j].isSym() {
		j++
	}
	// A symbol close by wins: "if I change the signature of Tokenize".
	for k := j; k < m.slot1; k++ {
		t := &toks[k]
		if t.isSym() {
			return t.raw
		}
		if t.stop || stopwords[t.low] && t.low != "of" {
			break
		}
	}
	var words []string
	for k := j; k < m.slot1 && len(words) < 4; k++ {
		t := &toks[k]
		if stopwords[t.low] || t.ver || t.year || len(words) > 0 && !m.closed && slotStop[t.low] {
			break
		}
		words = append(words, t.raw)
		if t.stop {
			break
		}
	}
	return strings.Join(words, " ")
}
