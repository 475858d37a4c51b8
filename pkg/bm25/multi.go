package bm25

import (
	"bytes"
	"math"
	"sort"
)

// Multi returns an index over the documents of parts, in order: document
// d of parts[i] is d plus the documents of the parts before it. Nothing is
// copied: a search scores each part where it lies (a part may alias a
// read-only mapping, see LoadRaw) with the statistics of the whole, then
// merges the parts' top k, so every score and ranking is exactly that of
// Concat(parts), the one index a single build of all the documents gives:
//
//   - N is the sum of the parts' document counts;
//   - each field's average length is the sum of the parts' length sums
//     (integers, exact in float64) over N, so each document's length
//     normalisation is the joined one;
//   - a query term's df is the sum of its df in each part (only the
//     query's terms are looked up, one binary search per part);
//   - the parts' documents, scored, go through one top-k heap by score
//     (ties by global document id), so the result is the global top k
//     (and a part's documents below the k-th best so far are skipped).
//
// A part that is itself a Multi contributes its parts. One part is
// returned as is.
func Multi(parts []*Index) *Index {
	var flat []*Index
	for _, p := range parts {
		if len(p.parts) > 0 {
			flat = append(flat, p.parts...)
		} else {
			flat = append(flat, p)
		}
	}
	if len(flat) == 1 {
		return flat[0]
	}
	ix := &Index{parts: flat, base: make([]int, len(flat))}
	for i, p := range flat {
		ix.base[i] = ix.n
		ix.n += p.n
		for f := range NumFields {
			ix.sums[f] += p.sums[f]
		}
	}
	if ix.n > 0 {
		for f := range NumFields {
			ix.avg[f] = ix.sums[f] / float64(ix.n)
		}
	}
	return ix
}

// Parts returns the parts of a Multi index, or ix alone.
func (ix *Index) Parts() []*Index {
	if len(ix.parts) > 0 {
		return ix.parts
	}
	return []*Index{ix}
}

// docFreq is the document frequency of term summed over the parts.
func (ix *Index) docFreq(term string) int {
	if len(ix.parts) == 0 {
		i, ok := ix.find(term)
		if !ok {
			return 0
		}
		return int(ix.df[i])
	}
	n := 0
	for _, p := range ix.parts {
		n += p.docFreq(term)
	}
	return n
}

// mergeTerms calls f for each distinct term of the parts from the first
// one at or after from that starts with prefix, in sorted order, with its
// summed document frequency, until f returns false.
func (ix *Index) mergeTerms(prefix string, f func(term []byte, df int) bool) {
	pos := make([]int, len(ix.parts))
	for i, p := range ix.parts {
		pos[i], _ = p.find(prefix)
	}
	pre := []byte(prefix)
	for {
		var least []byte
		for i, p := range ix.parts {
			if pos[i] < len(p.df) {
				t := p.term(pos[i])
				if bytes.HasPrefix(t, pre) && (least == nil || bytes.Compare(t, least) < 0) {
					least = t
				}
			}
		}
		if least == nil {
			return
		}
		df := 0
		for i, p := range ix.parts {
			if pos[i] < len(p.df) && bytes.Equal(p.term(pos[i]), least) {
				df += int(p.df[pos[i]])
				pos[i]++
			}
		}
		if !f(least, df) {
			return
		}
	}
}

// docsMulti is Docs over the parts.
func (ix *Index) docsMulti(term string, f func(doc int)) float64 {
	df := 0
	for i, p := range ix.parts {
		b := ix.base[i]
		p.docs(term, func(d int) { f(b + d) })
		df += p.docFreq(term)
	}
	if df == 0 {
		return 0
	}
	return idfOf(float64(ix.n), float64(df))
}

func idfOf(n, df float64) float64 { return math.Log(1 + (n-df+0.5)/(df+0.5)) }

// searchMulti is SearchWeighted over the parts (see Multi).
func (ix *Index) searchMulti(query []string, weights []float64, k int, p Params, keep func(doc int) bool) []Hit {
	N := float64(ix.n)
	idf := make([]float32, len(query))
	any := false
	for j, q := range query {
		df := ix.docFreq(q)
		if df == 0 {
			continue
		}
		w := idfOf(N, float64(df))
		if weights != nil {
			w *= weights[j]
		}
		if !(w > 0) {
			continue
		}
		idf[j] = float32(w)
		any = true
	}
	if !any {
		return nil
	}
	nt := ix.norms(p)
	var h []Hit
	for pi, part := range ix.parts {
		if part.n == 0 {
			continue
		}
		s, _ := part.pool.Get().(*scratch)
		if s == nil || len(s.acc) != part.n {
			s = &scratch{acc: make([]float32, part.n)}
		}
		for j, q := range query {
			if idf[j] == 0 {
				continue
			}
			i, ok := part.find(q)
			if !ok {
				continue
			}
			part.scoreTerm(s, part.postings[part.postOff[i]:part.postOff[i+1]], idf[j], float32(p.K1), nt.parts[pi])
		}
		h = pushTop(h, s, k, keep, ix.base[pi])
		for _, d := range s.touched {
			s.acc[d] = 0
		}
		s.touched = s.touched[:0]
		part.pool.Put(s)
	}
	sort.Slice(h, func(i, j int) bool { return better(h[i], h[j]) })
	return h
}
