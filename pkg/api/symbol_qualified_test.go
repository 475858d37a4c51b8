package api

import (
	"context"
	"fmt"
	"strings"
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
	// As written, qualified as the index names it, and in Javadoc's way.
	for _, name := range []string{"#drop", "Cache.#drop", "Cache#drop", "cache.drop"} {
		sym, err := s.toolSymbol(context.Background(), Principal{Tenant: "acme"}, SymbolInput{Name: name})
		if err != nil || len(sym.Definitions) != 1 {
			t.Fatalf("symbol %s: %+v, %v", name, sym, err)
		}
	}
}

// TestSymbolBudget: the symbol tool gives bodies within its token budget
// (default 6000) and leaves the rest as stubs, signature and doc, that
// say to read their lines: twenty definitions of a common name were
// sent whole, whatever their size.
func TestSymbolBudget(t *testing.T) {
	files := map[string]string{}
	for i := range 5 {
		body := strings.Repeat(fmt.Sprintf("\tx%d := %d\n\t_ = x%d\n", i, i, i), 200)
		files[fmt.Sprintf("p%d/run.go", i)] = fmt.Sprintf("package p%d\n\n// Run runs step %d.\nfunc Run() {\n%s}\n", i, i, body)
	}
	s := serveRepo(t, "big", files)
	ctx := context.Background()
	all, err := s.toolSymbol(ctx, Principal{Tenant: "acme"}, SymbolInput{Name: "Run", Budget: ptr(mcpMaxBudget)})
	if err != nil || len(all.Definitions) != 5 {
		t.Fatalf("symbol Run at the largest budget: %d definitions, %v", len(all.Definitions), err)
	}
	each := all.Definitions[0].Tokens
	if each == 0 || all.Tokens != 5*each {
		t.Fatalf("bodies of %d tokens, %d in all; want 5 alike", each, all.Tokens)
	}
	budget := 2*each + each/2
	out, err := s.toolSymbol(ctx, Principal{Tenant: "acme"}, SymbolInput{Name: "Run", Budget: &budget})
	if err != nil {
		t.Fatal(err)
	}
	whole := 0
	for _, d := range out.Definitions {
		switch {
		case d.Stub && (d.Body != "" || d.Signature != "func Run()" || !strings.HasPrefix(d.Doc, "Run runs step")):
			t.Errorf("stub %+v: want no body, its signature and doc", d.ChunkRef)
		case !d.Stub:
			whole++
		}
	}
	if len(out.Definitions) != 5 || whole != 2 || out.Tokens > budget || out.Tokens != 2*each {
		t.Errorf("budget %d: %d definitions, %d whole, %d tokens; want 5, 2 whole, %d tokens", budget, len(out.Definitions), whole, out.Tokens, 2*each)
	}
	if text := out.text(); !strings.Contains(text, "body left out") || strings.Count(text, "x4 := 4") > 200 {
		t.Errorf("text does not say a body was left out, or holds them all:\n%.400s", text)
	}
	if _, err := s.toolSymbol(ctx, Principal{Tenant: "acme"}, SymbolInput{Name: "Run", Budget: ptr(0)}); err == nil {
		t.Error("budget 0: want an error")
	}
}
