package bm25

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
)

// FuzzLoad checks that Load never panics, and that a segment it accepts can
// be searched without panicking. Each input is tried as is and with a valid
// checksum appended, so the fuzzer reaches the parser behind the checksum.
func FuzzLoad(f *testing.F) {
	for _, n := range []int{0, 1, 5, 30} {
		data, err := randomIndex(rand.New(rand.NewPCG(uint64(n), 9)), n).MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)-4]) // body without checksum: the second try completes it
	}
	f.Add([]byte{})
	f.Add([]byte(magic + "\x01"))
	queries := [][]string{{"parse"}, {"http", "request"}, {vocab[0], vocab[len(vocab)-1], "zzz"}, {""}}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range [][]byte{data, withCRC(data)} {
			ix, err := Load(d)
			if err != nil {
				continue
			}
			p := DefaultParams()
			for _, q := range queries {
				ix.Search(q, 10, p)
				ix.DocFreq(q[0])
			}
			for i := 0; i < ix.NumTerms() && i < 50; i++ {
				ix.Search([]string{string(ix.term(i))}, 5, p)
			}
			// Round trip: what loads re-encodes to bytes that load to an
			// index giving the same answers and the same bytes again.
			once, err := ix.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			ix2, err := Load(once)
			if err != nil {
				t.Fatalf("a re-encoded index does not load: %v", err)
			}
			twice, err := ix2.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(once, twice) {
				t.Fatalf("re-encoding a loaded index is not stable: %d vs %d bytes", len(once), len(twice))
			}
			for _, q := range queries {
				if a, b := ix.Search(q, 10, p), ix2.Search(q, 10, p); !reflect.DeepEqual(a, b) {
					t.Fatalf("search %q differs after a round trip: %v vs %v", q, a, b)
				}
			}
		}
	})
}
