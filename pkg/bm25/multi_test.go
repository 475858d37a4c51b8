package bm25

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"
)

func multiDocs() [][NumFields][]string {
	r := rand.New(rand.NewSource(2))
	words := []string{"alpha", "beta", "gamma", "delta", "parse", "parser", "parsing", "http", "server", "client", "x", "y"}
	var docs [][NumFields][]string
	for range 80 {
		var d [NumFields][]string
		for f := range NumFields {
			for range r.Intn(6) {
				d[f] = append(d[f], words[r.Intn(len(words))])
			}
		}
		if r.Intn(9) == 0 {
			d = [NumFields][]string{}
		}
		docs = append(docs, d)
	}
	return docs
}

func buildDocs(ds [][NumFields][]string) *Index {
	b := NewBuilder()
	for _, d := range ds {
		b.AddTokens(d)
	}
	return b.Build()
}

// raw round-trips ix through the in-place layout; with shift the bytes
// are misaligned (the arrays are then copied).
func raw(t *testing.T, ix *Index, shift int) *Index {
	t.Helper()
	buf, err := ix.AppendRaw(make([]byte, shift, 4096))
	if err != nil {
		t.Fatal(err)
	}
	if len(buf)-shift != ix.RawSize() {
		t.Fatalf("RawSize %d, wrote %d", ix.RawSize(), len(buf)-shift)
	}
	got, err := LoadRaw(buf[shift:])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestMultiEqualsWhole checks that an index of parts searched where they
// lie (Multi, each part in the in-place layout) answers every search
// exactly as the one index of all documents: scores, order (ties by
// document id), filters, weights, document frequencies, term prefixes.
func TestMultiEqualsWhole(t *testing.T) {
	docs := multiDocs()
	whole := buildDocs(docs)
	want, _ := whole.MarshalBinary()
	queries := [][]string{{"alpha"}, {"parse", "http"}, {"x", "y", "gamma", "nope"}, {"parser", "parser"}, {"nope"}, {"client", "server", "delta", "beta"}}
	keep := func(d int) bool { return d%3 != 1 }
	for _, cuts := range [][]int{{80}, {1, 79}, {40, 40}, {7, 0, 13, 60}, {79, 1}, {10, 10, 10, 10, 10, 10, 10, 10}} {
		for _, shift := range []int{0, 1} {
			t.Run(fmt.Sprint(cuts, shift), func(t *testing.T) {
				var parts []*Index
				at := 0
				for _, n := range cuts {
					parts = append(parts, raw(t, buildDocs(docs[at:at+n]), shift))
					at += n
				}
				got := Multi(parts)
				if data, _ := got.MarshalBinary(); !bytes.Equal(data, want) {
					t.Fatalf("Multi's concatenation differs from the whole index")
				}
				if got.NumDocs() != whole.NumDocs() || got.NumTerms() != whole.NumTerms() || got.avg != whole.avg {
					t.Fatalf("docs %d terms %d avg %v, want %d %d %v", got.NumDocs(), got.NumTerms(), got.avg, whole.NumDocs(), whole.NumTerms(), whole.avg)
				}
				if len(cuts) > 1 && got.Raw() != (shift == 0) {
					t.Errorf("shift %d: Raw %v", shift, got.Raw())
				}
				if shift == 1 && got.HeapSize() != got.Size() {
					t.Errorf("copied parts: heap %d of %d", got.HeapSize(), got.Size())
				}
				for _, q := range queries {
					w := make([]float64, len(q))
					for i := range w {
						w[i] = 1 + float64(i)/2
					}
					for _, k := range []int{1, 3, 10, 100} {
						for _, c := range []struct {
							w    []float64
							keep func(int) bool
						}{{nil, nil}, {w, nil}, {nil, keep}, {w, keep}} {
							a := got.SearchWeighted(q, c.w, k, DefaultParams(), c.keep)
							b := whole.SearchWeighted(q, c.w, k, DefaultParams(), c.keep)
							if fmt.Sprint(a) != fmt.Sprint(b) {
								t.Fatalf("search %v k %d: %v, want %v", q, k, a, b)
							}
						}
					}
					for _, term := range q {
						if got.DocFreq(term) != whole.DocFreq(term) {
							t.Errorf("df %q: %d, want %d", term, got.DocFreq(term), whole.DocFreq(term))
						}
						var da, db []int
						ia := got.Docs(term, func(d int) { da = append(da, d) })
						ib := whole.Docs(term, func(d int) { db = append(db, d) })
						if ia != ib || fmt.Sprint(da) != fmt.Sprint(db) {
							t.Errorf("docs %q: %v %v, want %v %v", term, ia, da, ib, db)
						}
					}
				}
				for _, pre := range []string{"", "pars", "parse", "z", "b"} {
					var a, b []string
					got.Prefixed(pre, func(s string, df int) bool { a = append(a, fmt.Sprint(s, df)); return len(a) < 4 })
					whole.Prefixed(pre, func(s string, df int) bool { b = append(b, fmt.Sprint(s, df)); return len(b) < 4 })
					if fmt.Sprint(a) != fmt.Sprint(b) {
						t.Errorf("prefix %q: %v, want %v", pre, a, b)
					}
				}
			})
		}
	}
}

// TestLoadRawCorrupt checks that every truncation of an in-place index
// and every flipped byte of its header and tables gives an error or an
// index that searches without panicking.
func TestLoadRawCorrupt(t *testing.T) {
	ix := buildDocs(multiDocs())
	good, _ := ix.AppendRaw(nil)
	for n := 0; n < len(good); n++ {
		if _, err := LoadRaw(bytes.Clone(good[:n])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v, want ErrCorrupt", n, err)
		}
	}
	for i := range good {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			b := bytes.Clone(good)
			b[i] ^= x
			got, err := LoadRaw(b)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("byte %d: %v", i, err)
				}
				continue
			}
			got.Search([]string{"alpha", "parse", "x"}, 5, DefaultParams())
			got.Docs("alpha", func(int) {})
		}
	}
}
