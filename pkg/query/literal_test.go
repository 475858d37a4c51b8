package query

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// literalsByScan is the former quoted-text scan, which looked for each
// opener's closer from scratch (O(n²) on ` "x` repeated). literals must
// give the same spans.
func literalsByScan(q string) []string {
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

func FuzzLiterals(f *testing.F) {
	for _, s := range []string{
		`fix "Stack backtrace:" above`, `don't 'x' "abc" 'def'`, ` "x "x "x`, "“curly” ‘one’ 'two'\n'three'",
		"'a\nb' 'abc'", `("paren") [“x y z”]`, "\xff'abc'\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		if got, want := literals(q), literalsByScan(q); !slices.Equal(got, want) {
			t.Fatalf("literals(%q) = %q, want %q", q, got, want)
		}
	})
}

// hostileQuote is the query that made the old scan quadratic: every `"`
// opens, and no closer ends a word.
func hostileQuote(n int) string { return strings.Repeat(` "x`, n/3) }

// The scan of a hostile query is linear: 100x the input costs about 100x,
// not 10,000x. Timed against itself in one run, so the machine's speed
// cancels out, and with the sizes 100x apart the bound (1,000x) is a
// decade from each side, so a loaded machine's noise does not fail it
// (at 10x apart, linear 10 and quadratic 100, a run at load 15 measured 48).
func TestLiteralsLinear(t *testing.T) {
	cost := func(n int) time.Duration {
		q := hostileQuote(n)
		best := time.Duration(1 << 62)
		for range 5 {
			t0 := time.Now()
			literals(q)
			best = min(best, time.Since(t0))
		}
		return best
	}
	small, large := cost(10_000), cost(1_000_000)
	ratio := float64(large) / float64(max(small, time.Microsecond))
	t.Logf("1 MB %v, 10 KB %v: ratio %.0f", large, small, ratio)
	if ratio > 1000 {
		t.Errorf("1 MB took %v, 10 KB %v: ratio %.0f, want about 100 (linear)", large, small, ratio)
	}
}

func BenchmarkLiterals(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		q := hostileQuote(n)
		b.Run(strconv.Itoa(n/1000)+"KB", func(b *testing.B) {
			b.SetBytes(int64(len(q)))
			for b.Loop() {
				literals(q)
			}
		})
	}
}

// A query whose client went away stops with the context's error.
func TestSearchCancelled(t *testing.T) {
	seg := buildSeg(t, map[string]string{"a.go": "package a\n\n// Run runs.\nfunc Run() {}\n"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := (&Engine{Seg: seg}).Search(ctx, Request{Query: `Run "runs" 'x'`})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Search after cancel = %v, want context.Canceled", err)
	}
}
