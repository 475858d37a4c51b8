package bm25

import (
	"math/rand/v2"
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
			if _, err := ix.MarshalBinary(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
