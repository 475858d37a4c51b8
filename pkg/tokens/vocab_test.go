package tokens

import (
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// lib is the library's own codec, the oracle of these tests. It is made at
// package initialisation, before load drops the library's package
// variable (the codec keeps its own reference to the map).
var lib = func() tokenizer.Codec {
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		panic(err)
	}
	return c
}()

// vocabTexts is the corpus of TestVocabCount: every .go file of
// $GOROOT/src/go (all of $GOROOT/src with CODECTX_VOCAB_CORPUS=all, some
// 10,000 files and 2.7 million lines, a few minutes; $GOROOT/src/strings
// with -short), whole and cut into lines, and random strings over code,
// Unicode letters, marks, digits, spaces and invalid bytes.
func vocabTexts(t *testing.T) []string {
	var texts []string
	root := filepath.Join(runtime.GOROOT(), "src")
	switch {
	case os.Getenv("CODECTX_VOCAB_CORPUS") == "all":
	case testing.Short():
		root = filepath.Join(root, "strings")
	default:
		root = filepath.Join(root, "go")
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		texts = append(texts, string(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(texts) < 10 {
		t.Fatalf("only %d files under %s", len(texts), root)
	}
	alphabet := []string{"a", "Z", "é", "É", "ß", "日本語", "한국어", "Привет", "مرحبا", "\u0301", "\u0903",
		"٣", "5", "123456", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u2028", "\u3000", "😀", "👍🏽",
		"'s", "'LL", "//", "{", "}", "(", ")", ".", "_", "\xff", "\xe6\x97", "\x80", "\x7f", "\x00",
		"func", " main", "Foo", "BAR", "aaaaaaaaaaaaaaaa", "ababababababababababab", "=====", "-->"}
	r := rand.New(rand.NewSource(12))
	for range 20000 {
		var b strings.Builder
		for range 1 + r.Intn(60) {
			if r.Intn(4) == 0 {
				b.WriteRune(rune(r.Intn(0x3000)))
			} else {
				b.WriteString(alphabet[r.Intn(len(alphabet))])
			}
		}
		texts = append(texts, b.String())
	}
	// Long pieces past the scan's threshold go through the heap merge.
	for i := range 200 {
		var b strings.Builder
		for b.Len() < 96+i*3 {
			b.WriteString(alphabet[r.Intn(5)])
		}
		texts = append(texts, b.String(), strings.Repeat("x", 90+i), strings.Repeat("é", 40+i))
	}
	return texts
}

// TestVocabCount checks that the pointer-free vocabulary counts exactly as
// the library's codec.
func TestVocabCount(t *testing.T) {
	v := load()
	if libVocab != nil {
		t.Fatal("the library's vocabulary map is still referenced")
	}
	texts := vocabTexts(t)
	lines := 0
	check := func(s string) {
		want, err := lib.Count(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.Count(s)
		if err != nil || got != want {
			t.Fatalf("Count(%q) = %d, %v; library %d", s, got, err, want)
		}
	}
	for _, s := range texts {
		if hasLongRun(s) {
			continue // quadratic in the library's expression
		}
		check(s)
		if len(s) > 2000 {
			for _, l := range strings.SplitAfter(s, "\n") {
				check(l)
				lines++
			}
		}
	}
	t.Logf("%d texts, %d lines", len(texts), lines)
}

// TestVocabTokens checks every token of the vocabulary: each is one token,
// and its rank is the library's (Encode of the token, where the token is
// its own split; tokens that the split would cut are checked by count).
func TestVocabTokens(t *testing.T) {
	v := load()
	if len(v.rank) < 199_000 {
		t.Fatalf("%d tokens", len(v.rank))
	}
	checked := 0
	for e := range v.rank {
		tok := string(v.arena[v.off[e]:v.off[e+1]])
		if r, ok := v.lookup(tok); !ok || r != v.rank[e] {
			t.Fatalf("lookup(%q) = %d, %v; want %d", tok, r, ok, v.rank[e])
		}
		if !utf8.ValidString(tok) {
			continue // the library sees U+FFFD for its invalid bytes
		}
		ids, _, err := lib.Encode(tok)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 1 {
			if uint32(ids[0]) != v.rank[e] {
				t.Fatalf("rank of %q: %d, library %d", tok, v.rank[e], ids[0])
			}
			checked++
		}
	}
	if checked < 150_000 {
		t.Fatalf("only %d ranks compared", checked)
	}
	for _, s := range []string{"", "\x00\x01", "not a token at all, surely"} {
		if _, ok := v.lookup(s); ok && len(s) > 2 {
			t.Fatalf("lookup(%q) found", s)
		}
	}
}
