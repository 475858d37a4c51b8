// Package bm25 is a BM25F full-text index over multi-field code documents
// (name, signature, doc comment, body, path), kept as one immutable compact
// byte segment. Postings store per-field term frequencies and the segment
// stores per-field document lengths, so the field weights, k1 and b are
// chosen at search time without rebuilding.
//
// Scoring (BM25F): for each query term t and document d,
//
//	tf~   = Σ_f w_f · tf_f / (1 - b + b · len_f / avglen_f)
//	score += idf(t) · tf~ / (k1 + tf~)
//	idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))
//
// where df counts documents containing t in any field.
package bm25

import (
	"bytes"
	"encoding/binary"
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"codectx/pkg/tokenize"
)

// Field is one indexed field of a document.
type Field uint8

// Fields of a document.
const (
	FieldName Field = iota
	FieldSignature
	FieldDoc
	FieldBody
	FieldPath
	NumFields
)

// Params are the scoring parameters, given per search.
type Params struct {
	K1, B   float64
	Weights [NumFields]float64 // weight on the term frequency of each field
}

// DefaultParams returns k1 1.2, b 0.75 and field weights name 3,
// signature 2, doc 1.5, body 1, path 2.
func DefaultParams() Params {
	return Params{K1: 1.2, B: 0.75, Weights: [NumFields]float64{
		FieldName: 3, FieldSignature: 2, FieldDoc: 1.5, FieldBody: 1, FieldPath: 2,
	}}
}

// Doc is a document as raw text per field; the builder tokenizes it with
// tokenize.Tokens.
type Doc struct {
	Fields [NumFields]string
}

// Hit is one search result.
type Hit struct {
	Doc   int
	Score float64
}

// Builder collects documents for an Index. Document ids are 0..n-1 in the
// order of Add. A Builder is not safe for concurrent use.
type Builder struct {
	dict  *Dict               // term ids; may be shared with other builders
	post  [][]byte            // per term id: encoded postings so far
	last  []int32             // per term id: last doc id in post, -1 if none
	df    []uint32            // per term id; 0 for a term of the dictionary not in this index
	cur   [][NumFields]uint32 // per term id: tf of the doc being added
	seen  []uint32            // term ids of the doc being added
	ids   [NumFields][]uint32 // AddTokens's scratch
	lens  []uint32            // doc-major per-field lengths
	nDocs int
}

// NewBuilder returns an empty Builder with a dictionary of its own.
func NewBuilder() *Builder { return NewBuilderDict(NewDict()) }

// NewBuilderDict returns an empty Builder whose term ids are those of d
// (shared with other builders of d). The index it builds holds only the
// terms of its own documents.
func NewBuilderDict(d *Dict) *Builder { return &Builder{dict: d} }

// Dict returns the builder's dictionary.
func (b *Builder) Dict() *Dict { return b.dict }

// Add tokenizes d and adds it, returning its doc id.
func (b *Builder) Add(d Doc) int {
	var f [NumFields][]string
	for i, s := range d.Fields {
		f[i] = tokenize.Tokens(s)
	}
	return b.AddTokens(f)
}

// AddTokens adds a pre-tokenized document and returns its doc id. Empty
// terms are ignored.
func (b *Builder) AddTokens(fields [NumFields][]string) int {
	for f, toks := range fields {
		ids := b.ids[f][:0]
		for _, t := range toks {
			if t != "" {
				ids = append(ids, b.dict.ID(t))
			}
		}
		b.ids[f] = ids
	}
	return b.AddIDs(&b.ids)
}

// AddIDs adds a document given as the term ids of its fields in the
// builder's dictionary (Dict.AppendTerms), and returns its doc id. It is
// AddTokens of the terms the ids stand for.
func (b *Builder) AddIDs(fields *[NumFields][]uint32) int {
	if n := len(b.dict.terms); n > len(b.post) {
		b.grow(n)
	}
	doc := b.nDocs
	b.nDocs++
	b.seen = b.seen[:0]
	for f, ids := range fields {
		for _, id := range ids {
			c := &b.cur[id]
			if *c == ([NumFields]uint32{}) {
				b.seen = append(b.seen, id)
			}
			c[f]++
		}
		b.lens = append(b.lens, uint32(len(ids)))
	}
	for _, id := range b.seen {
		gap := uint64(int32(doc) - b.last[id])
		b.post[id] = appendPosting(b.post[id], gap, &b.cur[id])
		b.last[id] = int32(doc)
		b.df[id]++
		b.cur[id] = [NumFields]uint32{}
	}
	return doc
}

// grow sizes the per-term arrays for n term ids, doubling their capacity
// when they must move (a shard adds terms on most of its documents).
func (b *Builder) grow(n int) {
	old := len(b.post)
	if n > cap(b.post) {
		c := max(n, 2*cap(b.post), 1024)
		b.post = append(make([][]byte, 0, c), b.post...)
		b.df = append(make([]uint32, 0, c), b.df...)
		b.cur = append(make([][NumFields]uint32, 0, c), b.cur...)
		b.last = append(make([]int32, 0, c), b.last...)
	}
	// Within capacity the arrays were never used: zero.
	b.post, b.df, b.cur, b.last = b.post[:n], b.df[:n], b.cur[:n], b.last[:n]
	for i := old; i < n; i++ {
		b.last[i] = -1
	}
}

// appendPosting encodes one posting: uvarint(gap<<NumFields | mask) then a
// uvarint tf for each field bit set in mask. The first gap of a list is
// doc+1, so gaps are never zero.
func appendPosting(dst []byte, gap uint64, tf *[NumFields]uint32) []byte {
	var mask uint64
	for f, n := range tf {
		if n > 0 {
			mask |= 1 << f
		}
	}
	dst = binary.AppendUvarint(dst, gap<<NumFields|mask)
	for _, n := range tf {
		if n > 0 {
			dst = binary.AppendUvarint(dst, uint64(n))
		}
	}
	return dst
}

// Build returns the Index of the documents added so far.
func (b *Builder) Build() *Index {
	var nt, tb, pb int
	for id, df := range b.df {
		if df > 0 {
			nt++
			tb += len(b.dict.terms[id])
			pb += len(b.post[id])
		}
	}
	ix := &Index{n: b.nDocs, lens: append([]uint32(nil), b.lens...)}
	arena := make([]byte, 0, tb)
	postings := make([]byte, 0, pb)
	ix.termOff = make([]uint32, 0, nt+1)
	ix.postOff = make([]uint32, 0, nt+1)
	ix.df = make([]uint32, 0, nt)
	for _, id := range b.dict.order() {
		if int(id) >= len(b.df) || b.df[id] == 0 {
			continue
		}
		ix.termOff = append(ix.termOff, uint32(len(arena)))
		ix.postOff = append(ix.postOff, uint32(len(postings)))
		ix.df = append(ix.df, b.df[id])
		arena = append(arena, b.dict.terms[id]...)
		postings = append(postings, b.post[id]...)
	}
	ix.termOff = append(ix.termOff, uint32(len(arena)))
	ix.postOff = append(ix.postOff, uint32(len(postings)))
	ix.terms = arena
	ix.postings = postings
	ix.computeAvg()
	return ix
}

// Index is an immutable BM25F index, safe for concurrent searches.
type Index struct {
	n        int
	lens     []uint32 // doc-major: lens[d*NumFields+f]
	avg      [NumFields]float64
	sums     [NumFields]float64 // per-field length sums (integers, exact)
	terms    []byte             // sorted terms, concatenated
	termOff  []uint32           // len numTerms+1: term i is terms[termOff[i]:termOff[i+1]]
	df       []uint32
	postings []byte
	postOff  []uint32 // len numTerms+1
	pool     sync.Pool
	norm     atomic.Pointer[normTable]

	parts []*Index // a Multi index: its parts, searched where they lie
	base  []int    // the first document of each part
	raw   bool     // the arrays alias the bytes given to LoadRaw
}

func (ix *Index) computeAvg() {
	if ix.n == 0 {
		return
	}
	var sum [NumFields]float64
	for d := 0; d < ix.n; d++ {
		for f := range NumFields {
			sum[f] += float64(ix.lens[d*int(NumFields)+int(f)])
		}
	}
	ix.sums = sum
	for f := range sum {
		ix.avg[f] = sum[f] / float64(ix.n)
	}
}

// NumDocs returns the number of documents.
func (ix *Index) NumDocs() int { return ix.n }

// Size is the number of bytes the index holds in memory (its arrays; the
// scoring table built on first search adds 1 KiB).
func (ix *Index) Size() int64 {
	if len(ix.parts) > 0 {
		var n int64
		for _, p := range ix.parts {
			n += p.Size()
		}
		return n
	}
	return int64(4*(len(ix.lens)+len(ix.termOff)+len(ix.df)+len(ix.postOff)) + len(ix.terms) + len(ix.postings))
}

// NumTerms returns the number of distinct terms.
func (ix *Index) NumTerms() int {
	if len(ix.parts) == 0 {
		return len(ix.df)
	}
	n := 0
	ix.mergeTerms("", func([]byte, int) bool { n++; return true })
	return n
}

// DocFreq returns the number of documents that contain term in any field.
func (ix *Index) DocFreq(term string) int { return ix.docFreq(term) }

func (ix *Index) term(i int) []byte {
	return ix.terms[ix.termOff[i]:ix.termOff[i+1]]
}

// Prefixed calls f for each term that starts with prefix, in sorted order,
// with its document frequency, until f returns false.
func (ix *Index) Prefixed(prefix string, f func(term string, df int) bool) {
	if len(ix.parts) > 0 {
		ix.mergeTerms(prefix, func(t []byte, df int) bool { return f(string(t), df) })
		return
	}
	i, _ := ix.find(prefix)
	p := []byte(prefix)
	for ; i < len(ix.df); i++ {
		t := ix.term(i)
		if !bytes.HasPrefix(t, p) || !f(string(t), int(ix.df[i])) {
			return
		}
	}
}

// find returns the index of term in the sorted term table.
func (ix *Index) find(term string) (int, bool) {
	t := []byte(term)
	lo, hi := 0, len(ix.df)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(ix.term(m), t) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(ix.df) && bytes.Equal(ix.term(lo), t)
}

// Docs calls f with each document that holds term, in ascending order,
// and returns the term's inverse document frequency (0 if no document
// holds it).
func (ix *Index) Docs(term string, f func(doc int)) float64 {
	if len(ix.parts) > 0 {
		return ix.docsMulti(term, f)
	}
	return ix.docs(term, f)
}

func (ix *Index) docs(term string, f func(doc int)) float64 {
	i, ok := ix.find(term)
	if !ok {
		return 0
	}
	pl := ix.postings[ix.postOff[i]:ix.postOff[i+1]]
	doc, n := int64(-1), int64(ix.n)
	for len(pl) > 0 {
		v, m := binary.Uvarint(pl)
		if m <= 0 {
			break
		}
		pl = pl[m:]
		gap := int64(v >> NumFields)
		doc += gap
		if gap <= 0 || doc >= n {
			break
		}
		for mask := v & (1<<NumFields - 1); mask != 0; mask >>= 1 {
			if mask&1 != 0 {
				_, m := binary.Uvarint(pl)
				if m <= 0 {
					return 0
				}
				pl = pl[m:]
			}
		}
		f(int(doc))
	}
	df := float64(ix.df[i])
	return math.Log(1 + (float64(ix.n)-df+0.5)/(df+0.5))
}

// Search returns the top k documents for the query terms by score
// descending, ties by doc id ascending. Query terms are used as given
// (tokenize them with tokenize.QueryTokens); a repeated term counts again.
func (ix *Index) Search(query []string, k int, p Params) []Hit {
	return ix.SearchFilter(query, k, p, nil)
}

type scratch struct {
	acc     []float32
	touched []int32
}

// SearchFilter is Search restricted to documents for which keep returns
// true; a nil keep keeps all. keep is called only for matching documents
// that would enter the current top k, so it may be skipped for most.
func (ix *Index) SearchFilter(query []string, k int, p Params, keep func(doc int) bool) []Hit {
	return ix.SearchWeighted(query, nil, k, p, keep)
}

// SearchWeighted is SearchFilter with a weight per query term: term i's
// contribution is multiplied by weights[i]. A nil weights weighs every
// term 1; otherwise it must be as long as query.
func (ix *Index) SearchWeighted(query []string, weights []float64, k int, p Params, keep func(doc int) bool) []Hit {
	if weights != nil && len(weights) != len(query) {
		panic("bm25: SearchWeighted: len(weights) != len(query)")
	}
	if k <= 0 || ix.n == 0 || len(query) == 0 {
		return nil
	}
	if len(ix.parts) > 0 {
		return ix.searchMulti(query, weights, k, p, keep)
	}
	s, _ := ix.pool.Get().(*scratch)
	if s == nil || len(s.acc) != ix.n {
		s = &scratch{acc: make([]float32, ix.n)}
	}
	defer ix.pool.Put(s)

	nt := ix.norms(p)
	N := float64(ix.n)
	for j, q := range query {
		i, ok := ix.find(q)
		if !ok {
			continue
		}
		df := float64(ix.df[i])
		idf := math.Log(1 + (N-df+0.5)/(df+0.5))
		if weights != nil {
			idf *= weights[j]
		}
		if !(idf > 0) {
			continue // only a corrupt df > N gets here
		}
		ix.scoreTerm(s, ix.postings[ix.postOff[i]:ix.postOff[i+1]], float32(idf), float32(p.K1), nt.f)
	}
	hits := topK(s, k, keep)
	for _, d := range s.touched {
		s.acc[d] = 0
	}
	s.touched = s.touched[:0]
	return hits
}

// normTable caches, for one (B, Weights), the per-document per-field factor
// w_f / (1 - b + b * len_f / avglen_f), doc-major.
type normTable struct {
	b     float64
	w     [NumFields]float64
	f     []float32
	parts [][]float32 // of a Multi index: each part's table, with the whole's averages
}

// norms returns the factor table for p, reusing the last one built.
func (ix *Index) norms(p Params) *normTable {
	if t := ix.norm.Load(); t != nil && t.b == p.B && t.w == p.Weights {
		return t
	}
	t := &normTable{b: p.B, w: p.Weights}
	var c0, c1 [NumFields]float64
	for f := range NumFields {
		c0[f] = 1 - p.B
		if ix.avg[f] > 0 {
			c1[f] = p.B / ix.avg[f]
		}
	}
	factors := func(lens []uint32) []float32 {
		out := make([]float32, len(lens))
		for i, l := range lens {
			f := i % int(NumFields)
			out[i] = float32(p.Weights[f] / (c0[f] + c1[f]*float64(l)))
		}
		return out
	}
	if len(ix.parts) > 0 {
		for _, part := range ix.parts {
			t.parts = append(t.parts, factors(part.lens))
		}
	} else {
		t.f = factors(ix.lens)
	}
	ix.norm.Store(t)
	return t
}

// scoreTerm adds one term's contribution to the accumulator. Decoding is
// defensive: a malformed list ends the term early instead of panicking.
func (ix *Index) scoreTerm(s *scratch, pl []byte, idf, k1 float32, norm []float32) {
	doc := int64(-1)
	n := int64(ix.n)
	acc := s.acc
	for len(pl) > 0 {
		var v uint64
		if pl[0] < 0x80 {
			v = uint64(pl[0])
			pl = pl[1:]
		} else {
			var m int
			v, m = binary.Uvarint(pl)
			if m <= 0 {
				return
			}
			pl = pl[m:]
		}
		gap := int64(v >> NumFields)
		doc += gap
		if gap <= 0 || doc >= n {
			return
		}
		mask := v & (1<<NumFields - 1)
		nf := norm[int(doc)*int(NumFields) : int(doc)*int(NumFields)+int(NumFields)]
		var tf float32
		for f := 0; mask != 0; f++ {
			if mask&1 != 0 {
				var t uint64
				if len(pl) > 0 && pl[0] < 0x80 {
					t = uint64(pl[0])
					pl = pl[1:]
				} else {
					var m int
					t, m = binary.Uvarint(pl)
					if m <= 0 {
						return
					}
					pl = pl[m:]
				}
				tf += float32(t) * nf[f]
			}
			mask >>= 1
		}
		c := idf * tf / (k1 + tf)
		if !(c > 0) || c > math.MaxFloat32 {
			continue // odd params (negative weights, b > 1) or underflow
		}
		if acc[doc] == 0 {
			s.touched = append(s.touched, int32(doc))
		}
		acc[doc] += c
	}
}

// better reports whether a ranks before b: higher score, then lower doc.
func better(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.Doc < b.Doc
}

// topK selects the k best touched documents with a min-heap (worst on top).
func topK(s *scratch, k int, keep func(int) bool) []Hit {
	h := pushTop(make([]Hit, 0, min(k, len(s.touched))), s, k, keep, 0)
	sort.Slice(h, func(i, j int) bool { return better(h[i], h[j]) })
	return h
}

// pushTop adds the touched documents of s, their ids plus base, to the
// min-heap h of at most k hits (worst on top); keep sees the ids plus base.
func pushTop(h []Hit, s *scratch, k int, keep func(int) bool, base int) []Hit {
	for _, d := range s.touched {
		sc := s.acc[d]
		if sc <= 0 {
			continue
		}
		hit := Hit{Doc: base + int(d), Score: float64(sc)}
		if len(h) == k && !better(hit, h[0]) {
			continue
		}
		if keep != nil && !keep(hit.Doc) {
			continue
		}
		if len(h) < k {
			h = append(h, hit)
			up(h, len(h)-1)
		} else {
			h[0] = hit
			down(h, 0)
		}
	}
	return h
}

func up(h []Hit, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !better(h[p], h[i]) {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func down(h []Hit, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		w := l
		if r := l + 1; r < len(h) && better(h[l], h[r]) {
			w = r
		}
		if !better(h[i], h[w]) {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}
