package api

import (
	"context"
	"strings"
	"testing"
)

// TestImpactOfUnexported: the impact of an unexported symbol starts at
// its callers' files, not at every importer of its file (a private method
// with 2 callers was said to affect 63 files at depth 1); an exported
// one's still reaches the importers.
func TestImpactOfUnexported(t *testing.T) {
	s := serveRepo(t, "m", map[string]string{
		"go.mod":    "module example.com/m\n\ngo 1.22\n",
		"a/a.go":    "package a\n\nfunc helper() int { return 1 }\n\n// Exported is for other packages.\nfunc Exported() int { return helper() }\n",
		"a/b.go":    "package a\n\nfunc useHelper() int { return helper() + 1 }\n",
		"d/d.go":    "package d\n\nfunc search() int { return 1 }\n\n// Search is for other packages.\nfunc Search() int { return search() }\n\n// Other is too.\nfunc Other() int { return 2 }\n",
		"e/e.go":    "package e\n\nimport \"example.com/m/d\"\n\n// E imports d for Other.\nfunc E() int { return d.Other() }\n",
		"c/c.go":    "package c\n\nimport \"example.com/m/a\"\n\n// C calls a.\nfunc C() int { return a.Exported() }\n",
		"tool.py":   "def _private():\n    return 1\n\n\ndef public():\n    return _private()\n",
		"caller.py": "from tool import public\n\n\ndef run():\n    return public()\n",
		// A private member is used inside its class only: the callers in
		// its file, none of its file's importers.
		"src/main/java/p/Store.java": "package p;\n\npublic class Store {\n  private int hidden() {\n    return 1;\n  }\n\n  public int shown() {\n    return hidden();\n  }\n}\n",
		"src/main/java/q/Use.java":   "package q;\n\nimport p.Store;\n\npublic class Use {\n  int run(Store s) {\n    return s.shown();\n  }\n}\n",
		"web/cache.ts":               "export class Cache {\n  private evict(): number {\n    return 1\n  }\n  #drop(): number {\n    return 2\n  }\n  put(): number {\n    return this.evict() + this.#drop()\n  }\n}\n",
		"web/app.ts":                 "import { Cache } from './cache'\n\nexport function run(c: Cache): number {\n  return c.put()\n}\n",
	})
	// At depth 1: the files that call or name the target, and for an
	// exported one the importers of its file. (Deeper, the callers'
	// callers follow: TestImpactOfSymbolWalksCalls.)
	for _, c := range []struct {
		name      string
		want, not []string
	}{
		{"helper", []string{"a/b.go"}, []string{"c/c.go"}},
		{"Exported", []string{"c/c.go"}, nil},
		{"_private", nil, []string{"caller.py"}},
		{"public", []string{"caller.py"}, nil},
		// One file declares search and Search: each name is its own
		// declaration (the lookup ignores case, the exact case wins), and
		// only Search, exported, reaches the file's importers.
		{"search", nil, []string{"e/e.go"}},
		{"Search", []string{"e/e.go"}, nil},
		{"hidden", nil, []string{"src/main/java/q/Use.java"}},
		{"shown", []string{"src/main/java/q/Use.java"}, nil},
		{"evict", nil, []string{"web/app.ts"}},
		{"Cache.#drop", nil, []string{"web/app.ts"}},
		{"#drop", nil, []string{"web/app.ts"}},
		{"put", []string{"web/app.ts"}, nil},
	} {
		out, err := s.toolImpact(context.Background(), Principal{Tenant: "acme"}, ImpactInput{Name: c.name, Depth: 1})
		if err != nil {
			t.Fatal(err)
		}
		var files []string
		for _, f := range out.Files {
			files = append(files, f.Path)
		}
		got := " " + strings.Join(files, " ") + " "
		for _, w := range c.want {
			if !strings.Contains(got, " "+w+" ") {
				t.Errorf("impact of %s: %s; want %s", c.name, got, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(got, " "+n+" ") {
				t.Errorf("impact of %s: %s; want no %s", c.name, got, n)
			}
		}
	}
}

// TestImpactOfSymbolWalksCalls: past its first hop, a symbol's impact
// follows callers of callers, not every importer of their files: a
// helper with two callers was said to affect 84 of net/http's 112 files
// at depth 3. A caller in the target's own file is followed too (its
// file is not listed): the walk stopped there.
func TestImpactOfSymbolWalksCalls(t *testing.T) {
	s := serveRepo(t, "m", map[string]string{
		"go.mod":         "module example.com/m\n\ngo 1.22\n",
		"util/util.go":   "package util\n\n// Const is read by other.\nconst Const = 2\n\nfunc helper() int { return 1 }\n\n// A uses helper.\nfunc A() int { return helper() }\n",
		"svc/svc.go":     "package svc\n\nimport \"example.com/m/util\"\n\n// B calls A.\nfunc B() int { return util.A() }\n",
		"web/web.go":     "package web\n\nimport \"example.com/m/svc\"\n\n// C calls B.\nfunc C() int { return svc.B() }\n",
		"other/other.go": "package other\n\nimport \"example.com/m/util\"\n\n// D reads Const only.\nfunc D() int { return util.Const }\n",
		"more/more.go":   "package more\n\nimport \"example.com/m/other\"\n\n// E calls D.\nfunc E() int { return other.D() }\n",
	})
	for _, c := range []struct {
		name string
		want map[string]int // file: depth
	}{
		// helper's one caller is in its own file: the walk goes on from A.
		{"helper", map[string]int{"svc/svc.go": 2, "web/web.go": 3}},
		// A is exported: its file's importers at depth 1 (other imports
		// util for Const), but only A's callers are walked further.
		{"A", map[string]int{"svc/svc.go": 1, "other/other.go": 1, "web/web.go": 2}},
	} {
		out, err := s.toolImpact(context.Background(), Principal{Tenant: "acme"}, ImpactInput{Name: c.name, Depth: 3})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, f := range out.Files {
			got[f.Path] = f.Depth
		}
		if len(got) != len(c.want) {
			t.Errorf("impact of %s = %v, want %v", c.name, got, c.want)
			continue
		}
		for p, d := range c.want {
			if got[p] != d {
				t.Errorf("impact of %s = %v, want %v", c.name, got, c.want)
				break
			}
		}
	}
}
