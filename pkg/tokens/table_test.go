package tokens

import (
	"math"
	"math/rand"
	"strings"
	"testing"
	"unsafe"
)

// TestStrTab checks the table against a map through puts (new keys and
// overwrites, the empty key, keys that share prefixes) and gets of present
// and missing keys, across its growth.
func TestStrTab(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	var tab strTab[int]
	ref := map[string]int{}
	key := func() string {
		n := r.Intn(12)
		if r.Intn(50) == 0 {
			n = 100 + r.Intn(900)
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = "ab\n "[r.Intn(4)]
		}
		return string(b)
	}
	for i := range 200000 {
		k := key()
		if r.Intn(3) == 0 {
			v := r.Int()
			tab.put(k, v)
			ref[k] = v
		}
		got, ok := tab.get(k)
		want, wok := ref[k]
		if ok != wok || got != want {
			t.Fatalf("step %d: get(%q) = %d, %v; want %d, %v", i, k, got, ok, want, wok)
		}
		if tab.len() != len(ref) {
			t.Fatalf("step %d: len %d, want %d", i, tab.len(), len(ref))
		}
	}
	for k, want := range ref {
		if got, ok := tab.get(k); !ok || got != want {
			t.Fatalf("get(%q) = %d, %v; want %d", k, got, ok, want)
		}
	}
}

// TestCachesCopyKeys counts texts that live in a buffer, writes other
// text of the same length over the buffer, and then looks the first texts
// up in each cache (pieces, segments, header cuts): they must still be
// there, with their counts, so the caches copied what they keep instead of
// holding views of the buffer (a view would now read as the new text, and
// would keep the whole buffer alive). And the new text must count as the
// codec counts it. The packer relies on this to reuse its header buffer
// from query to query.
func TestCachesCopyKeys(t *testing.T) {
	c := load()
	r := rand.New(rand.NewSource(3))
	word := func() string {
		return []string{"alpha", "Beta", "gamma_delta", "x", "42", "(*Func)", "[bm25,graph]", " ", "\n", "//", "\t"}[r.Intn(11)]
	}
	text := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(word())
		}
		return b.String()[:n]
	}
	const stub = "\n// doc of the function\nfunc f(x int) error"
	for i := range 300 {
		n := 20 + r.Intn(1000)
		a, b := text(n), text(n)
		if a == b {
			continue
		}
		buf := []byte(a)
		view := unsafe.String(&buf[0], len(buf))
		piece := view[:matchASCII(view, 0)]
		wantPiece := exactCodec(c, a[:len(piece)])
		pieceTab.Load().count(c, piece)
		wantSeg, _ := cachedAtMost(c, view, math.MaxInt)
		wantSplit := splitOf(c, view)
		copy(buf, b) // view now reads b

		if len(piece) > 1 && len(piece) <= 64 {
			sh := &pieceTab.Load().shards[shardOf(a[:len(piece)])]
			sh.RLock()
			got, ok := sh.m.get(a[:len(piece)])
			sh.RUnlock()
			if !ok || got != wantPiece {
				t.Fatalf("text %d: piece %q in the piece table: %d, %v; want %d", i, a[:len(piece)], got, ok, wantPiece)
			}
		}
		sh := &memo[shardOf(a)]
		sh.Lock()
		got, ok := sh.m.get(a)
		sh.Unlock()
		if !ok || got != wantSeg {
			t.Fatalf("text %d: segment cache: %d, %v; want %d", i, got, ok, wantSeg)
		}
		st := splitCache.Load()
		ss := &st.shards[shardOf(a)]
		ss.RLock()
		sp, ok := ss.m.get(a)
		ss.RUnlock()
		if !ok || sp != wantSplit {
			t.Fatalf("text %d: header cuts: %v, %v; want %v", i, sp, ok, wantSplit)
		}

		for _, s := range []string{a, b, b + stub} {
			want, err := lib.Count(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := Count(strings.Clone(s)); got != want {
				t.Fatalf("text %d: Count = %d, want %d (codec)", i, got, want)
			}
		}
		want, _ := lib.Count(b + stub)
		if got, _ := CountJoinAtMost(strings.Clone(b), stub, math.MaxInt); got != want {
			t.Fatalf("text %d: CountJoinAtMost = %d, want %d (codec)", i, got, want)
		}
	}
}

// TestPrefixCount checks the packer's lower bound: for ASCII a and b, the
// codec's count of a+b is at least PrefixCount(a), and the pieces the bound
// counts are the first pieces of a+b's split (those ending by the cut,
// each counted as the codec counts it).
func TestPrefixCount(t *testing.T) {
	c := load()
	r := rand.New(rand.NewSource(9))
	alphabet := []string{"a", "Z", "7", "s", "t", "l", "r", "v", "ll", "e", "D", " ", "  ", "\t", "\n", "\r\n", "'", "'s", "'ll", "/", "//", "]", ")", ",", "(", "#L", "@", ":", "-", "\x00", "\x7e", "\v"}
	ascii := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(alphabet[r.Intn(len(alphabet))])
		}
		return b.String()
	}
	heads := []string{
		"// compile@worktree-bcd1:ssa/rewrite.go#L10-42 (*Func).newValue",
		"// r@c:a.go#L1-1", "// r@c:a.go#L3-4 x's", "// acme/app@0123456789ab:b/c.py#L-2-1 Foo.bar",
	}
	// Pieces that read past their end: contractions cut at the join, a
	// run of spaces that leaves its last one to the next piece.
	edges := [][2]string{{"abc'l", "l"}, {"abc'L", "L x"}, {"abc'", "s"}, {"abc'r", "e"}, {"Ab'", "ve"}, {"x  ", "y"}, {"x ", "\n"}, {"x\n", "  y"}, {"]", "\n//"}}
	for i := range 4000 {
		a := heads[i%len(heads)]
		if i%2 == 1 {
			a = ascii(1 + r.Intn(40))
		}
		b := ascii(r.Intn(60))
		if i < len(edges) {
			a, b = edges[i][0], edges[i][1]
		}
		if hasLongRun(a + b) {
			continue
		}
		n, ok := PrefixCount(a)
		if !ok {
			t.Fatalf("case %d: PrefixCount(%q) not ok", i, a)
		}
		want, err := lib.Count(a + b)
		if err != nil {
			t.Fatal(err)
		}
		if want < n {
			t.Fatalf("case %d: Count(%q) = %d, below PrefixCount(%q) = %d", i, a+b, want, a, n)
		}
		sp := cutOf(c, a)
		sum, at := 0, 0
		for at < int(sp.at) {
			j := matchASCII(a+b, at)
			k, err := lib.Count((a + b)[at:j])
			if err != nil {
				t.Fatal(err)
			}
			sum += k
			at = j
		}
		if at != int(sp.at) || sum != n {
			t.Fatalf("case %d: %q + %q: the pieces of the whole up to %d end at %d and count %d; PrefixCount %d", i, a, b, sp.at, at, sum, n)
		}
	}
	for _, s := range []string{"", "é", "a\x7f"} {
		if n, ok := PrefixCount(s); ok || n != 0 {
			t.Errorf("PrefixCount(%q) = %d, %v; want 0, false", s, n, ok)
		}
	}
}
