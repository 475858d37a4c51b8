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

// TestSymbolPrivateName: a JavaScript private name is found as it is
// written, #drop; its short name was kept under a key no lookup reached.
func TestSymbolPrivateName(t *testing.T) {
	s := serveRepo(t, "m", map[string]string{
		"web/cache.ts": "export class Cache {\n  #drop(): number {\n    return 2\n  }\n  put(): number {\n    return this.#drop()\n  }\n}\n",
	})
	out, err := s.toolImpact(context.Background(), Principal{Tenant: "acme"}, ImpactInput{Name: "#drop", Depth: 1})
	if err != nil || len(out.Targets) != 1 {
		t.Fatalf("impact of #drop: targets %v, %v", out.Targets, err)
	}
	sym, err := s.toolSymbol(context.Background(), Principal{Tenant: "acme"}, SymbolInput{Name: "#drop"})
	if err != nil || len(sym.Definitions) != 1 {
		t.Fatalf("symbol #drop: %+v, %v", sym, err)
	}
}
