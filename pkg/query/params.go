package query

import "codectx/pkg/bm25"

// Params are the BM25F parameters the query service uses.
func Params() bm25.Params { return bm25.DefaultParams() }
