package query

import (
	"slices"
	"strings"
	"unicode"

	"codectx/pkg/tokenize"
)

// changeVerbs are the verbs a task or commit subject uses to say what to do
// ("Fix ...", "Add support for ...", "Use ... instead"). They describe the
// change, not the component, so a file named after one (proxy_fix.py,
// support.rs) is not what the query names. As plain words they are dropped
// from the file-name terms; as parts of an identifier of the query they
// stay. (Dropped from the BM25 terms too, they cost more than they gave on
// the dev tasks: "Removed deprecated classes" needs its verb.)
var changeVerbs = words(`fix add support use update allow make improve
	remove change ensure avoid implement refactor bump rename replace tweak
	introduce prevent`)

// words returns the set of ws and their inflections (-s/-es, -ed, -ing).
func words(ws string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(ws) {
		stem := strings.TrimSuffix(w, "e")
		for _, f := range []string{w, w + "s", w + "es", w + "ed", w + "d", stem + "ing", w + "ing"} {
			m[f] = true
		}
	}
	return m
}

// nameTerms returns the file-name terms of q: its query tokens without the
// change verbs written as plain words. If that leaves nothing, all tokens
// are kept.
func nameTerms(q string) []string {
	terms := tokenize.QueryTokens(q)
	drop := map[string]bool{}
	keep := map[string]bool{}
	for _, w := range strings.FieldsFunc(q, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_')
	}) {
		// fix_position and fixHeader are identifiers, not the verb.
		if isPlainWord(w) && changeVerbs[strings.ToLower(w)] {
			for _, t := range tokenize.Tokens(w) {
				drop[t] = true
			}
			continue
		}
		for _, t := range tokenize.Tokens(w) {
			keep[t] = true
		}
	}
	out := terms[:0:0]
	for _, t := range terms {
		if !drop[t] || keep[t] {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return terms
	}
	return out
}

// compoundTerms returns the identifiers that runs of two or three adjacent
// prose words of q spell when joined, as the index holds them: "map key"
// -> mapkey (MapKey) and map_key, "server sent events" ->
// serversentevent. Only joins that ix knows are returned, so prose that
// names no identifier adds nothing.
func compoundTerms(q string, ix interface{ DocFreq(string) int }, have []string) []string {
	var run, out []string
	try := func(ws []string) {
		for _, sep := range []string{"", "_"} {
			toks := tokenize.Tokens(strings.Join(ws, sep))
			if len(toks) == 0 {
				continue
			}
			t := toks[0]
			if !slices.Contains(have, t) && !slices.Contains(out, t) && ix.DocFreq(t) > 0 {
				out = append(out, t)
			}
		}
	}
	for _, f := range strings.Fields(q) {
		// A word ends a run at punctuation ("keys, values").
		w := strings.TrimRight(f, ".,;:!?)\"'")
		end := len(w) < len(f)
		w = strings.TrimLeft(w, "(\"'`&*")
		plain := w != "" && isPlainWord(w)
		if !plain || tokenize.IsStopword(strings.ToLower(w)) {
			run = run[:0]
			continue
		}
		run = append(run, strings.ToLower(w))
		if n := len(run); n >= 2 {
			try(run[n-2:])
			if n >= 3 {
				try(run[n-3:])
			}
		}
		if end {
			run = run[:0]
		}
	}
	return out
}

// isPlainWord reports whether w is a prose word: letters only, lowercase or
// capitalised.
func isPlainWord(w string) bool {
	for i, r := range w {
		if !unicode.IsLetter(r) || i > 0 && unicode.IsUpper(r) {
			return false
		}
	}
	return true
}

// Root conflation limits: a query word of at least minRootWord bytes is
// matched to the index's commonest word sharing all but its last rootSlack
// bytes (and at least minRoot bytes) when that word is more than rootRatio
// times as frequent as the query word itself.
const (
	minRootWord = 7
	minRoot     = 5
	rootSlack   = 3
	rootRatio   = 8
)

// rootTerms returns, for each word of terms that the index holds rarely or
// never, the index's commonest word with the same root: "deserializing" ->
// deserializer, "validation" -> validate. The index tokenizer only folds
// plurals, so prose inflections of an identifier's words ("-ing", "-ion",
// "-ed") would otherwise match little or nothing. Words the index holds
// often are left alone: a general suffix stripper was tried and lowered
// MRR.
func rootTerms(ix interface {
	DocFreq(string) int
	Prefixed(string, func(string, int) bool)
}, terms []string) []string {
	var out []string
	for _, t := range terms {
		if len(t) < minRootWord || !isASCIILower(t) {
			continue
		}
		root := t[:max(minRoot, len(t)-rootSlack)]
		best, n := "", 0
		ix.Prefixed(root, func(w string, wdf int) bool {
			// The index word must not run on much past the root:
			// "serializ" names serialize, not serializationerror.
			if len(w) <= len(t)+1 && wdf > n {
				best, n = w, wdf
			}
			return true
		})
		if best != "" && best != t && n > rootRatio*ix.DocFreq(t) && !slices.Contains(terms, best) && !slices.Contains(out, best) {
			out = append(out, best)
		}
	}
	return out
}

func isASCIILower(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
