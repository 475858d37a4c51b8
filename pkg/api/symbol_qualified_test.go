package api

import (
	"context"
	"testing"
)

// TestSymbolPackageQualified: a name qualified by its package, as an
// agent writes a Go method (svc.Server.search), finds the method; it
// found nothing.
func TestSymbolPackageQualified(t *testing.T) {
	s := serveRepo(t, "svc", map[string]string{
		"go.mod":        "module example.com/svc\n\ngo 1.22\n",
		"svc/server.go": "package svc\n\n// Server answers.\ntype Server struct{}\n\n// search finds.\nfunc (s *Server) search(q string) int { return len(q) }\n",
	})
	for name, want := range map[string]int{
		"svc.Server.search":      1,
		"svc.Server.search.more": 0,
		"svc.Server.nope":        0,
		"Server.search":          1,
		"(*Server).search":       1,
	} {
		out, err := s.toolSymbol(context.Background(), Principal{Tenant: "acme"}, SymbolInput{Name: name})
		if err != nil || len(out.Definitions) != want || want == 1 && out.Definitions[0].Symbol != "(*Server).search" {
			t.Errorf("symbol %s = %+v, %v; want %d definition", name, out.Definitions, err, want)
		}
	}
}
