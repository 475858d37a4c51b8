package embedtest

import (
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// HashEmbed is the deterministic embedding the test server computes: an
// identifier-aware bag of words and character trigrams hashed into dim
// signed buckets and L2-normalised. Identifiers are split at case changes,
// digits and underscores (parseHTTPRequest -> parse, http, request) and the
// whole identifier is kept too, so texts that share words or identifiers
// are close and unrelated texts are nearly orthogonal. It is not a language
// model, but it ranks like a crude one, which is what end-to-end tests of
// the dense arm need.
func HashEmbed(text string, dim int) []float32 {
	v := make([]float64, dim)
	add := func(feature string, w float64) {
		h := fnv.New64a()
		h.Write([]byte(feature))
		x := h.Sum64()
		i := int(x % uint64(dim))
		if x>>63 == 1 {
			w = -w
		}
		v[i] += w
	}
	n := 0
	for _, tok := range identifiers(text) {
		whole := strings.ToLower(tok)
		parts := splitIdent(tok)
		if len(parts) > 1 {
			add("w:"+whole, 1)
		}
		for _, p := range parts {
			add("w:"+p, 1)
			n++
			if len(p) >= 4 {
				g := "^" + p + "$"
				r := []rune(g)
				for j := 0; j+3 <= len(r); j++ {
					add("g:"+string(r[j:j+3]), 0.25)
				}
			}
		}
	}
	if n == 0 {
		add("empty", 1)
	}
	var norm float64
	for _, x := range v {
		norm += x * x
	}
	norm = math.Sqrt(norm)
	out := make([]float32, dim)
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out
}

// identifiers returns the runs of letters and digits (and underscores) of s.
func identifiers(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_')
	})
}

// splitIdent splits an identifier into lower-case words at underscores,
// lower-to-upper changes, the end of an upper-case run (HTTPServer -> http,
// server) and letter/digit changes.
func splitIdent(id string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	r := []rune(id)
	for i, c := range r {
		switch {
		case c == '_':
			flush()
			continue
		case i > 0 && unicode.IsUpper(c) && unicode.IsLower(r[i-1]):
			flush()
		case i > 0 && unicode.IsUpper(c) && unicode.IsUpper(r[i-1]) && i+1 < len(r) && unicode.IsLower(r[i+1]):
			flush()
		case i > 0 && unicode.IsDigit(c) != unicode.IsDigit(r[i-1]):
			flush()
		}
		cur = append(cur, c)
	}
	flush()
	return out
}
