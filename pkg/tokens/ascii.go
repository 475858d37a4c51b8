package tokens

import (
	"math"
	"sync"
	"sync/atomic"
)

// The codec splits a text with o200k's regular expression (run by a
// backtracking engine that converts the text to runes and allocates a
// matcher per call) and then BPE-merges each piece on its own. For ASCII
// text, which is most code, splitASCII below cuts exactly the same pieces
// in one pass, and the count of each distinct piece is looked up in a
// table filled by the codec on first sight: the sum is the codec's count.
// TestASCIISplit checks the split against the regular expression itself.

// countASCII returns the o200k count of s, which must be ASCII.
func countASCII(c *bpe, s string) int {
	n, _ := countASCIIAtMost(c, s, math.MaxInt)
	return n
}

// countASCIIAtMost is countASCII when that is at most limit; otherwise it
// may stop early and return a number above limit. Every piece is at least
// one token, so more pieces than limit settle it before any look-up.
func countASCIIAtMost(c *bpe, s string, limit int) (int, bool) {
	if limit < len(s) { // else the pieces cannot outnumber limit
		np := 0
		for i := 0; i < len(s) && np <= limit; np++ {
			i = matchASCII(s, i)
		}
		if np > limit {
			return np, false
		}
	}
	t := pieceTab.Load()
	n := 0
	for i := 0; i < len(s) && n <= limit; {
		j := matchASCII(s, i)
		n += t.count(c, s[i:j])
		i = j
	}
	return n, n <= limit
}

// pieceTable maps a piece of the split to its token count, in shards so
// that concurrent queries rarely wait for each other.
type pieceTable struct {
	shards [16]struct {
		sync.RWMutex
		m strTab[int] // keys copied (see strTab)
	}
	bytes atomic.Int64
}

// pieceTableMax bounds the bytes of the pieces remembered; the table starts
// afresh when they reach it. Code's pieces are words and punctuation of a
// few bytes, so this is a few hundred thousand pieces, about 10 MB with the
// table's slots (24 bytes a piece, at most 3/4 of them used).
const pieceTableMax = 2 << 20

var pieceTab atomic.Pointer[pieceTable]

func init() { pieceTab.Store(&pieceTable{}) }

func (t *pieceTable) count(c *bpe, p string) int {
	if len(p) == 1 {
		return 1 // every byte is a token of o200k
	}
	sh := &t.shards[shardOf(p)]
	sh.RLock()
	n, ok := sh.m.get(p)
	sh.RUnlock()
	if ok {
		return n
	}
	n = exactCodec(c, p)
	if len(p) > 64 { // long pieces (runs of spaces, punctuation) rarely repeat
		return n
	}
	if t.bytes.Add(int64(len(p))) > pieceTableMax {
		pieceTab.CompareAndSwap(t, &pieceTable{})
		return n
	}
	sh.Lock()
	sh.m.put(p, n)
	sh.Unlock()
	return n
}

func shardOf(p string) int {
	return int(p[0]^p[len(p)-1]^byte(len(p))) & 15
}

// isASCII reports whether s is ASCII without DEL, which the engine matches
// nowhere (so the codec skips it): text with it is left to the codec.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// ASCII classes of the o200k expression: \p{L} is a letter, \p{N} a digit,
// \s one of \t \n \v \f \r and space.
func isLower(b byte) bool  { return 'a' <= b && b <= 'z' }
func isUpper(b byte) bool  { return 'A' <= b && b <= 'Z' }
func isLetter(b byte) bool { return isLower(b) || isUpper(b) }
func isDigit(b byte) bool  { return '0' <= b && b <= '9' }
func isSpace(b byte) bool  { return b == ' ' || ('\t' <= b && b <= '\r') }

// isPunct is [^\s\p{L}\p{N}].
func isPunct(b byte) bool { return !isSpace(b) && !isLetter(b) && !isDigit(b) }

// splitASCII yields the pieces o200k's expression cuts from the ASCII text
// s, in order:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}
//	| ?[^\s\p{L}\p{N}]+[\r\n/]*
//	|\s*[\r\n]+
//	|\s+(?!\S)
//	|\s+
//
// The alternatives are tried in order at each position, as the
// backtracking engine does.
func splitASCII(s string, yield func(string)) {
	for i := 0; i < len(s); {
		j := matchASCII(s, i)
		yield(s[i:j])
		i = j
	}
}

// matchASCII returns the end of the piece that starts at i.
func matchASCII(s string, i int) int {
	n := len(s)
	// Alternatives 1 and 2: an optional prefix, then letters.
	k := i
	if b := s[k]; b != '\r' && b != '\n' && !isLetter(b) && !isDigit(b) {
		k++
	}
	if k < n && isLetter(s[k]) {
		u := k
		for u < n && isUpper(s[u]) {
			u++
		}
		l := u
		for l < n && isLower(s[l]) {
			l++
		}
		// Alternative 1 needs a lower-case letter after the capitals,
		// alternative 2 at least one capital; either way the match runs
		// to the end of the lower-case letters.
		if l > u || u > k {
			return contraction(s, l)
		}
	}
	b := s[i]
	switch {
	case isDigit(b):
		j := i + 1
		for j < n && j < i+3 && isDigit(s[j]) {
			j++
		}
		return j
	case isPunct(b) || (b == ' ' && i+1 < n && isPunct(s[i+1])):
		j := i + 1
		for j < n && isPunct(s[j]) {
			j++
		}
		for j < n && (s[j] == '\r' || s[j] == '\n' || s[j] == '/') {
			j++
		}
		return j
	}
	// Whitespace: b is one of \s. The engine matches \s*[\r\n]+ as if
	// \s* stopped at the first line break: "\n \n" is cut "\n", " \n"
	// (TestASCIISplit pins this down).
	j := i
	for j < n && isSpace(s[j]) && s[j] != '\r' && s[j] != '\n' {
		j++
	}
	if j < n && (s[j] == '\r' || s[j] == '\n') {
		for j < n && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	end := j // the run has no line break
	switch {
	case end == n || end-i == 1: // \s+(?!\S) to the end, or \s+ of one
		return end
	default: // \s+(?!\S): leave the last space to the next piece
		return end - 1
	}
}

// contraction extends a letter run ending at j by 's 't 're 've 'm 'll 'd
// (any case).
func contraction(s string, j int) int {
	if j+1 >= len(s) || s[j] != '\'' {
		return j
	}
	lower := func(b byte) byte { return b | 0x20 }
	switch lower(s[j+1]) {
	case 's', 't', 'm', 'd':
		return j + 2
	case 'r', 'v':
		if j+2 < len(s) && lower(s[j+2]) == 'e' {
			return j + 3
		}
	case 'l':
		if j+2 < len(s) && lower(s[j+2]) == 'l' {
			return j + 3
		}
	}
	return j
}
