package query

import (
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
		// A plain word is lowercase or capitalised; fix_position and
		// fixHeader are identifiers.
		plain := !strings.Contains(w, "_") && strings.ToLower(w[1:]) == w[1:]
		if plain && changeVerbs[strings.ToLower(w)] {
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
