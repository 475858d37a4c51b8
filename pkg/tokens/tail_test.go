package tokens

import (
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// TestTail checks Tail.CountJoinAtMost against CountJoinAtMost: texts
// counted under many heads, at limits in random order (so that what a
// Tail keeps, exact counts and bounds, is read back at other limits),
// from several goroutines.
func TestTail(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	heads := []string{
		"", "x", "é\n", " \n", "// h\n",
		"// compile@worktree-bcd1:ssa/rewrite.go#L10-42 (*Func).newValue (method) [bm25,graph]\n",
		"// compile@worktree-bcd1:ssa/rewrite.go#L10-42 (*Func).newValue (method, stub) [bm25,graph]",
		"// r@c:a.go#L1-1 F (function, stub)", "// r@c:a.go#L1-1 (stub) [symbol]", "// r@c:a.go#L3-4 x's (stub) [bm25]",
		"// r@c:a.go#L1-1 F (function, stub) [bm25,symbol,graph]", "abc'l", "abc'", "x  ", "]",
	}
	texts := []string{"\n// Doc says.\nfunc F()", "\n//\n// two\n//\nfunc F(x int) error", "\nfunc F()", "\n'll go", "\n", "",
		"\n  \n\t", "\n/x", "l", "s", "ve", "  y", "func F() {\n\treturn\n}", "/ comment\nx", "\tindented", "é body",
		// Past joinSplit's bound: cut after the first line, or not at all.
		"// c\n" + strings.Repeat("word ", 1200), "// " + strings.Repeat("word ", 1200) + "\nfunc F() {}"}
	for range 60 {
		b := randText(r, r.Intn(1500))
		switch r.Intn(6) {
		case 1:
			b = "\n// " + b
		case 2:
			b = strings.Repeat(" \n", LongRun) + b
		case 3:
			b = strings.Repeat("x", 2*pieceMin) + "\n" + b
		}
		texts = append(texts, b)
	}
	// Heads of one text share a prefix (a header's chunk fields) and end
	// in one of a few ways (kind and signals); some are other texts.
	prefixes := []string{"// compile@worktree-bcd1:ssa/rewrite.go#L10-42 (*Func).newValue", "// r@c:a.go#L1-1 F", "// r@c:a.go#L3-4 x", "abc", "// é:x#L1-2 s"}
	ends := []string{" (method) [bm25,graph]\n", " (method, stub) [bm25,graph]", " (function, stub)", " (stub) [symbol]", "'s (stub) [bm25]",
		" (function, stub) [bm25,symbol,graph]", "'l", "'", "  ", "]", "\n", ""}
	type q struct {
		head         string
		fixed, limit int
	}
	var wg sync.WaitGroup
	errs := make(chan string, 1)
	grew := make([]*atomic.Int64, len(texts))
	for ti, text := range texts {
		grown := new(atomic.Int64)
		grew[ti] = grown
		tail := NewTail(text, func(n int64) { grown.Add(n) })
		if tail.Text() != text {
			t.Fatalf("Text() = %q, want %q", tail.Text(), text)
		}
		var qs []q
		prefix := prefixes[ti%len(prefixes)]
		add := func(h string, fixed int) {
			want := Count(h + text)
			for _, l := range []int{0, want / 3, want / 2, want - 1, want, want + 5, -1} {
				qs = append(qs, q{h, fixed, l})
			}
		}
		for _, e := range ends {
			add(prefix+e, len(prefix))
		}
		for _, h := range heads {
			fixed := 0
			if r.Intn(3) == 0 {
				h = randText(r, r.Intn(30))
			}
			if r.Intn(2) == 0 {
				fixed = r.Intn(len(h) + 1)
			}
			add(h, fixed)
		}
		r.Shuffle(len(qs), func(i, j int) { qs[i], qs[j] = qs[j], qs[i] })
		// The first call names the prefix.
		if got, ok := tail.CountJoinAtMost(prefix+ends[0], len(prefix), 1<<20); !ok || got != Count(prefix+ends[0]+text) {
			t.Fatalf("text %d: first count %d, %v", ti, got, ok)
		}
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < len(qs); i += 2 { // overlapping thirds
					h, l := qs[i].head, qs[i].limit
					want := Count(h + text)
					got, ok := tail.CountJoinAtMost(h, qs[i].fixed, l)
					if (ok && (got != want || got > l)) || (!ok && (got <= l || want <= l)) {
						select {
						case errs <- fmt.Sprintf("text %d: Tail(%.60q).CountJoinAtMost(%q, %d) = %d, %v; Count %d", ti, text, h, l, got, ok, want):
						default:
						}
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	select {
	case e := <-errs:
		t.Fatal(e)
	default:
	}
	// What a Tail tells it took: its prefix, and heads up to the bound.
	for ti, g := range grew {
		most := int64(len(prefixes[ti%len(prefixes)])+16) + maxTailHeads*int64(unsafe.Sizeof(headEntry{})+40)
		n := g.Load()
		if texts[ti] == "" { // counted as the head alone: nothing kept
			most = 0
		}
		if n > most || n <= 0 && most > 0 {
			t.Errorf("text %d: the Tail says it took %d bytes, want 1-%d", ti, n, most)
		}
	}
}

// TestSettle checks what settle keeps: exact counts over bounds, the
// higher bound over the lower, and a bound above the limit answers
// without counting.
func TestSettle(t *testing.T) {
	calls := 0
	count := func(n int) func(int) (int, bool) {
		return func(limit int) (int, bool) {
			calls++
			if n <= limit {
				return n, true
			}
			return limit + 1, false
		}
	}
	tests := []struct {
		v     int64
		limit int
		n     int // the text's count
		want  int64
		fits  bool
		calls int
	}{
		{0, 10, 5, 6, true, 1},
		{0, 3, 5, -4, false, 1},
		{-4, 3, 5, -4, false, 0},
		{-4, 4, 5, -5, false, 1},
		{-4, 9, 5, 6, true, 1},
		{6, 2, 5, 6, false, 0},
		{6, 9, 5, 6, true, 0},
	}
	for _, tc := range tests {
		calls = 0
		_, ok, w := settle(tc.v, tc.limit, count(tc.n))
		if ok != tc.fits || w != tc.want || calls != tc.calls {
			t.Errorf("settle(%d, %d) of %d: fits %v, keeps %d, %d calls; want %v, %d, %d calls", tc.v, tc.limit, tc.n, ok, w, calls, tc.fits, tc.want, tc.calls)
		}
	}
}
