package api

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/testrepo"
)

// resolveRepo is a repository where names meet across packages and
// modules, and in another case.
var resolveRepo = map[string]string{
	"go.mod": "module example.com/m\n\ngo 1.22\n",
	"net/http/server.go": "package http\n\n// Handler serves.\ntype Handler interface{ ServeHTTP() }\n\n// Server listens.\ntype Server struct{}\n\n" +
		"// ListenAndServe listens on the server's address.\nfunc (s *Server) ListenAndServe() error { return nil }\n\n" +
		"// ListenAndServe listens with a new server.\nfunc ListenAndServe(addr string) error { return nil }\n",
	"other/other.go":  "package other\n\n// Handler is another.\ntype Handler struct{}\n\ntype handler struct{}\n\n// ListenAndServe is another.\nfunc ListenAndServe() error { return nil }\n\n// Kind is another.\ntype Kind int\n",
	"codectx/kind.go": "package codectx\n\n// Kind is a chunk's kind.\ntype Kind string\n",
	"cmd/serve/main.go": "package main\n\nimport \"example.com/m/net/http\"\n\nfunc main() {\n\t_ = http.ListenAndServe(\":80\")\n}\n\n" +
		"func serve(s *http.Server) error {\n\treturn s.ListenAndServe()\n}\n",
	"req/req.go":                         "package req\n\n// NewRequest is exported.\nfunc NewRequest() int { return 1 }\n\nfunc newRequest() int { return 2 }\n",
	"req/use.go":                         "package req\n\nfunc callsUpper() int { return NewRequest() }\n\nfunc callsLower() int { return newRequest() }\n",
	"segment/segment.go":                 "package segment\n\n// Segment is one.\ntype Segment struct{}\n\n// Lookup looks up.\nfunc (s *Segment) Lookup() int { return 1 }\n",
	"store/store.go":                     "package store\n\n// Segment is another.\ntype Segment struct{}\n\n// Lookup looks up too.\nfunc (s *Segment) Lookup() int { return 2 }\n",
	"json/__init__.py":                   "def loads(s):\n    return s\n",
	"email/utils.py":                     "def parseaddr(a):\n    return a\n",
	"mail/parse.py":                      "def parseaddr(a):\n    return a\n\n\ndef loads(s):\n    return s\n",
	"web/utils.ts":                       "export function parse(s: string): string {\n  return s\n}\n",
	"web/cache.ts":                       "export class Cache {\n  #drop(): number {\n    return 2\n  }\n}\n",
	"web/other.ts":                       "export function parse(s: string): string {\n  return s + s\n}\n",
	"src/de/mod.rs":                      "pub fn from_str() -> i32 {\n    1\n}\n",
	"src/ser.rs":                         "pub fn from_str() -> i32 {\n    2\n}\n",
	"src/main/java/com/acme/Money.java":  "package com.acme;\n\npublic class Money {\n  public int round() {\n    return 1;\n  }\n}\n",
	"src/main/java/com/other/Money.java": "package com.other;\n\npublic class Money {\n  public int round() {\n    return 2;\n  }\n}\n",
}

// found lists the definitions as path:symbol, sorted.
func found(defs []Definition) []string {
	var out []string
	for _, d := range defs {
		out = append(out, d.Path+":"+d.Symbol)
	}
	slices.Sort(out)
	return out
}

// TestSymbolResolves: symbol finds a name qualified by its Go package or
// its module (http.ListenAndServe, json.loads: "no definition found"),
// only in that package or module, and prefers a name's own case
// (Handler gave type handler too).
func TestSymbolResolves(t *testing.T) {
	s := serveRepo(t, "m", resolveRepo)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		want []string
	}{
		// Go: the package clause's name, then the name in the package.
		{"http.ListenAndServe", []string{"net/http/server.go:ListenAndServe"}},
		{"http.Handler", []string{"net/http/server.go:Handler"}},
		{"http.Server.ListenAndServe", []string{"net/http/server.go:(*Server).ListenAndServe"}},
		{"http.listenAndServe", []string{"net/http/server.go:ListenAndServe"}},
		{"codectx.Kind", []string{"codectx/kind.go:Kind"}},
		{"other.handler", []string{"other/other.go:handler"}},
		// A qualifier no package has: none of the same-named symbols
		// of other packages.
		{"nosuch.Handler", nil},
		{"nosuch.Kind", nil},
		{"serve.Handler", nil},
		{"http.Kind", nil},
		// A method by its package: segment.Lookup is Segment's of package
		// segment, not store's.
		{"segment.Lookup", []string{"segment/segment.go:(*Segment).Lookup"}},
		{"Segment.Lookup", []string{"segment/segment.go:(*Segment).Lookup", "store/store.go:(*Segment).Lookup"}},
		// As before: Type.method, (*T).M, a short name.
		{"Server.ListenAndServe", []string{"net/http/server.go:(*Server).ListenAndServe"}},
		{"(*Server).ListenAndServe", []string{"net/http/server.go:(*Server).ListenAndServe"}},
		{"ListenAndServe", []string{"net/http/server.go:(*Server).ListenAndServe", "net/http/server.go:ListenAndServe", "other/other.go:ListenAndServe"}},
		// The name's own case wins; another case only when none has it.
		{"Handler", []string{"net/http/server.go:Handler", "other/other.go:Handler"}},
		{"handler", []string{"other/other.go:handler"}},
		{"NewRequest", []string{"req/req.go:NewRequest"}},
		{"newRequest", []string{"req/req.go:newRequest"}},
		{"newrequest", []string{"req/req.go:NewRequest", "req/req.go:newRequest"}},
		{"HANDLER", []string{"net/http/server.go:Handler", "other/other.go:Handler", "other/other.go:handler"}},
		// Python: the module by its path (a package's __init__.py is
		// the package), whole or by its last elements.
		{"json.loads", []string{"json/__init__.py:loads"}},
		{"email.utils.parseaddr", []string{"email/utils.py:parseaddr"}},
		{"utils.parseaddr", []string{"email/utils.py:parseaddr"}},
		{"parse.loads", []string{"mail/parse.py:loads"}},
		{"mail.parseaddr", []string{"mail/parse.py:parseaddr"}},
		{"email.loads", nil},
		{"parseaddr", []string{"email/utils.py:parseaddr", "mail/parse.py:parseaddr"}},
		// TypeScript: the file's path, its stem or directory.
		{"utils.parse", []string{"web/utils.ts:parse"}},
		{"web.utils.parse", []string{"web/utils.ts:parse"}},
		{"Cache.#drop", []string{"web/cache.ts:Cache.#drop"}},
		{"cache.Cache.#drop", []string{"web/cache.ts:Cache.#drop"}},
		{"other.Cache.#drop", nil},
		// Rust: the crate path.
		{"crate::de::from_str", []string{"src/de/mod.rs:from_str"}},
		{"de::from_str", []string{"src/de/mod.rs:from_str"}},
		{"ser::from_str", []string{"src/ser.rs:from_str"}},
		// Java: the package, then the class's member.
		{"com.acme.Money.round", []string{"src/main/java/com/acme/Money.java:Money.round"}},
		{"acme.Money.round", []string{"src/main/java/com/acme/Money.java:Money.round"}},
		{"Money.round", []string{"src/main/java/com/acme/Money.java:Money.round", "src/main/java/com/other/Money.java:Money.round"}},
	} {
		out, err := s.toolSymbol(ctx, Principal{Tenant: "acme"}, SymbolInput{Name: c.name})
		if err != nil {
			t.Fatalf("symbol %s: %v", c.name, err)
		}
		if got := found(out.Definitions); !slices.Equal(got, c.want) {
			t.Errorf("symbol %s = %q; want %q", c.name, got, c.want)
		}
		if len(c.want) == 0 && !strings.Contains(out.text(), "pkg.Func") {
			t.Errorf("symbol %s: text %q does not name the qualified forms", c.name, out.text())
		}
	}
}

// TestResolveLongName: a name of many parts is looked up whole, not
// split at each of its dots.
func TestResolveLongName(t *testing.T) {
	s := serveRepo(t, "m", resolveRepo)
	segs, err := s.repoSegs(context.Background(), Principal{Tenant: "acme"}, "", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{strings.Repeat("x.", 1<<16) + "Handler", strings.Repeat("http.", maxNameParts) + "Handler", strings.Repeat(".", 1<<16)} {
		if hits := resolveSymbol(segs, name); len(hits) != 0 {
			t.Errorf("%.40s...: %d hits", name, len(hits))
		}
	}
	if hits := resolveSymbol(segs, strings.Repeat("x.", maxNameParts-2)+"http.Handler"); len(hits) != 0 {
		t.Errorf("x...http.Handler: %d hits; want none (x.x is no package)", len(hits))
	}
}

// TestReferencesResolve: references and impact resolve a name as symbol
// does: qualified by a package (http.Server.ListenAndServe, which symbol
// found, was "not found" by both), in its own case (the callers of
// newRequest were references of NewRequest).
func TestReferencesResolve(t *testing.T) {
	s := serveRepo(t, "m", resolveRepo)
	ctx := context.Background()
	p := Principal{Tenant: "acme"}
	for _, c := range []struct {
		name    string
		refs    []string // symbols of the references
		targets []string // paths of impact's targets
	}{
		{"http.ListenAndServe", []string{"main"}, []string{"net/http/server.go"}},
		{"http.Server.ListenAndServe", []string{"serve"}, []string{"net/http/server.go"}},
		{"NewRequest", []string{"callsUpper"}, []string{"req/req.go"}},
		{"newRequest", []string{"callsLower"}, []string{"req/req.go"}},
		{"nosuch.ListenAndServe", nil, nil},
	} {
		refs, err := s.toolReferences(ctx, p, ReferencesInput{Name: c.name})
		if err != nil {
			t.Fatalf("references %s: %v", c.name, err)
		}
		var syms []string
		for _, r := range refs.References {
			syms = append(syms, r.Symbol)
		}
		if !slices.Equal(syms, c.refs) || refs.found != (c.targets != nil) {
			t.Errorf("references %s = %q (found %v); want %q", c.name, syms, refs.found, c.refs)
		}
		imp, err := s.toolImpact(ctx, p, ImpactInput{Name: c.name, Depth: 1})
		if err != nil {
			t.Fatalf("impact %s: %v", c.name, err)
		}
		var paths []string
		for _, target := range imp.Targets {
			_, path, _ := strings.Cut(target, ":")
			path, _, _ = strings.Cut(path, "#")
			paths = append(paths, path)
		}
		if !slices.Equal(paths, c.targets) {
			t.Errorf("impact %s: targets %q; want in %q", c.name, imp.Targets, c.targets)
		}
	}
}

// TestReferencesOfFile: the references of a file list each user once,
// its kinds together (a file that imports, calls and names the target was
// listed three times over, with one provenance), and a file no one uses
// is said to be so (not that calls through an interface are not
// resolved).
func TestReferencesOfFile(t *testing.T) {
	s := serveRepo(t, "m", resolveRepo)
	ctx := context.Background()
	p := Principal{Tenant: "acme"}
	out, err := s.toolReferences(ctx, p, ReferencesInput{Path: "net/http/server.go"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.References) != 1 || out.References[0].Path != "cmd/serve/main.go" || out.References[0].Via != "import,call,type" || out.More != 0 {
		t.Fatalf("references of net/http/server.go = %+v; want cmd/serve/main.go once, via import,call,type", out.References)
	}
	if text := out.text(); strings.Count(text, "cmd/serve/main.go") != 2 || !strings.Contains(text, "import,call,type -> net/http/server.go") {
		t.Errorf("text:\n%s", text)
	}
	none, err := s.toolReferences(ctx, p, ReferencesInput{Path: "other/other.go"})
	if err != nil {
		t.Fatal(err)
	}
	if text := none.text(); len(none.References) != 0 || text != "no references found: no indexed file imports or uses other/other.go" {
		t.Errorf("references of other/other.go = %+v: %q", none.References, text)
	}
	// A file that is not there is still not found.
	if text := func() string {
		o, _ := s.toolReferences(ctx, p, ReferencesInput{Path: "no/such.go"})
		return o.text()
	}(); !strings.Contains(text, "no symbol or file of that name") {
		t.Errorf("references of no/such.go: %q", text)
	}
}

// TestJoinVia: the kinds of one reference, each once, in edge order.
func TestJoinVia(t *testing.T) {
	for _, c := range [][3]string{
		{"call", "import", "import,call"},
		{"import", "call", "import,call"},
		{"import,call", "call", "import,call"},
		{"type", "call", "call,type"},
		{"call,type", "import", "import,call,type"},
		{"type", "type", "type"},
	} {
		if got := joinVia(c[0], c[1]); got != c[2] {
			t.Errorf("joinVia(%q, %q) = %q; want %q", c[0], c[1], got, c[2])
		}
	}
}

// TestResolveKeepsToTenant: a package-qualified name reaches only the
// caller's repositories: beta's package vault is no package of acme's,
// whatever the name or the repositories asked for, while beta finds it.
func TestResolveKeepsToTenant(t *testing.T) {
	store := blob.NewMem()
	for _, r := range []struct{ tenant, name, file, src string }{
		{"acme", "shop", "shop/shop.go", "package shop\n\n// Open opens the shop.\nfunc Open() int { return 1 }\n"},
		{"beta", "vault", "vault/vault.go", "package vault\n\n// Open opens the vault.\nfunc Open() int { return 2 }\n\nfunc use() int { return Open() }\n"},
	} {
		repo := testrepo.New(t)
		repo.Commit("initial", map[string]string{"go.mod": "module example.com/" + r.name + "\n\ngo 1.22\n", r.file: r.src})
		if _, err := index.Build(context.Background(), store, repo.Dir, index.Options{Tenant: r.tenant, Name: r.name, Workers: 1}); err != nil {
			t.Fatal(err)
		}
	}
	s := &Server{Store: store}
	s.init()
	ctx := context.Background()
	acme := Principal{Tenant: "acme"}
	for _, name := range []string{"vault.Open", "vault.vault.Open", "vault.use", "Open"} {
		for _, repos := range [][]string{nil, {"*"}, {"vault"}, {"beta/vault"}} {
			sym, _ := s.toolSymbol(ctx, acme, SymbolInput{Name: name, Repos: repos})
			refs, _ := s.toolReferences(ctx, acme, ReferencesInput{Name: name, Repos: repos})
			imp, _ := s.toolImpact(ctx, acme, ImpactInput{Name: name, Repos: repos})
			for _, d := range sym.Definitions {
				if d.Repo != "shop" {
					t.Errorf("acme's symbol %s in %q: %s", name, repos, d.Provenance)
				}
			}
			for _, r := range refs.References {
				t.Errorf("acme's references %s in %q: %s", name, repos, r.Provenance)
			}
			for _, target := range imp.Targets {
				if !strings.HasPrefix(target, "shop@") {
					t.Errorf("acme's impact %s in %q: %s", name, repos, target)
				}
			}
		}
	}
	if own, err := s.toolSymbol(ctx, acme, SymbolInput{Name: "shop.Open"}); err != nil || len(own.Definitions) != 1 || own.Definitions[0].Repo != "shop" {
		t.Errorf("acme's symbol shop.Open = %+v, %v", own.Definitions, err)
	}
	if none, err := s.toolSymbol(ctx, acme, SymbolInput{Name: "vault.Open"}); err != nil || len(none.Definitions) != 0 {
		t.Errorf("acme's symbol vault.Open = %+v, %v; want none", none.Definitions, err)
	}
	beta, err := s.toolSymbol(ctx, Principal{Tenant: "beta"}, SymbolInput{Name: "vault.Open"})
	if err != nil || len(beta.Definitions) != 1 || beta.Definitions[0].Repo != "vault" {
		t.Errorf("beta's symbol vault.Open = %+v, %v", beta.Definitions, err)
	}
}

// TestSymbolOrderAcrossRepos: the symbol tool gives code before tests and
// the repositories in turn: "get" over a tenant's repositories gave twenty
// of the first repository's by name, tests among them, and none of the
// other's; its "more" line says how to narrow the lookup.
func TestSymbolOrderAcrossRepos(t *testing.T) {
	store := blob.NewMem()
	build := func(name string, files map[string]string) {
		repo := testrepo.New(t)
		repo.Commit("initial", files)
		if _, err := index.Build(context.Background(), store, repo.Dir, index.Options{Tenant: "acme", Name: name, Workers: 1}); err != nil {
			t.Fatal(err)
		}
	}
	aa := map[string]string{}
	for i := range 12 {
		aa[fmt.Sprintf("p%02d/get_test.py", i)] = fmt.Sprintf("def get():\n    return %d\n", i)
		aa[fmt.Sprintf("p%02d/store.py", i)] = fmt.Sprintf("class Store%d:\n    def get(self):\n        return %d\n", i, i)
	}
	build("aa", aa)
	build("bb", map[string]string{"mail/message.py": "class Message:\n    def get(self, name):\n        return name\n"})
	s := &Server{Store: store}
	s.init()
	out, err := s.toolSymbol(context.Background(), Principal{Tenant: "acme"}, SymbolInput{Name: "get"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Definitions) != maxDefinitions || out.More != 25-maxDefinitions {
		t.Fatalf("%d definitions, %d more; want %d and %d", len(out.Definitions), out.More, maxDefinitions, 25-maxDefinitions)
	}
	if d := out.Definitions[1]; d.Repo != "bb" {
		t.Errorf("second definition %s; want bb's Message.get in the repositories' turn", d.Provenance)
	}
	seenTest := false
	for _, d := range out.Definitions {
		isTest := strings.HasSuffix(d.Path, "_test.py")
		if seenTest && !isTest {
			t.Errorf("%s after a test", d.Provenance)
		}
		seenTest = seenTest || isTest
	}
	if !strings.Contains(out.text(), "(5 more definitions: give repo, or a qualified name") {
		t.Errorf("more line: %s", out.text()[strings.LastIndex(out.text(), "("):])
	}
}
