package api

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/index"
)

// TestReadPathHoldingLines: a file's name may hold "#L" itself. Its
// provenance, "r00@C:x#L1.go#L3-3", was cut at the first "#L", so read,
// references and impact looked for a file "x" and the file could not be
// read by what search gave for it.
func TestReadPathHoldingLines(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x#L1.go"), []byte("package a\n\nfunc HashL() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	store := blob.NewMem()
	if _, err := index.Build(ctx, store, dir, index.Options{Tenant: "acme", Name: "r00", Workers: 1}); err != nil {
		t.Fatal(err)
	}
	s := &Server{Store: store}
	s.init()
	p := Principal{Tenant: "acme"}
	found, err := s.toolSymbol(ctx, p, SymbolInput{Name: "HashL"})
	if err != nil || len(found.Definitions) != 1 {
		t.Fatalf("symbol: %+v, %v", found, err)
	}
	prov := found.Definitions[0].Provenance
	if !strings.HasSuffix(prov, ":x#L1.go#L3-3") {
		t.Fatalf("provenance %s", prov)
	}
	repo, path, _ := strings.Cut(prov, ":")
	for _, in := range []ReadInput{{Repo: "r00", Path: prov}, {Repo: repo, Path: path}} {
		out, err := s.toolRead(ctx, p, in)
		if err != nil || out.Provenance != prov || out.Text != "func HashL() {}\n" {
			t.Errorf("read %s %s = %+v, %v; want line 3 of x#L1.go", in.Repo, in.Path, out, err)
		}
	}
	// The path alone, as a file list gives it, is the file: it was cut
	// at its "#L", read refused it ("want path#Lstart-Lend") and
	// references and impact looked for a file "x".
	if out, err := s.toolRead(ctx, p, ReadInput{Repo: "r00", Path: "x#L1.go"}); err != nil || !strings.Contains(out.Text, "func HashL() {}") {
		t.Errorf("read x#L1.go = %+v, %v; want the file", out, err)
	}
	for _, path := range []string{prov, "x#L1.go#L3-3", "x#L1.go"} {
		if refs, err := s.toolReferences(ctx, p, ReferencesInput{Repo: "r00", Path: path}); err != nil || !refs.found {
			t.Errorf("references of %s: %+v, %v", path, refs, err)
		}
		if imp, err := s.toolImpact(ctx, p, ImpactInput{Repo: "r00", Path: path}); err != nil || len(imp.Targets) != 1 {
			t.Errorf("impact of %s: %+v, %v", path, imp, err)
		}
	}
}
