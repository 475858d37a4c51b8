package embedtest

import (
	"math"
	"slices"
	"testing"
)

func TestSplitIdent(t *testing.T) {
	for in, want := range map[string][]string{
		"parseHTTPRequest": {"parse", "http", "request"},
		"fetch_user_id":    {"fetch", "user", "id"},
		"HTTPServer":       {"http", "server"},
		"utf8Decode":       {"utf", "8", "decode"},
		"x":                {"x"},
	} {
		if got := splitIdent(in); !slices.Equal(got, want) {
			t.Errorf("splitIdent(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHashEmbed(t *testing.T) {
	v := HashEmbed("func parseConfig(path string)", 128)
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if len(v) != 128 || math.Abs(n-1) > 1e-5 {
		t.Fatalf("len %d norm² %v", len(v), n)
	}
	if c := Cosine(v, HashEmbed("func parseConfig(path string)", 128)); c < 0.99999 {
		t.Errorf("not deterministic: %v", c)
	}
	q := HashEmbed("parse config", 128)
	if Cosine(q, v) <= Cosine(q, HashEmbed("draw triangle mesh", 128)) {
		t.Error("a query sharing words is not closer than an unrelated text")
	}
	if e := HashEmbed("", 8); math.IsNaN(float64(e[0])) {
		t.Error("empty text gives NaN")
	}
}

func TestHashConformance(t *testing.T) {
	Run(t, Hash{N: 128})
}
