package tokens

import (
	"sync"
	"sync/atomic"
)

// A packer's stub is a header line and a tail ("\n// doc...\nsignature")
// that meet inside a piece of the split: the header ends with punctuation,
// and a punctuation piece runs on over [\r\n/]*, so "]\n//" is one piece
// and no boundary of boundaryAt lies at the join. The header changes from
// query to query (its signals), the tail does not.
//
// matchASCII(s, i) reads s only from i up to two bytes past the end of the
// piece it returns (a contraction's letters, or the byte that stopped a
// run). So a piece of a whose reads end inside a is a piece of a+b too,
// and so is every piece before it. Let x be where the first piece of a
// that reads up to or past a's end starts: a+b's pieces are a's up to x,
// then the pieces of a[x:]+b read on its own (a piece start depends only
// on the text after it). The count of a+b is the count of a's pieces
// before x plus Count(a[x:]+b), with a[x:] a piece or two: the header's
// part is remembered per header, and a[x:]+b, the same for every query,
// hits the piece cache.

// splitTab remembers, per text a, x and the count of a's pieces before x.
type splitTab struct {
	shards [16]struct {
		sync.RWMutex
		m strTab[split] // keys copied (see strTab)
	}
	bytes atomic.Int64
}

type split struct{ at, n int32 }

// splitTabMax bounds the bytes of the texts remembered; the table starts
// afresh when they reach it (headers are about 100 bytes: some 80,000).
const splitTabMax = 8 << 20

var splitCache atomic.Pointer[splitTab]

func init() { splitCache.Store(&splitTab{}) }

// maxSplitHead and maxSplitTail bound the texts joined this way: a is a
// header line, b a stub's doc and signature.
const (
	maxSplitHead = 1 << 10
	maxSplitTail = 4 << 10
)

// splitOf returns x and the count of a's pieces before it (a is ASCII).
func splitOf(c *bpe, a string) split {
	t := splitCache.Load()
	sh := &t.shards[shardOf(a)]
	sh.RLock()
	sp, ok := sh.m.get(a)
	sh.RUnlock()
	if ok {
		return sp
	}
	sp = cutOf(c, a)
	if t.bytes.Add(int64(len(a))) > splitTabMax {
		splitCache.CompareAndSwap(t, &splitTab{})
		return sp
	}
	sh.Lock()
	sh.m.put(a, sp)
	sh.Unlock()
	return sp
}

// cutOf is splitOf without the cache.
func cutOf(c *bpe, a string) split {
	var sp split
	pt := pieceTab.Load()
	for i := 0; i < len(a); {
		j := matchASCII(a, i)
		if j+2 >= len(a) {
			break
		}
		sp.n += int32(pt.count(c, a[i:j]))
		i = j
		sp.at = int32(i)
	}
	return sp
}

// PrefixCount returns a lower bound of Count(a+b) for every b such that
// a+b is ASCII without DEL: the count of a's pieces that every such text
// shares, those before the first piece whose reads reach a's end (see the
// comment above). ok is false, and n 0, when a itself is not such text.
// The packer drops a candidate whose renderings all start with a header
// prefix that alone exceeds what is left of the budget, without
// rendering or counting them.
func PrefixCount(a string) (n int, ok bool) {
	if a == "" || !isASCII(a) {
		return 0, false
	}
	return int(cutOf(load(), a).n), true
}

// joinSplit counts a+b as the comment above says, when both are ASCII
// (where matchASCII is the split) and short; ok=false when it does not
// apply.
func joinSplit(c *bpe, a, b string, limit int) (n int, fits, ok bool) {
	if len(a) == 0 || len(a) > maxSplitHead || len(b) > maxSplitTail || !isASCII(a) || !isASCII(b) {
		return 0, false, false
	}
	sp := splitOf(c, a)
	n = int(sp.n)
	if n > limit {
		return n, false, true
	}
	// One piece of the cache (a long whitespace run in it is bounded,
	// as Count bounds it).
	m, fits := cachedAtMost(c, a[sp.at:]+b, limit-n)
	return n + m, fits, true
}
