package query

import (
	"context"
	"sort"
	"strings"
	"unicode/utf8"
)

// armBM25Literal is the quoted-text ranking, fused as part of the bm25 arm:
// chunks that contain, verbatim, a text the query quotes. A task that
// quotes a message ("Restore 'Stack backtrace:' above the backtrace",
// "erroneous use of 'schema'") names the string literal the change edits;
// the words alone are spread over every file that mentions backtraces.
const armBM25Literal = "bm25-literal"

// Quoted-text limits: spans of minLiteral to maxLiteral bytes, at most
// maxLiterals of them, each kept only if fewer than maxLiteralShare of the
// chunks contain it (a quoted common word says nothing).
const (
	minLiteral      = 3
	maxLiteral      = 80
	maxLiterals     = 4
	maxLiteralShare = 0.05
)

// quotePairs are the quote characters of prose: ASCII and typographic.
var quotePairs = map[rune]rune{'\'': '\'', '"': '"', '“': '”', '‘': '’'}

// literals returns the quoted spans of q. An opening quote must start a
// word (so "don't" opens nothing) and its closing quote must end one.
//
// It runs in one pass: for each closing quote character it keeps the
// position of the next quote of that kind that ends a word, and that
// position only moves forward, so a query of n bytes costs O(n) whatever
// its quotes (` "x` repeated used to cost O(n²): every opener scanned to
// the end of the line).
func literals(q string) []string {
	var out []string
	next := map[rune]int{} // closer -> position of its next word-ending occurrence at or after from
	from := map[rune]int{} // closer -> where the search for next resumed
	newline := -1          // position of the next newline at or after i, len(q) if none
	closerAt := func(c rune, start int) int {
		if p, ok := next[c]; ok && p >= start {
			return p
		}
		j := max(start, from[c])
		for j < len(q) {
			r, n := utf8.DecodeRuneInString(q[j:])
			if r == c {
				after, _ := utf8.DecodeRuneInString(q[j+n:])
				if j+n == len(q) || strings.ContainsRune(" \t\n.,;:!?)]}", after) {
					break
				}
			}
			j += n
		}
		next[c], from[c] = j, j
		return j
	}
	for i := 0; i < len(q) && len(out) < maxLiterals; {
		r, n := utf8.DecodeRuneInString(q[i:])
		closer, ok := quotePairs[r]
		prev, _ := utf8.DecodeLastRuneInString(q[:i])
		if !ok || i > 0 && !strings.ContainsRune(" \t\n([{:,", prev) {
			i += n
			continue
		}
		start := i + n
		if newline < start {
			newline = strings.IndexByte(q[start:], '\n')
			if newline < 0 {
				newline = len(q)
			} else {
				newline += start
			}
		}
		end := closerAt(closer, start)
		if end >= len(q) || end > newline {
			i += n
			continue
		}
		span := q[start:end]
		if len(span) >= minLiteral && len(span) <= maxLiteral && strings.TrimSpace(span) == span {
			out = append(out, span)
		}
		i = end + utf8.RuneLen(closer)
	}
	return out
}

// literalArm ranks the chunks whose text contains a quoted span of q,
// rarer spans first; nil if q quotes nothing or nothing matches. It stops
// with ctx's error when ctx ends.
func (e *Engine) literalArm(ctx context.Context, q string, keep func(int) bool) ([]int, error) {
	spans := literals(q)
	if len(spans) == 0 {
		return nil, nil
	}
	seg := e.Seg
	score := map[int]float64{}
	limit := max(1, int(maxLiteralShare*float64(len(seg.Chunks))))
	for _, s := range spans {
		var hits []int
		for id := range seg.Chunks {
			if id%1024 == 1023 && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if strings.Contains(seg.Chunks[id].Body, s) {
				hits = append(hits, id)
				if len(hits) > limit {
					break
				}
			}
		}
		if len(hits) > limit {
			continue
		}
		for _, id := range hits {
			score[id] += 1 / float64(len(hits))
		}
	}
	ids := make([]int, 0, len(score))
	for id := range score {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool {
		if score[ids[a]] != score[ids[b]] {
			return score[ids[a]] > score[ids[b]]
		}
		return ids[a] < ids[b]
	})
	if len(ids) > 50 {
		ids = ids[:50]
	}
	return filterIDs(ids, keep), nil
}
