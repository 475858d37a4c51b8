package bm25

import (
	"slices"
	"strings"

	"codectx/pkg/tokenize"
)

// Dict is a term dictionary that Builders can share (NewBuilderDict): a
// build that indexes the same text twice (a shard's chunk index and its
// whole-file index) looks each term up once, and tokenizes each distinct
// word of its text once, remembering the word's term ids. It holds the
// build's vocabulary until it is dropped. A Dict is not safe for
// concurrent use.
type Dict struct {
	ids   map[string]uint32 // term -> term id
	terms []string
	words map[string]span // word -> its term ids in wordIDs
	wids  []uint32
	tok   tokenize.Tokenizer

	sorted []uint32 // term ids in term order, for the first len(sorted) ids
}

// span is a range of Dict.wids.
type span struct{ lo, hi uint32 }

// maxCachedWord is the longest word, in bytes, whose terms a Dict
// remembers: longer ones (hashes, base64) rarely repeat and are
// tokenized each time.
const maxCachedWord = 128

// NewDict returns an empty Dict.
func NewDict() *Dict {
	return &Dict{ids: make(map[string]uint32), words: make(map[string]span)}
}

// ID returns the id of term, adding it if it is new.
func (d *Dict) ID(term string) uint32 {
	id, ok := d.ids[term]
	if !ok {
		id = uint32(len(d.terms))
		term = strings.Clone(term) // do not pin the caller's text
		d.ids[term] = id
		d.terms = append(d.terms, term)
	}
	return id
}

// Len is the number of terms in the dictionary.
func (d *Dict) Len() int { return len(d.terms) }

// AppendTerms appends to dst the ids of the terms of text, in order:
// those of tokenize.Tokens(text).
func (d *Dict) AppendTerms(dst []uint32, text string) []uint32 {
	for i := 0; ; {
		w, next, ok := tokenize.NextWord(text, i)
		if !ok {
			return dst
		}
		i = next
		if s, ok := d.words[w]; ok {
			dst = append(dst, d.wids[s.lo:s.hi]...)
			continue
		}
		toks := d.tok.Word(w)
		if len(w) > maxCachedWord {
			for _, t := range toks {
				if t != "" {
					dst = append(dst, d.ID(t))
				}
			}
			continue
		}
		lo := len(d.wids)
		for _, t := range toks {
			if t != "" {
				d.wids = append(d.wids, d.ID(t))
			}
		}
		d.words[strings.Clone(w)] = span{uint32(lo), uint32(len(d.wids))}
		dst = append(dst, d.wids[lo:]...)
	}
}

// order returns the term ids sorted by term, computed once for the
// terms the dictionary holds (again after more are added).
func (d *Dict) order() []uint32 {
	if len(d.sorted) == len(d.terms) {
		return d.sorted
	}
	o := make([]uint32, len(d.terms))
	for i := range o {
		o[i] = uint32(i)
	}
	slices.SortFunc(o, func(a, b uint32) int { return strings.Compare(d.terms[a], d.terms[b]) })
	d.sorted = o
	return o
}
