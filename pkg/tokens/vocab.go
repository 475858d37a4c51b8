package tokens

import (
	"hash/maphash"
	"math"
	"slices"
	_ "unsafe" // go:linkname

	"github.com/dlclark/regexp2/v2"
	tkcodec "github.com/tiktoken-go/tokenizer/codec"
)

// The library keeps o200k's vocabulary in a package variable, a Go map of
// some 200,000 string keys that every cycle of the garbage collector scans
// (about a third of a query server's live heap). bpe holds the same
// vocabulary without pointers: the tokens' bytes in one arena, an entry's
// offset and rank in two uint32 slices, and an open-addressing table of
// entry numbers; the collector does not look inside any of them. It is
// built once from the library's map, which is then dropped (the variable
// set to nil), and counts as the library's Codec.Count does: the same
// split expression (the library's compiled engine, registered under its
// pattern), then per piece one token if the piece is in the vocabulary and
// otherwise the parts byte-pair merging leaves, the leftmost lowest rank
// merging first. TestVocabCount compares the two on every Go file of a
// source tree and on random text.

//go:linkname libVocab github.com/tiktoken-go/tokenizer/codec.o200kBaseVocab
var libVocab map[string]uint

// splitPattern is o200k's split expression exactly as the library compiles
// it (with regexp2.None), so regexp2 finds the library's generated engine.
const splitPattern = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

type bpe struct {
	arena []byte   // the tokens' bytes, entry after entry
	off   []uint32 // entry e is arena[off[e]:off[e+1]]
	rank  []uint32 // entry e's rank
	slots []uint32 // entry+1 per slot, 0 for none; linear probing
	mask  uint64
	seed  maphash.Seed
	split *regexp2.Regexp
}

// noRank is no rank: o200k's ranks are below 200,000.
const noRank = math.MaxUint32

// newBPE builds the table from the library's vocabulary and drops the
// library's map.
func newBPE() *bpe {
	tkcodec.NewO200kBase() // fills libVocab, once
	vocab := libVocab
	if len(vocab) == 0 {
		panic("tokens: the o200k_base vocabulary is empty")
	}
	keys := make([]string, 0, len(vocab))
	size := 0
	for k := range vocab {
		keys = append(keys, k)
		size += len(k)
	}
	slices.Sort(keys) // the same layout in every process
	v := &bpe{
		arena: make([]byte, 0, size),
		off:   make([]uint32, 0, len(keys)+1),
		rank:  make([]uint32, 0, len(keys)),
		seed:  maphash.MakeSeed(),
	}
	nslots := 1
	for nslots < 2*len(keys) {
		nslots *= 2
	}
	v.slots = make([]uint32, nslots)
	v.mask = uint64(nslots - 1)
	for e, k := range keys {
		r := vocab[k]
		if r >= noRank {
			panic("tokens: o200k_base rank out of range")
		}
		v.off = append(v.off, uint32(len(v.arena)))
		v.arena = append(v.arena, k...)
		v.rank = append(v.rank, uint32(r))
		i := maphash.String(v.seed, k) & v.mask
		for v.slots[i] != 0 {
			i = (i + 1) & v.mask
		}
		v.slots[i] = uint32(e + 1)
	}
	v.off = append(v.off, uint32(len(v.arena)))
	libVocab = nil // the library's map is garbage now (no Codec of it is kept)
	v.split = regexp2.MustCompile(splitPattern, regexp2.None)
	return v
}

// lookup returns the rank of token s.
func (v *bpe) lookup(s string) (uint32, bool) {
	for i := maphash.String(v.seed, s) & v.mask; ; i = (i + 1) & v.mask {
		e := v.slots[i]
		if e == 0 {
			return 0, false
		}
		e--
		if string(v.arena[v.off[e]:v.off[e+1]]) == s {
			return v.rank[e], true
		}
	}
}

// Count returns the o200k count of s as the library's Codec.Count does (an
// error only if the expression fails, which without a timeout it does not).
func (v *bpe) Count(s string) (int, error) {
	m, err := v.split.FindStringMatch(s)
	if err != nil {
		return 0, err
	}
	n := 0
	for m != nil {
		n += v.pieceCount(m.String())
		if m, err = v.split.FindNextMatch(m); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// pieceCount is the number of tokens of one piece of the split.
func (v *bpe) pieceCount(p string) int {
	if _, ok := v.lookup(p); ok {
		return 1
	}
	if len(p) < mergeHeapThreshold {
		return v.mergeScan(p)
	}
	return v.mergeHeap(p)
}

// mergeHeapThreshold is where the library switches from its scan to its
// heap; both merge the same pairs.
const mergeHeapThreshold = 96

type part struct{ offset, rank uint32 }

// mergeScan is the library's mergePairsScan, returning the number of
// parts it leaves: repeatedly merge the leftmost pair of lowest rank.
func (v *bpe) mergeScan(piece string) int {
	var buf [mergeHeapThreshold + 1]part
	parts := buf[:len(piece)+1]
	for i := range parts {
		parts[i] = part{uint32(i), noRank}
	}
	rankOf := func(index, skip int) uint32 {
		if index+skip+2 < len(parts) {
			if r, ok := v.lookup(piece[parts[index].offset:parts[index+skip+2].offset]); ok {
				return r
			}
		}
		return noRank
	}
	for i := 0; i < len(parts)-2; i++ {
		parts[i].rank = rankOf(i, 0)
	}
	for len(parts) > 1 {
		minRank, minIndex := uint32(noRank), 0
		for i, p := range parts[:len(parts)-1] {
			if p.rank < minRank {
				minRank, minIndex = p.rank, i
			}
		}
		if minRank == noRank {
			break
		}
		parts[minIndex].rank = rankOf(minIndex, 1)
		if minIndex > 0 {
			parts[minIndex-1].rank = rankOf(minIndex-1, 1)
		}
		parts = append(parts[:minIndex+1], parts[minIndex+2:]...)
	}
	return len(parts) - 1
}

type mergeNode struct {
	prev, next int32
	rank       uint32
}

type mergeCandidate struct {
	rank   uint32
	offset int32
}

// mergeHeap is the library's mergePairsHeap (the same merges in
// O(n log n)), returning the number of tokens.
func (v *bpe) mergeHeap(piece string) int {
	n := int32(len(piece))
	nodes := make([]mergeNode, n+1)
	for i := range nodes {
		nodes[i] = mergeNode{prev: int32(i) - 1, next: int32(i) + 1, rank: noRank}
	}
	nodes[n].next = -1
	rankOf := func(i int32) uint32 {
		j := nodes[i].next
		if j < 0 {
			return noRank
		}
		k := nodes[j].next
		if k < 0 {
			return noRank
		}
		if r, ok := v.lookup(piece[i:k]); ok {
			return r
		}
		return noRank
	}
	h := candHeap(make([]mergeCandidate, 0, n))
	for i := int32(0); i+2 <= n; i++ {
		if r := rankOf(i); r != noRank {
			nodes[i].rank = r
			h = append(h, mergeCandidate{r, i})
		}
	}
	h.init()
	for len(h) > 0 {
		top := h.pop()
		i := top.offset
		if nodes[i].rank != top.rank {
			continue
		}
		j := nodes[i].next
		k := nodes[j].next
		nodes[j].rank = noRank
		nodes[i].next = k
		if k >= 0 {
			nodes[k].prev = i
		}
		for _, b := range [2]int32{i, nodes[i].prev} {
			if b < 0 {
				continue
			}
			nodes[b].rank = rankOf(b)
			if nodes[b].rank != noRank {
				h.push(mergeCandidate{nodes[b].rank, b})
			}
		}
	}
	parts := 0
	for i := int32(0); i >= 0; i = nodes[i].next {
		parts++
	}
	return parts - 1
}

// candHeap is a min-heap by rank, then offset (the leftmost of equal ranks
// first).
type candHeap []mergeCandidate

func (h candHeap) less(a, b int) bool {
	if h[a].rank != h[b].rank {
		return h[a].rank < h[b].rank
	}
	return h[a].offset < h[b].offset
}

func (h candHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *candHeap) push(c mergeCandidate) {
	*h = append(*h, c)
	h.up(len(*h) - 1)
}

func (h *candHeap) pop() mergeCandidate {
	old := *h
	top := old[0]
	last := len(old) - 1
	old[0] = old[last]
	*h = old[:last]
	if last > 0 {
		h.down(0)
	}
	return top
}

func (h candHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (h candHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
