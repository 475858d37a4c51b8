package tokens

import (
	"math/rand"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestCountKnown(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"hello world", 2},
		{"Hello, world!", 4},
		{"\n", 1},
		{"    ", 1},
		{strings.Repeat("a", 64), 8}, // o200k merges 'a' runs in 8-byte pieces
	}
	for _, tt := range tests {
		if got := Count(tt.in); got != tt.want {
			t.Errorf("Count(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// pieces are fragments that stress the split regexp near line starts.
var pieces = []string{
	"\n", "\r\n", "\n\n", " ", "\t", "  ", "/", "//", "}", "{", "(", ")", "'s", "'T",
	"func", " main", "Foo", "BAR", "x", "123", "4567", "日本", "é", "\u0301", "😀",
	"\u00a0", "\u2028", "\xff", "#", "!", ".", ",", "\"", "-", "_", "a\n", "\n/",
	"\n\t", "\n  ", "\n\t}", "\t//", "\v", "\f",
}

func randText(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(pieces[r.Intn(len(pieces))])
	}
	return b.String()
}

// TestSegmentedExact checks the claim that the segments cut by nextBoundary
// add up to the count of the whole text.
func TestSegmentedExact(t *testing.T) {
	c := load()
	r := rand.New(rand.NewSource(1))
	for i := range 500 {
		s := randText(r, 1+r.Intn(300))
		if hasLongRun(s) {
			continue
		}
		want, err := lib.Count(s)
		if err != nil {
			t.Fatalf("codec count: %v", err)
		}
		if got := segmented(c, s); got != want {
			t.Fatalf("case %d: segmented(%q) = %d, want %d", i, s, got, want)
		}
		// Count and CountAtMost cut the first line off (head) and then
		// pieces of pieceMin bytes: exact as well, with or without a
		// header line above the text.
		for _, text := range []string{s, "// repo@c:a.go#L1-9 F (function) [bm25]\n" + s} {
			want, _ := lib.Count(text)
			if got := Count(text); got != want {
				t.Fatalf("case %d: Count(%q) = %d, want %d", i, text, got, want)
			}
			if got, ok := CountAtMost(text, want); got != want || !ok {
				t.Fatalf("case %d: CountAtMost(%q, %d) = %d, %v", i, text, want, got, ok)
			}
		}
	}
}

func TestCountLongWhitespaceRun(t *testing.T) {
	run := strings.Repeat(" \n", 50_000) // quadratic for the raw codec
	head := "package x\n" + run + "\n"
	tail := "func f() {}\n"
	if got, want := Count(head+tail), len(head)+Count(tail); got != want {
		t.Errorf("Count = %d, want %d (byte bound of the run segment + exact tail)", got, want)
	}
	// The bound is never below the true count: check on a run short
	// enough for the codec to count directly.
	short := strings.Repeat(" \n", LongRun)
	exactN, err := lib.Count(short)
	if err != nil {
		t.Fatal(err)
	}
	if got := Count(short); got < exactN {
		t.Errorf("Count(short run) = %d, below exact %d", got, exactN)
	}
	if !hasLongRun(short) {
		t.Errorf("hasLongRun(%d bytes of \" \\n\") = false, want true", len(short))
	}
	if hasLongRun(strings.Repeat(" ", 10*LongRun)) {
		t.Error("hasLongRun(spaces only) = true, want false")
	}
}

func TestCountAtMost(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for i := range 300 {
		s := randText(r, r.Intn(3000))
		if i%10 == 0 {
			s += strings.Repeat(" \n", LongRun) + randText(r, 100)
		}
		want := Count(s)
		limit := r.Intn(want + 10)
		got, ok := CountAtMost(s, limit)
		switch {
		case ok && (got != want || got > limit):
			t.Fatalf("CountAtMost(s, %d) = %d, true; Count = %d", limit, got, want)
		case !ok && (got <= limit || want <= limit):
			t.Fatalf("CountAtMost(s, %d) = %d, false; Count = %d", limit, got, want)
		}
	}
	if got, ok := CountAtMost("", 0); got != 0 || !ok {
		t.Errorf("CountAtMost(\"\", 0) = %d, %v; want 0, true", got, ok)
	}
}

// TestCountJoinAtMost checks CountJoinAtMost(a, b) against the count of
// a+b: header-like and random first parts, with and without a final line
// break, over random bodies (some with a long whitespace run, some opening
// with a line a piece can run on from).
func TestCountJoinAtMost(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	heads := []string{"", "// repo@abc:x.go#L1-9 F (function) [bm25]\n", "// h\n", "x", "x\n\n", "é\n", " \n"}
	for i := range 600 {
		a := heads[i%len(heads)]
		if i%5 == 0 {
			a = randText(r, r.Intn(40))
		}
		b := randText(r, r.Intn(1500))
		switch i % 9 {
		case 1:
			b = "\t" + b
		case 2:
			b = "/" + b
		case 3:
			b = strings.Repeat(" \n", LongRun) + b
		case 4:
			b = strings.Repeat("x", 2*pieceMin) + "\n" + b
		}
		want := Count(a + b)
		for _, limit := range []int{0, want / 2, want - 1, want, want + 5} {
			got, ok := CountJoinAtMost(a, b, limit)
			switch {
			case ok && (got != want || got > limit):
				t.Fatalf("case %d: CountJoinAtMost(%q, %q, %d) = %d, true; Count = %d", i, a, b, limit, got, want)
			case !ok && (got <= limit || want <= limit):
				t.Fatalf("case %d: CountJoinAtMost(%q, %q, %d) = %d, false; Count = %d", i, a, b, limit, got, want)
			}
		}
	}
}

func TestCountInvalidUTF8(t *testing.T) {
	s := strings.Repeat("\xff", 1000)
	if got := Count(s); got <= 0 || got > 3*len(s) {
		t.Errorf("Count(invalid) = %d, want in (0, %d]", got, 3*len(s))
	}
}

func TestCountConcurrent(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	texts := make([]string, 50)
	want := make([]int, len(texts))
	for i := range texts {
		texts[i] = randText(r, 200)
		want[i] = Count(texts[i])
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8*len(texts))
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, s := range texts {
				if got := Count(s); got != want[i] {
					errs <- s
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("concurrent Count(%q) differs from serial count", s)
	}
}

// BenchmarkCount counts this package's own source, repeated to ~100 KiB,
// and reports tokens per second.
func BenchmarkCount(b *testing.B) {
	src, err := os.ReadFile("tokens.go")
	if err != nil {
		b.Fatal(err)
	}
	s := strings.Repeat(string(src), 100_000/len(src)+1)
	n := Count(s)
	b.SetBytes(int64(len(s)))
	b.ResetTimer()
	for b.Loop() {
		Count(s)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkCountSmall is the packer's typical call: one chunk of ~40 lines.
func BenchmarkCountSmall(b *testing.B) {
	src, err := os.ReadFile("tokens.go")
	if err != nil {
		b.Fatal(err)
	}
	s := string(src[:1500])
	n := Count(s)
	for b.Loop() {
		Count(s)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// TestCountJoinSplit checks the join of a header and a tail that meet
// inside a piece (see join.go) against the codec's count of the whole
// text: stub headers over doc and signature tails, and random ASCII on
// both sides (contractions, runs of spaces and line breaks, slashes at the
// join), at limits around the count; and again with the tables warm.
func TestCountJoinSplit(t *testing.T) {
	c := load()
	r := rand.New(rand.NewSource(5))
	alphabet := []string{"a", "Z", "7", "s", "t", "ll", "e", "D", "L", " ", "  ", "\t", "\n", "\r\n", "'", "'s", "'ll", "'RE", "/", "//", "]", ")", ",", "(", "x'", "\v", "\x00", "\x7e"}
	ascii := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(alphabet[r.Intn(len(alphabet))])
		}
		return b.String()
	}
	heads := []string{
		"// compile@worktree-bcd1:ssa/rewrite.go#L10-42 (*Func).newValue (method, stub) [bm25,graph]",
		"// r@c:a.go#L1-1 F (function, stub)", "// r@c:a.go#L1-1 (stub) [symbol]", "// r@c:a.go#L3-4 x's (stub) [bm25]",
	}
	tails := []string{"\n// Doc says.\nfunc F()", "\n//\n// two\n//\nfunc F(x int) error", "\nfunc F()", "\n'll go", "\n", "", "\n  \n\t", "\n/x"}
	type pair struct{ a, b string }
	// Pieces that read past their end: contractions cut at the join, a
	// run of spaces that leaves its last one to the next piece.
	cases := []pair{{"abc'l", "l"}, {"abc'L", "L x"}, {"abc'", "s"}, {"abc'r", "e"}, {"Ab'", "ve"}, {"x  ", "y"}, {"x ", "\n"}, {"x\n", "  y"}, {"]", "\n//"}}
	for i := range 3000 {
		a, b := heads[i%len(heads)], tails[i%len(tails)]
		switch i % 4 {
		case 1:
			a = ascii(1 + r.Intn(30))
		case 2:
			b = ascii(r.Intn(30))
		case 3:
			a, b = ascii(1+r.Intn(30)), ascii(r.Intn(30))
		}
		if hasLongRun(a + b) {
			continue
		}
		cases = append(cases, pair{a, b})
	}
	pieces := func(s string) (out []string) {
		splitASCII(s, func(p string) { out = append(out, p) })
		return out
	}
	for i, p := range cases {
		// The split itself: a's pieces before the cut, then those of
		// the rest read on its own, are the pieces of a+b.
		sp := splitOf(c, p.a)
		var got []string
		for _, pc := range pieces(p.a) {
			if n := len(strings.Join(got, "")); n >= int(sp.at) {
				break
			}
			got = append(got, pc)
		}
		got = append(got, pieces(p.a[sp.at:]+p.b)...)
		if want := pieces(p.a + p.b); !slices.Equal(got, want) {
			t.Fatalf("case %d: split of %q at %d before %q: pieces %q, want %q", i, p.a, sp.at, p.b, got, want)
		}
	}
	for round := range 2 {
		for i, p := range cases {
			want, err := lib.Count(p.a + p.b)
			if err != nil {
				t.Fatal(err)
			}
			for _, limit := range []int{0, want / 2, want - 1, want, want + 5} {
				got, ok := CountJoinAtMost(p.a, p.b, limit)
				switch {
				case ok && (got != want || got > limit):
					t.Fatalf("round %d, case %d: CountJoinAtMost(%q, %q, %d) = %d, true; codec %d", round, i, p.a, p.b, limit, got, want)
				case !ok && (got <= limit || want <= limit):
					t.Fatalf("round %d, case %d: CountJoinAtMost(%q, %q, %d) = %d, false; codec %d", round, i, p.a, p.b, limit, got, want)
				}
			}
		}
	}
}
