// Package tokens counts o200k_base tokens, the unit every context budget of
// the engine is expressed in.
//
// The encoding comes from github.com/tiktoken-go/tokenizer, whose vocabulary
// is compiled into the binary as a Go map literal: loading it needs no
// network and no files, and cannot fail (the split regexp is a constant). On
// first use it is copied into a table without pointers, which the garbage
// collector does not scan, and the library's map is dropped (see bpe); the
// codec is safe for concurrent use.
//
// Count is exact, with one documented exception. The tokenizer's regexp is
// quadratic in the length of a whitespace run that contains a line break
// (64 KiB of " \n" takes seconds, 1 MiB half an hour). To stay fast on such
// adversarial input, Count splits the text at line starts that are always
// token boundaries, counts ordinary segments exactly and, for a segment
// holding a whitespace run longer than LongRun bytes that spans a line break,
// adds an upper bound instead (its byte length; three times that if it is
// not valid UTF-8). So Count(s) is never below the true o200k count, and
// equals it for every text without such a run.
package tokens

import (
	"math"
	"sync"
	"unicode"
	"unicode/utf8"
)

// LongRun is the length in bytes from which a whitespace run containing a
// line break is counted by an upper bound instead of by the tokenizer.
const LongRun = 512

var (
	once  sync.Once
	codec *bpe
)

func load() *bpe {
	once.Do(func() { codec = newBPE() })
	return codec
}

// Count returns the number of o200k_base tokens of s (see the package
// comment for the upper bound used on very long whitespace runs). It is
// safe for concurrent use.
func Count(s string) int {
	if s == "" {
		return 0
	}
	c := load()
	n, s := head(c, s, math.MaxInt)
	for len(s) > 0 {
		seg := s[:nextBoundary(s, pieceMin)]
		s = s[len(seg):]
		n += cached(c, seg)
	}
	return n
}

// head counts the first line of s on its own when it ends at a boundary
// within pieceMin bytes, and returns the rest. The packer's texts start with
// a header line that changes from query to query (signals, kind) above a
// body that does not: counted apart, the body's pieces are the same every
// time and hit the cache. The line itself is not cached. Beyond limit the
// count may stop early (a number above limit).
func head(c *bpe, s string, limit int) (int, string) {
	i := nextBoundary(s[:min(len(s), pieceMin)], 1)
	if i >= len(s) || i >= pieceMin || !boundaryAt(s, i) {
		return 0, s
	}
	if isASCII(s[:i]) {
		n, _ := countASCIIAtMost(c, s[:i], limit)
		return n, s[i:]
	}
	return exactCodec(c, s[:i]), s[i:]
}

// Texts are counted in pieces cut at exact token boundaries (see
// boundaryAt), and the count of each piece is remembered: the packer
// counts the same chunk bodies query after query, under different header
// lines, so most pieces are counted once.
const (
	pieceMin      = 512      // bytes: a piece ends at the first boundary after this
	cacheMaxBytes = 64 << 20 // a shard of the cache is dropped when its keys hold 1/16 of this
)

var memo [16]struct {
	sync.Mutex
	m     strTab[int] // keys copied (see strTab)
	bytes int
}

func cached(c *bpe, seg string) int {
	n, _ := cachedAtMost(c, seg, math.MaxInt)
	return n
}

// cachedAtMost counts a piece, through the cache. A count that exceeds
// limit may stop early; it is not remembered.
func cachedAtMost(c *bpe, seg string, limit int) (int, bool) {
	sh := &memo[shardOf(seg)]
	sh.Lock()
	n, ok := sh.m.get(seg)
	sh.Unlock()
	if ok {
		return n, n <= limit
	}
	switch {
	case hasLongRun(seg):
		n = segmented(c, seg)
	case isASCII(seg):
		if n, ok = countASCIIAtMost(c, seg, limit); !ok {
			return n, false
		}
	default:
		n = exactCodec(c, seg)
	}
	sh.Lock()
	if sh.bytes+len(seg) > cacheMaxBytes/len(memo) {
		sh.m, sh.bytes = strTab[int]{}, 0
	}
	sh.m.put(seg, n)
	sh.bytes += len(seg)
	sh.Unlock()
	return n, n <= limit
}

// segmented counts s segment by segment (see nextBoundary), bounding the
// segments that hold a long whitespace run.
func segmented(c *bpe, s string) int {
	n := 0
	for len(s) > 0 {
		seg := s[:nextBoundary(s, 1)]
		s = s[len(seg):]
		if hasLongRun(seg) {
			n += bound(seg)
		} else {
			n += exact(c, seg)
		}
	}
	return n
}

// CountAtMost returns Count(s), true if that is at most limit. Otherwise it
// returns a number above limit and false, having counted only as much of s
// as needed: a cheap way to learn that a huge text does not fit.
func CountAtMost(s string, limit int) (int, bool) {
	c := load()
	n, s := head(c, s, limit)
	if n > limit {
		return n, false
	}
	m, ok := countPieces(c, s, limit-n)
	return n + m, ok
}

// countPieces is CountAtMost without the first line counted apart.
func countPieces(c *bpe, s string, limit int) (int, bool) {
	n := 0
	// The first piece is about large enough to exceed limit (code runs 3
	// to 4 bytes a token); later ones double, up to 64 KiB.
	batch := 1 << 16
	if limit < 1<<13 {
		batch = max(256, 8*(limit+1))
	}
	for len(s) > 0 && n <= limit {
		// Count the next batch piece by piece, so pieces hit the cache.
		end := nextBoundary(s, batch)
		batch = min(2*batch, 1<<16)
		part := s[:end]
		s = s[end:]
		for len(part) > 0 && n <= limit {
			seg := part[:nextBoundary(part, pieceMin)]
			part = part[len(seg):]
			k, _ := cachedAtMost(c, seg, limit-n)
			n += k
		}
	}
	return n, n <= limit
}

// CountJoinAtMost is CountAtMost(a+b, limit) without building a+b when b
// has a token boundary (see boundaryAt) near its start: only a and b's
// text up to that boundary are joined, and the rest of b is counted where
// it lies. The packer counts each chunk's body under a header line this
// way, most bodies not fitting, instead of copying every body it tries.
func CountJoinAtMost(a, b string, limit int) (int, bool) {
	if b == "" {
		return CountAtMost(a, limit)
	}
	// The first boundary of a+b at or after len(a): at the join itself
	// when a ends with a line break, or the first of b's own (boundaryAt
	// looks at the byte before i and on, so b's boundaries are a+b's).
	c := load()
	if a != "" && a[len(a)-1] == '\n' && opensPiece(b) {
		// A header line above a body: the body is counted from its
		// start in pieces through the cache (its first line is no
		// header, and not counted apart).
		n, ok := CountAtMost(a, limit)
		if !ok {
			return n, false
		}
		m, ok := countPieces(c, b, limit-n)
		return n + m, ok
	}
	if n, fits, ok := joinSplit(c, a, b, limit); ok {
		return n, fits
	}
	j := nextBoundary(b[:min(len(b), pieceMin)], 1)
	if j >= len(b) || !boundaryAt(b, j) {
		return CountAtMost(a+b, limit)
	}
	n, ok := CountAtMost(a+b[:j], limit)
	if !ok {
		return n, false
	}
	m, ok := CountAtMost(b[j:], limit-n)
	return n + m, ok
}

// exact counts s with the codec. The codec only errors when its regexp
// fails (no timeout is set, so in practice never); the byte bound keeps
// Count an upper bound even then.
func exact(c *bpe, s string) int {
	if isASCII(s) {
		return countASCII(c, s)
	}
	return exactCodec(c, s)
}

// exactCodec counts s with the codec itself.
func exactCodec(c *bpe, s string) int {
	n, err := c.Count(s)
	if err != nil {
		return bound(s)
	}
	return n
}

// bound is an upper bound of the token count of s: every token covers at
// least one byte of the text the codec sees, and that text is s with each
// invalid byte replaced by U+FFFD (3 bytes).
func bound(s string) int {
	if utf8.ValidString(s) {
		return len(s)
	}
	return 3 * len(s)
}

// hasLongRun reports whether s holds a whitespace run longer than LongRun
// bytes that contains '\r' or '\n'.
func hasLongRun(s string) bool {
	if len(s) <= LongRun {
		return false
	}
	start, brk := -1, false
	for i, r := range s {
		if unicode.IsSpace(r) {
			if start < 0 {
				start, brk = i, false
			}
			if r == '\n' || r == '\r' {
				brk = true
			}
			if brk && i+utf8.RuneLen(r)-start > LongRun {
				return true
			}
			continue
		}
		start = -1
	}
	return false
}

// boundaryAt reports whether i is a point no piece of the o200k split
// regexp can cross: s[i-1] is '\n' and from i come spaces or tabs (maybe
// none) and then a printable ASCII character other than '/'. Letter and
// digit pieces never contain '\n'; a punctuation piece ends with a run of
// [\r\n/], stopped here by the space, tab or character; a whitespace piece
// holding '\n' ends at the last line break of its run, which is at i-1.
// So the counts of the two sides add up to the count of s exactly.
func boundaryAt(s string, i int) bool {
	return i > 0 && i < len(s) && s[i-1] == '\n' && opensPiece(s[i:])
}

// opensPiece reports whether s, after a line break, starts a piece no
// piece before it can reach into: spaces or tabs (maybe none), then a
// printable ASCII character other than '/' (see boundaryAt).
func opensPiece(s string) bool {
	for j := 0; j < len(s); j++ {
		switch b := s[j]; {
		case b == ' ' || b == '\t':
			continue
		case b > ' ' && b < 0x7f && b != '/':
			return true
		default:
			return false
		}
	}
	return false
}

// nextBoundary returns the length of the first segment of s that is at
// least min bytes long: up to the first boundary at or after min, or all
// of s.
func nextBoundary(s string, min int) int {
	for i := max(min, 1); i < len(s); i++ {
		if s[i-1] == '\n' && boundaryAt(s, i) {
			return i
		}
	}
	return len(s)
}
