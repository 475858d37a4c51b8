package local

import (
	"math/rand/v2"
	"testing"
)

func BenchmarkKernels(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const n, dim = 10000, 384
	vecs := make([]float32, n*dim)
	for i := range vecs {
		vecs[i] = float32(r.NormFloat64())
	}
	q := vecs[:dim]
	w := dim / 64
	bitsv := make([]uint64, n*w)
	for i := range n {
		signBits(bitsv[i*w:(i+1)*w], vecs[i*dim:(i+1)*dim])
	}
	qb := bitsv[:w]
	t := byteTables(q, w)
	var sink float32
	b.Run("dot", func(b *testing.B) {
		for b.Loop() {
			for i := range n {
				sink += dot(q, vecs[i*dim:(i+1)*dim])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/vec")
	})
	b.Run("asym", func(b *testing.B) {
		for b.Loop() {
			for i := range n {
				sink += asymScore(t, bitsv[i*w:(i+1)*w])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/vec")
	})
	b.Run("hamming", func(b *testing.B) {
		for b.Loop() {
			for i := range n {
				sink += float32(hamming(qb, bitsv[i*w:(i+1)*w]))
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/vec")
	})
	_ = sink
}
