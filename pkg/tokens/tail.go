package tokens

import (
	"strings"
	"sync"
	"sync/atomic"
)

// Tail is one text counted under many heads, as CountJoinAtMost(head,
// text, limit) counts it, with what does not depend on the head kept
// between calls. The packer renders a chunk's body and stubs below a
// header line that differs from query to query (its signals): through
// the cache of pieces, every count hashes and compares the whole body or
// stub text again; a Tail kept per chunk looks up only what the header
// changes.
//
// Below a head that ends with a line break, where the text opens a
// piece, the text's count is its own (exact once known; a count that
// stopped above a limit is kept as a lower bound). Below a head the text
// shares a piece with (a stub's header and its "\n//" doc), the count of
// the head's last piece or two joined with the text is kept per such
// piece (see joinSplit): a few per text, the header's end being its
// signals. A Tail is safe for concurrent use.
type Tail struct {
	text  string
	ascii bool // the text is ASCII
	opens bool // the text opens a piece after a line break

	alone atomic.Int64 // the text's count: 0 unknown, n+1 exact, -n at least n

	mu    sync.Mutex
	joins map[string]int64 // a head's cut part -> count of part+text, encoded as alone
}

// maxTailJoins bounds the head parts a Tail remembers.
const maxTailJoins = 16

// NewTail returns a Tail of text.
func NewTail(text string) *Tail {
	return &Tail{text: text, ascii: isASCII(text), opens: opensPiece(text)}
}

// Text returns the text t counts.
func (t *Tail) Text() string { return t.text }

// CountJoinAtMost returns CountJoinAtMost(head, t.Text(), limit): the
// count of head+text and true if that is at most limit, else a number
// above limit and false.
func (t *Tail) CountJoinAtMost(head string, limit int) (int, bool) {
	b := t.text
	if b == "" {
		return CountAtMost(head, limit)
	}
	c := load()
	if head != "" && head[len(head)-1] == '\n' && t.opens {
		n, ok := CountAtMost(head, limit)
		if !ok {
			return n, false
		}
		m, ok := known(&t.alone, limit-n, func(limit int) (int, bool) { return countPieces(c, b, limit) })
		return n + m, ok
	}
	if len(head) == 0 || len(head) > maxSplitHead || len(b) > maxSplitTail || !t.ascii || !isASCII(head) {
		return CountJoinAtMost(head, b, limit)
	}
	sp := splitOf(c, head)
	n := int(sp.n)
	if n > limit {
		return n, false
	}
	part := head[sp.at:]
	t.mu.Lock()
	v, hit := t.joins[part]
	t.mu.Unlock()
	m, ok, w := settle(v, limit-n, func(limit int) (int, bool) { return cachedAtMost(c, part+b, limit) })
	if w != v {
		t.mu.Lock()
		if t.joins == nil {
			t.joins = map[string]int64{}
		}
		if hit || len(t.joins) < maxTailJoins {
			if !hit {
				part = strings.Clone(part)
			}
			t.joins[part] = better(t.joins[part], w)
		}
		t.mu.Unlock()
	}
	return n + m, ok
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
