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

// TestSlice checks that a slice of an index is, byte for byte, the index
// built from the slice's documents alone, from a built index and from one
// loaded in place, and that slices of an old index joined with an index of
// new documents (Concat) give the index of the edited document list.
func TestSlice(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	words := []string{"alpha", "beta", "gamma", "delta", "parse", "http", "server", "client", "x", "y", "rare1", "rare2"}
	doc := func() [NumFields][]string {
		var d [NumFields][]string
		if r.Intn(7) == 0 {
			return d // an empty document
		}
		for f := range NumFields {
			for range r.Intn(6) {
				d[f] = append(d[f], words[r.Intn(len(words))])
			}
		}
		return d
	}
	var docs [][NumFields][]string
	for range 50 {
		docs = append(docs, doc())
	}
	build := func(ds [][NumFields][]string) *Index {
		b := NewBuilder()
		for _, d := range ds {
			b.AddTokens(d)
		}
		return b.Build()
	}
	bytesOf := func(ix *Index) []byte {
		data, err := ix.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	whole := build(docs)
	raw, err := whole.AppendRaw(nil)
	if err != nil {
		t.Fatal(err)
	}
	inPlace, err := LoadRaw(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, ix := range []*Index{whole, inPlace} {
		for _, c := range [][2]int{{0, 50}, {0, 0}, {50, 50}, {0, 1}, {49, 50}, {10, 30}, {3, 4}, {25, 50}} {
			got, err := Slice(ix, c[0], c[1])
			if err != nil {
				t.Fatal(err)
			}
			if want := build(docs[c[0]:c[1]]); !bytes.Equal(bytesOf(got), bytesOf(want)) {
				t.Fatalf("slice %v differs from the index of its documents", c)
			}
		}
	}
	// Splice: documents lo..hi replaced by new ones.
	for _, c := range [][3]int{{10, 12, 3}, {0, 5, 0}, {45, 50, 2}, {20, 20, 4}, {0, 50, 1}} {
		lo, hi, n := c[0], c[1], c[2]
		var add [][NumFields][]string
		for range n {
			add = append(add, doc())
		}
		edited := append(append(append([][NumFields][]string(nil), docs[:lo]...), add...), docs[hi:]...)
		a, err := Slice(inPlace, 0, lo)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Slice(inPlace, hi, len(docs))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Concat([]*Index{a, build(add), b})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(bytesOf(got), bytesOf(build(edited))) {
			t.Fatalf("splice %v differs from the index of the edited documents", c)
		}
	}
	if _, err := Slice(whole, 10, 51); err == nil {
		t.Fatal("a slice past the end was accepted")
	}
	if _, err := Slice(Multi([]*Index{whole, whole}), 0, 1); err == nil {
		t.Fatal("a slice of a multi-part index was accepted")
	}
}
