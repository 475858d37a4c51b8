package tokens

import (
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Tail is one text counted under many heads, as CountJoinAtMost(head,
// text, limit) counts it, with what does not depend on the head kept
// between calls. The packer renders a chunk's body and stubs below a
// header line that differs from query to query (its signals): through
// the cache of pieces, every count hashes and compares the whole body or
// stub text again, and the header too; a Tail kept per chunk text looks
// up only what the end of the header changes.
//
// Below a head that ends with a line break, where the text opens a
// piece, the text's count is its own (exact once known; a count that
// stopped above a limit is kept as a lower bound). Below a head the text
// shares a piece with (a stub's header and its "\n//" doc), the count is
// that of the head's pieces before its last piece or two and of those
// joined with the text (see joinSplit). Per head, what depends on it (its
// count, its cut, the joined count) is kept by the head's part after a
// prefix that is the same in every call (a header's chunk fields): a few
// heads per text, the header's end being its signals. A Tail is safe for
// concurrent use.
type Tail struct {
	text  string
	ascii bool // the text is ASCII
	opens bool // the text opens a piece after a line break
	cut   int  // CountJoinAtMost's cut of the text at a boundary near its start (0: none)

	alone atomic.Int64 // the text's count: 0 unknown, n+1 exact, -n at least n
	rest  atomic.Int64 // the count of text[cut:], encoded as alone

	grew func(int64) // told the bytes the Tail takes as it learns heads (may be nil)

	mu     sync.Mutex
	prefix *string     // the heads' common prefix, set by the first call that names one
	heads  []headEntry // by a head's part after prefix
}

// headEntry is a head's part after the prefix and what is known of it.
type headEntry struct {
	key string
	headCount
}

// headCount is what is known of one head (counts encoded as settle's).
type headCount struct {
	alone int64 // the head's count
	cut   split // where joinSplit cuts it, if cutOK
	cutOK bool
	join  int64 // the count of the head's part from the cut joined with the text
}

// maxTailHeads bounds the heads a Tail remembers.
const maxTailHeads = 16

// NewTail returns a Tail of text. grew, if not nil, is told the heap bytes
// the Tail takes beyond its own struct as it learns heads (at most
// maxTailHeads of them, a header's fields and end each).
func NewTail(text string, grew func(n int64)) *Tail {
	t := &Tail{text: text, ascii: isASCII(text), opens: opensPiece(text), grew: grew}
	if j := nextBoundary(text[:min(len(text), pieceMin)], 1); j < len(text) && boundaryAt(text, j) {
		t.cut = j
	}
	return t
}

// Text returns the text t counts.
func (t *Tail) Text() string { return t.text }

// CountJoinAtMost returns CountJoinAtMost(head, t.Text(), limit): the
// count of head+text and true if that is at most limit, else a number
// above limit and false. head[:fixed] is the part of head expected to be
// the same in every call (0: none); what is learnt of the head is kept by
// the rest of it, when head[:fixed] is that of the first call.
func (t *Tail) CountJoinAtMost(head string, fixed, limit int) (int, bool) {
	if t.text == "" || head == "" {
		return CountJoinAtMost(head, t.text, limit)
	}
	var (
		h     headCount
		keyed bool
	)
	if fixed > 0 && fixed <= len(head) {
		t.mu.Lock()
		if t.prefix == nil {
			p := strings.Clone(head[:fixed])
			t.prefix = &p
			t.add(int64(len(p)) + 16)
		}
		if keyed = head[:fixed] == *t.prefix; keyed {
			if i := t.find(head[fixed:]); i >= 0 {
				h = t.heads[i].headCount
			}
		}
		t.mu.Unlock()
	}
	was := h
	n, ok := t.count(head, &h, limit)
	if keyed && h != was {
		t.mu.Lock()
		i := t.find(head[fixed:])
		if i < 0 && len(t.heads) < maxTailHeads {
			k := strings.Clone(head[fixed:])
			c := cap(t.heads)
			t.heads = append(t.heads, headEntry{key: k})
			t.add(int64(len(k)) + int64(cap(t.heads)-c)*int64(unsafe.Sizeof(headEntry{})))
			i = len(t.heads) - 1
		}
		if i >= 0 {
			e := &t.heads[i]
			e.alone, e.join = better(e.alone, h.alone), better(e.join, h.join)
			if h.cutOK {
				e.cut, e.cutOK = h.cut, true
			}
		}
		t.mu.Unlock()
	}
	return n, ok
}

// find returns the index of the head entry of key, or -1 (t.mu held).
func (t *Tail) find(key string) int {
	for i := range t.heads {
		if t.heads[i].key == key {
			return i
		}
	}
	return -1
}

// add tells grew of n more bytes.
func (t *Tail) add(n int64) {
	if t.grew != nil {
		t.grew(n)
	}
}

// count is CountJoinAtMost through what h knows of head, which it adds
// to; the cases are CountJoinAtMost's, in its order.
func (t *Tail) count(head string, h *headCount, limit int) (int, bool) {
	b := t.text
	c := load()
	switch {
	case head[len(head)-1] == '\n' && t.opens: // the text on its own
		n, ok, v := settle(h.alone, limit, func(limit int) (int, bool) { return CountAtMost(head, limit) })
		h.alone = v
		if !ok {
			return n, false
		}
		m, ok := known(&t.alone, limit-n, func(limit int) (int, bool) { return countPieces(c, b, limit) })
		return n + m, ok
	case len(head) <= maxSplitHead && len(b) <= maxSplitTail && t.ascii && (h.cutOK || isASCII(head)): // joinSplit
		if !h.cutOK {
			h.cut, h.cutOK = splitOf(c, head), true
		}
		n := int(h.cut.n)
		if n > limit {
			return n, false
		}
		part := head[h.cut.at:]
		m, ok, v := settle(h.join, limit-n, func(limit int) (int, bool) { return cachedAtMost(c, part+b, limit) })
		h.join = v
		return n + m, ok
	case t.cut > 0: // the head and the text up to its cut, then the rest
		j := t.cut
		n, ok, v := settle(h.join, limit, func(limit int) (int, bool) { return CountAtMost(head+b[:j], limit) })
		h.join = v
		if !ok {
			return n, false
		}
		m, ok := known(&t.rest, limit-n, func(limit int) (int, bool) { return CountAtMost(b[j:], limit) })
		return n + m, ok
	}
	n, ok, v := settle(h.join, limit, func(limit int) (int, bool) { return CountAtMost(head+b, limit) })
	h.join = v
	return n, ok
}

// settle answers count(limit) from v, what is known of the count (0
// nothing, n+1 exact, -n at least n), calling count only when v does not
// settle it, and returns what is known after: count's exact answer, or
// the number above limit it stopped at (no more than the count, every
// counter here adding exact counts of pieces).
func settle(v int64, limit int, count func(int) (int, bool)) (int, bool, int64) {
	switch {
	case v > 0:
		n := int(v - 1)
		return n, n <= limit, v
	case v < 0 && int(-v) > limit:
		return int(-v), false, v
	}
	n, ok := count(limit)
	w := -int64(n)
	if ok {
		w = int64(n) + 1
	}
	return n, ok, better(v, w)
}

// known is settle on a shared cell, which keeps what is learnt.
func known(cell *atomic.Int64, limit int, count func(int) (int, bool)) (int, bool) {
	v := cell.Load()
	n, ok, w := settle(v, limit, count)
	for w != v && !cell.CompareAndSwap(v, w) {
		v = cell.Load()
		w = better(v, w)
	}
	return n, ok
}

// better is the more informative of two encodings: exact over a bound, the
// higher bound over the lower.
func better(v, w int64) int64 {
	switch {
	case v > 0:
		return v
	case w > 0:
		return w
	case w < v:
		return w
	}
	return v
}
