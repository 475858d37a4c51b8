package tokens

import (
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dlclark/regexp2/v2"
)

// o200kSplit is the split expression of o200k_base, as the codec compiles it.
const o200kSplit = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

func regexpPieces(t *testing.T, re *regexp2.Regexp, s string) []string {
	var out []string
	m, err := re.FindStringMatch(s)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		out = append(out, m.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestASCIISplit checks splitASCII against the expression itself, on random
// text over the characters that decide its alternatives and on Go source,
// and Count against the codec.
func TestASCIISplit(t *testing.T) {
	re := regexp2.MustCompile(o200kSplit, regexp2.None)
	var texts []string
	alphabet := []string{"a", "z", "A", "Q", "0", "7", " ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f", "'", "'s", "'T", "'re", "'Ll", "'d", "/", "//", "(", ")", "{", "}", ".", "_", "-", "\x00", "\x1f", "\x7f", "abc", "ABC", "Abc", "aBC", "123", "1234"}
	for b := range 0x80 {
		alphabet = append(alphabet, string(rune(b)))
	}
	r := rand.New(rand.NewSource(7))
	for range 20000 {
		var b strings.Builder
		for range 1 + r.Intn(40) {
			b.WriteString(alphabet[r.Intn(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(data))
	}
	for _, s := range texts {
		var got []string
		splitASCII(s, func(p string) { got = append(got, p) })
		if want := regexpPieces(t, re, s); isASCII(s) && !slices.Equal(got, want) {
			t.Fatalf("splitASCII(%q)\n got %q\nwant %q", s, got, want)
		}
		want, err := lib.Count(s)
		if err != nil {
			t.Fatal(err)
		}
		if hasLongRun(s) {
			continue
		}
		if got := Count(s); got != want {
			t.Fatalf("Count(%q) = %d, codec %d", s, got, want)
		}
	}
}
