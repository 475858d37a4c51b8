package bm25

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
)

// TestConcat checks that joining indexes of consecutive document ranges
// gives, byte for byte, the index of all documents built at once, and the
// same search results, for every way of cutting the documents.
func TestConcat(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	words := []string{"alpha", "beta", "gamma", "delta", "parse", "http", "server", "client", "x", "y"}
	var docs [][NumFields][]string
	for range 60 {
		var d [NumFields][]string
		for f := range NumFields {
			for range r.Intn(6) {
				d[f] = append(d[f], words[r.Intn(len(words))])
			}
		}
		if r.Intn(7) == 0 {
			d = [NumFields][]string{} // an empty document
		}
		docs = append(docs, d)
	}
	build := func(ds [][NumFields][]string) *Index {
		b := NewBuilder()
		for _, d := range ds {
			b.AddTokens(d)
		}
		return b.Build()
	}
	whole := build(docs)
	want, _ := whole.MarshalBinary()
	for _, cuts := range [][]int{{60}, {1, 59}, {30, 30}, {7, 0, 13, 40}, {59, 1}, {10, 10, 10, 10, 10, 10}} {
		t.Run(fmt.Sprint(cuts), func(t *testing.T) {
			var parts []*Index
			at := 0
			for _, n := range cuts {
				parts = append(parts, build(docs[at:at+n]))
				at += n
			}
			got, err := Concat(parts)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := got.MarshalBinary()
			if !bytes.Equal(data, want) {
				t.Fatalf("joined index differs from the whole one (%d vs %d bytes)", len(data), len(want))
			}
			if got.avg != whole.avg {
				t.Errorf("average lengths %v, want %v", got.avg, whole.avg)
			}
			for _, q := range [][]string{{"alpha"}, {"parse", "http"}, {"x", "y", "gamma", "nope"}} {
				a, b := got.Search(q, 10, DefaultParams()), whole.Search(q, 10, DefaultParams())
				if fmt.Sprint(a) != fmt.Sprint(b) {
					t.Errorf("search %v: %v, want %v", q, a, b)
				}
			}
		})
	}
}
