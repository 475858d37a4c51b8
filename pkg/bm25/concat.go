package bm25

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"fmt"
)

// Concat joins indexes into one whose documents are those of ixs[0], then
// ixs[1], and so on (document d of ixs[i] becomes d plus the documents of
// the indexes before it). The result is the index a single Builder would
// have built from all the documents in that order, byte for byte: its
// document count, per-field average lengths and per-term document
// frequencies are the sums over the parts, so scores are exactly those of
// one index. Shards of a repository are joined this way when loaded.
func Concat(ixs []*Index) (*Index, error) {
	ixs = Multi(ixs).Parts()
	out := &Index{}
	base := make([]int, len(ixs))
	nt, np, nl := 0, 0, 0
	for i, ix := range ixs {
		base[i] = out.n
		out.n += ix.n
		nt += len(ix.df)
		np += len(ix.postings)
		nl += len(ix.lens)
	}
	out.lens = make([]uint32, 0, nl)
	for _, ix := range ixs {
		out.lens = append(out.lens, ix.lens...)
	}
	// The first varint of each part's list changes (its gap is counted from
	// the previous part's last document): a few bytes at most per part.
	out.postings = make([]byte, 0, np+len(ixs)*binary.MaxVarintLen64)
	out.termOff = make([]uint32, 0, nt+1)
	out.postOff = make([]uint32, 0, nt+1)
	out.df = make([]uint32, 0, nt)
	na := 0
	for _, ix := range ixs {
		na += len(ix.terms)
	}
	arena := make([]byte, 0, na) // at most every part's terms
	h := make(cursors, 0, len(ixs))
	for i, ix := range ixs {
		if len(ix.df) > 0 {
			h = append(h, cursor{part: i, ix: ix})
		}
	}
	heap.Init(&h)
	type at struct{ part, term int }
	var same []at // parts holding the current term, with its index there
	for h.Len() > 0 {
		term := h[0].ix.term(h[0].term)
		same = same[:0]
		for h.Len() > 0 && bytes.Equal(h[0].ix.term(h[0].term), term) {
			same = append(same, at{h[0].part, h[0].term})
			c := &h[0]
			c.term++
			if c.term == len(c.ix.df) {
				heap.Pop(&h)
			} else {
				heap.Fix(&h, 0)
			}
		}
		// Parts come off the heap in part order for equal terms (ties
		// break by part), so documents stay ascending.
		out.termOff = append(out.termOff, uint32(len(arena)))
		out.postOff = append(out.postOff, uint32(len(out.postings)))
		arena = append(arena, term...)
		last := int64(-1)
		var df uint32
		for _, a := range same {
			p, i, ix := a.part, a.term, ixs[a.part]
			pl := ix.postings[ix.postOff[i]:ix.postOff[i+1]]
			v, m := binary.Uvarint(pl)
			if m <= 0 {
				return nil, fmt.Errorf("%w: postings of %q", ErrCorrupt, term)
			}
			first := int64(base[p]) + int64(v>>NumFields) - 1
			out.postings = binary.AppendUvarint(out.postings, uint64(first-last)<<NumFields|v&(1<<NumFields-1))
			out.postings = append(out.postings, pl[m:]...)
			lastDoc, err := lastDoc(pl)
			if err != nil {
				return nil, fmt.Errorf("%w: postings of %q: %v", ErrCorrupt, term, err)
			}
			last = int64(base[p]) + lastDoc
			df += ix.df[i]
		}
		out.df = append(out.df, df)
	}
	out.termOff = append(out.termOff, uint32(len(arena)))
	out.postOff = append(out.postOff, uint32(len(out.postings)))
	out.terms = arena
	out.computeAvg()
	return out, nil
}

// lastDoc decodes a postings list to its last document.
func lastDoc(pl []byte) (int64, error) {
	doc := int64(-1)
	for len(pl) > 0 {
		v, m := binary.Uvarint(pl)
		if m <= 0 {
			return 0, fmt.Errorf("bad posting")
		}
		pl = pl[m:]
		doc += int64(v >> NumFields)
		for mask := v & (1<<NumFields - 1); mask != 0; mask &= mask - 1 {
			_, m := binary.Uvarint(pl)
			if m <= 0 {
				return 0, fmt.Errorf("bad term frequency")
			}
			pl = pl[m:]
		}
	}
	return doc, nil
}

// cursor walks the sorted terms of one part.
type cursor struct {
	part, term int
	ix         *Index
}

type cursors []cursor

func (h cursors) Len() int { return len(h) }
func (h cursors) Less(i, j int) bool {
	if c := bytes.Compare(h[i].ix.term(h[i].term), h[j].ix.term(h[j].term)); c != 0 {
		return c < 0
	}
	return h[i].part < h[j].part
}
func (h cursors) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursors) Push(x any)   { *h = append(*h, x.(cursor)) }
func (h *cursors) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Slice returns the index of documents lo..hi-1 of ix, renumbered from 0:
// the index a Builder would have built from those documents alone, byte
// for byte (terms that no document of the range holds are left out). With
// Concat it splices an index: the documents kept from an older index and
// the new ones built alone are joined without tokenizing the kept ones
// again. ix may not be a Multi index.
func Slice(ix *Index, lo, hi int) (*Index, error) {
	if len(ix.parts) > 0 {
		return nil, fmt.Errorf("bm25: slice of a multi-part index")
	}
	if lo < 0 || hi > ix.n || lo > hi {
		return nil, fmt.Errorf("bm25: slice %d..%d of %d documents", lo, hi, ix.n)
	}
	out := &Index{n: hi - lo, lens: append([]uint32(nil), ix.lens[lo*int(NumFields):hi*int(NumFields)]...)}
	// The range's share of the postings and terms, and some room: most of
	// a shard's slice is kept in a one-file change, so growing these by
	// doubling from nothing copied them several times.
	share := func(n int) int {
		if ix.n == 0 {
			return 0
		}
		n = n * (hi - lo) / ix.n
		return n + n/16 + 64
	}
	arena, postings := make([]byte, 0, share(len(ix.terms))), make([]byte, 0, share(len(ix.postings)))
	out.termOff = make([]uint32, 0, len(ix.df)+1)
	out.postOff = make([]uint32, 0, len(ix.df)+1)
	out.df = make([]uint32, 0, len(ix.df))
	for i := range ix.df {
		pl := ix.postings[ix.postOff[i]:ix.postOff[i+1]]
		start := len(postings)
		doc, last := int64(-1), int64(lo)-1
		var df uint32
		for len(pl) > 0 {
			v, m := binary.Uvarint(pl)
			if m <= 0 {
				return nil, fmt.Errorf("%w: postings of %q", ErrCorrupt, ix.term(i))
			}
			doc += int64(v >> NumFields)
			end := m
			for mask := v & (1<<NumFields - 1); mask != 0; mask &= mask - 1 {
				_, w := binary.Uvarint(pl[end:])
				if w <= 0 {
					return nil, fmt.Errorf("%w: term frequencies of %q", ErrCorrupt, ix.term(i))
				}
				end += w
			}
			if doc >= int64(hi) {
				break
			}
			if doc >= int64(lo) {
				postings = binary.AppendUvarint(postings, uint64(doc-last)<<NumFields|v&(1<<NumFields-1))
				postings = append(postings, pl[m:end]...)
				last = doc
				df++
			}
			pl = pl[end:]
		}
		if df == 0 {
			continue
		}
		out.termOff = append(out.termOff, uint32(len(arena)))
		out.postOff = append(out.postOff, uint32(start))
		out.df = append(out.df, df)
		arena = append(arena, ix.term(i)...)
	}
	out.termOff = append(out.termOff, uint32(len(arena)))
	out.postOff = append(out.postOff, uint32(len(postings)))
	out.terms = arena
	out.postings = postings
	out.computeAvg()
	return out, nil
}
