package query

import (
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
func literals(q string) []string {
	var out []string
	for i := 0; i < len(q) && len(out) < maxLiterals; {
		r, n := utf8.DecodeRuneInString(q[i:])
		closer, ok := quotePairs[r]
		prev, _ := utf8.DecodeLastRuneInString(q[:i])
		if !ok || i > 0 && !strings.ContainsRune(" \t\n([{:,", prev) {
			i += n
			continue
		}
		rest := q[i+n:]
		end := -1
		for j, c := range rest {
			if c == '\n' {
				break
			}
			if c == closer {
				next, _ := utf8.DecodeRuneInString(rest[j+utf8.RuneLen(c):])
				if j+utf8.RuneLen(c) == len(rest) || strings.ContainsRune(" \t\n.,;:!?)]}", next) {
					end = j
					break
				}
			}
		}
		if end < 0 {
			i += n
			continue
		}
		span := rest[:end]
		if len(span) >= minLiteral && len(span) <= maxLiteral && strings.TrimSpace(span) == span {
			out = append(out, span)
		}
		i += n + end + utf8.RuneLen(closer)
	}
	return out
}

// literalArm ranks the chunks whose text contains a quoted span of q,
// rarer spans first; nil if q quotes nothing or nothing matches.
func (e *Engine) literalArm(q string, keep func(int) bool) []int {
	spans := literals(q)
	if len(spans) == 0 {
		return nil
	}
	seg := e.Seg
	score := map[int]float64{}
	limit := max(1, int(maxLiteralShare*float64(len(seg.Chunks))))
	for _, s := range spans {
		var hits []int
		for id := range seg.Chunks {
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
	return filterIDs(ids, keep)
}
