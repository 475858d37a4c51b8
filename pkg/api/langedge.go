package api

import (
	"codectx/pkg/codectx"
	"codectx/pkg/graph"
	"codectx/pkg/segment"
)

// family is the languages whose code calls one another's by name:
// JavaScript, TypeScript and TSX share one.
func family(l codectx.Language) codectx.Language {
	switch l {
	case codectx.TypeScript, codectx.TSX:
		return codectx.JavaScript
	}
	return l
}

// foreign reports whether a call or type edge between the files at paths
// a and b joins languages whose code cannot call each other. The graph
// resolves calls by name, so Python's re.search was listed as a caller of
// Go's (*Server).search, and impact walked from a Go file into Python
// scripts; references and impact leave such edges out. Import edges are
// resolved by path, and kept.
func foreign(seg *segment.Segment, kind graph.EdgeKind, a, b string) bool {
	if kind == graph.EdgeImport {
		return false
	}
	fa, okA := seg.File(a)
	fb, okB := seg.File(b)
	return okA && okB && family(fa.Language) != family(fb.Language)
}
