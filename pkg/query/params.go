package query

import "codectx/pkg/bm25"

// Params are the BM25F parameters of the chunk index.
func Params() bm25.Params { return bm25.DefaultParams() }

// FileParams are the BM25 parameters of the whole-file index: body and
// path fields only.
func FileParams() bm25.Params {
	var p bm25.Params
	p.K1, p.B = 1.2, 0.75
	p.Weights[bm25.FieldBody] = 1
	p.Weights[bm25.FieldPath] = 2
	return p
}
