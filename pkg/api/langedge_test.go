package api

import (
	"context"
	"strings"
	"testing"
)

// TestReferencesStayInLanguage: the graph resolves calls by name, so a
// Python script's pattern.search (a compiled regular expression) was a
// caller of Go's (*Server).search and impact walked from the Go file
// into the script. references and impact
// keep the Go caller and leave the script out.
func TestReferencesStayInLanguage(t *testing.T) {
	s := serveRepo(t, "svc", map[string]string{
		"server.go": "package svc\n\n// Server answers.\ntype Server struct{}\n\n// search finds.\nfunc (s *Server) search(q string) int { return len(q) }\n",
		"query.go":  "package svc\n\n// Query asks.\nfunc (s *Server) Query(q string) int { return s.search(q) }\n",
		"mine.py":   "import re\n\npattern = re.compile(\"fix\")\n\n\ndef candidate(text):\n    return pattern.search(text)\n",
	})
	ctx := context.Background()
	p := Principal{Tenant: "acme"}
	refs, err := s.toolReferences(ctx, p, ReferencesInput{Name: "(*Server).search"})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range refs.References {
		paths = append(paths, r.Path)
	}
	if got := strings.Join(paths, " "); !strings.Contains(got, "query.go") || strings.Contains(got, "mine.py") {
		t.Errorf("references of (*Server).search: %s; want query.go and not mine.py", got)
	}
	for _, in := range []ImpactInput{{Name: "(*Server).search", Depth: 3}, {Path: "server.go", Depth: 3}} {
		imp, err := s.toolImpact(ctx, p, in)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range imp.Files {
			got = append(got, f.Path)
		}
		if all := strings.Join(got, " "); !strings.Contains(all, "query.go") || strings.Contains(all, "mine.py") {
			t.Errorf("impact %+v: %s; want query.go and not mine.py", in, all)
		}
	}
	// No references: the answer says whether the name is unknown or its
	// uses unresolved (both said "no references found").
	for name, want := range map[string]string{"(*Server).Query": "are not resolved", "NoSuchThing": "no symbol or file of that name"} {
		refs, err := s.toolReferences(ctx, p, ReferencesInput{Name: name})
		if err != nil || !strings.Contains(refs.text(), want) {
			t.Errorf("references of %s: %q, %v; want %q", name, refs.text(), err, want)
		}
	}
}
