package xrepo

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"

	"codectx/pkg/chunk"
	"codectx/pkg/codectx"
)

// repoOf builds a Repo the way the API does from a segment: each code file
// chunked by pkg/chunk (its module chunk's name and imports), manifests
// kept as text.
func repoOf(t *testing.T, name string, files map[string]string) Repo {
	t.Helper()
	r := Repo{Name: name, Manifests: map[string][]byte{}}
	for p, src := range files {
		if IsManifest(p) {
			r.Manifests[p] = []byte(src)
		}
		res := chunk.Parse(context.Background(), p, []byte(src), chunk.Options{})
		if res.Skip != "" {
			continue // as in a segment: an empty __init__.py is not a file of it
		}
		switch res.Language {
		case codectx.Go, codectx.Python, codectx.TypeScript, codectx.TSX, codectx.JavaScript, codectx.Java, codectx.Rust:
		default:
			continue
		}
		if len(res.Chunks) == 0 || res.Chunks[0].Kind != codectx.KindModule {
			t.Fatalf("%s: no module chunk", p)
		}
		r.Files = append(r.Files, File{Path: p, Language: res.Language, Module: res.Chunks[0].Name, Imports: res.Chunks[0].Imports})
	}
	sort.Slice(r.Files, func(i, j int) bool { return r.Files[i].Path < r.Files[j].Path })
	return r
}

func linkStrings(ls []Link) []string {
	var out []string
	for _, l := range ls {
		out = append(out, fmt.Sprintf("%s:%s -> %s:%s (%s %s)", l.From.Repo, l.From.Path, l.To.Repo, l.To.Path, l.Via.Ecosystem, l.Via.Name))
	}
	sort.Strings(out)
	return out
}

// Each ecosystem: repository shop uses repository lib; the links are
// exactly the imports of lib's packages, resolved to lib's source files.
func TestEcosystems(t *testing.T) {
	cases := []struct {
		name      string
		lib, shop map[string]string
		want      []string
		provides  []Identity
	}{
		{
			name: "go",
			lib: map[string]string{
				"go.mod":              "module github.com/acme/money\n\ngo 1.22\n",
				"money.go":            "package money\n\n// Money is an amount.\ntype Money int\n",
				"round/round.go":      "package round\n\nfunc HalfEven(x float64) int { return int(x) }\n",
				"round/round_test.go": "package round\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) {}\n",
				"tools/go.mod":        "module github.com/acme/money/tools\n",
				"tools/gen.go":        "package main\n\nfunc main() {}\n",
			},
			shop: map[string]string{
				"go.mod":         "module github.com/acme/shop\n",
				"cart/cart.go":   "package cart\n\nimport (\n\t\"fmt\"\n\tm \"github.com/acme/money\"\n\t\"github.com/acme/money/round\"\n\t\"github.com/acme/shop/price\"\n)\n\nfunc Total() { fmt.Println(m.Money(round.HalfEven(price.X))) }\n",
				"price/price.go": "package price\n\nvar X = 1.5\n",
				"cmd/gen.go":     "package main\n\nimport \"github.com/acme/money/tools\"\n\nfunc main() {}\n",
			},
			want: []string{
				"shop:cart/cart.go -> lib:money.go (go github.com/acme/money)",
				"shop:cart/cart.go -> lib:round/round.go (go github.com/acme/money)",
				"shop:cmd/gen.go -> lib:tools/gen.go (go github.com/acme/money/tools)",
			},
			provides: []Identity{{Ecosystem: Go, Name: "github.com/acme/money"}, {Ecosystem: Go, Name: "github.com/acme/money/tools", Dir: "tools"}},
		},
		{
			name: "npm",
			lib: map[string]string{
				"package.json":             `{"name": "@acme/money", "main": "dist/index.js", "exports": {".": {"types": "./dist/index.d.ts", "import": "./dist/index.js"}, "./fmt": "./dist/format.js", "./locale/*": "./dist/locale/*.js"}}`,
				"src/index.ts":             "export function round(x: number): number { return Math.round(x) }\n",
				"src/format.ts":            "export function fmt(x: number): string { return '' + x }\n",
				"src/locale/de.ts":         "export const de = 'de'\n",
				"packages/ui/package.json": `{"name": "@acme/money-ui", "main": "index.js"}`,
				"packages/ui/index.js":     "module.exports = function ui() {}\n",
			},
			shop: map[string]string{
				"package.json": `{"name": "shop", "dependencies": {"@acme/money": "^1"}}`,
				"src/cart.ts":  "import { round } from '@acme/money';\nimport { fmt } from '@acme/money/fmt';\nimport { de } from '@acme/money/locale/de';\nimport pad from 'left-pad';\nimport { x } from './local';\nimport fs from 'node:fs';\n\nexport function total() { return fmt(round(1)) }\n",
				"src/local.ts": "export const x = 1\n",
				"web/app.js":   "const ui = require('@acme/money-ui');\n\nfunction main() { ui() }\n",
			},
			want: []string{
				"shop:src/cart.ts -> lib:src/format.ts (npm @acme/money)",
				"shop:src/cart.ts -> lib:src/index.ts (npm @acme/money)",
				"shop:src/cart.ts -> lib:src/locale/de.ts (npm @acme/money)",
				"shop:web/app.js -> lib:packages/ui/index.js (npm @acme/money-ui)",
			},
			provides: []Identity{{Ecosystem: NPM, Name: "@acme/money"}, {Ecosystem: NPM, Name: "@acme/money-ui", Dir: "packages/ui"}},
		},
		{
			name: "python",
			lib: map[string]string{
				"pyproject.toml":               "[build-system]\nrequires = [\"hatchling\"]\n\n[project]\nname = \"acme-money\"\nversion = \"1.0\"\n",
				"src/money/__init__.py":        "from .round import half_even\n",
				"src/money/round.py":           "def half_even(x):\n    return round(x)\n",
				"tests/test_round.py":          "from money.round import half_even\n\ndef test_x():\n    pass\n",
				"tools/setup.py":               "from setuptools import setup\nsetup(name='acme-tools')\n",
				"tools/acme_tools/__init__.py": "def tool():\n    pass\n",
			},
			shop: map[string]string{
				"pyproject.toml":   "[project]\nname = \"shop\"\n",
				"shop/__init__.py": "",
				"shop/cart.py":     "import os\nimport money\nfrom money.round import half_even\nfrom acme_tools import tool\nfrom . import util\n\ndef total():\n    return half_even(1)\n",
				"shop/util.py":     "def u():\n    pass\n",
			},
			want: []string{
				"shop:shop/cart.py -> lib:src/money/__init__.py (python acme-money)",
				"shop:shop/cart.py -> lib:src/money/round.py (python acme-money)",
				"shop:shop/cart.py -> lib:tools/acme_tools/__init__.py (python acme-tools)",
			},
			provides: []Identity{{Ecosystem: Python, Name: "acme-money", Imports: []string{"money"}}, {Ecosystem: Python, Name: "acme-tools", Dir: "tools", Imports: []string{"acme_tools"}}},
		},
		{
			name: "maven",
			lib: map[string]string{
				"pom.xml": "<project><modelVersion>4.0.0</modelVersion><groupId>com.acme</groupId><artifactId>money</artifactId><version>1</version></project>",
				"src/main/java/com/acme/money/Money.java":     "package com.acme.money;\n\npublic class Money {}\n",
				"src/main/java/com/acme/money/Rounding.java":  "package com.acme.money;\n\npublic class Rounding { public static int halfEven(double x) { return 0; } }\n",
				"src/main/java/com/acme/money/fmt/Fmt.java":   "package com.acme.money.fmt;\n\npublic class Fmt {}\n",
				"src/test/java/com/acme/money/MoneyTest.java": "package com.acme.money;\n\npublic class MoneyTest {}\n",
			},
			shop: map[string]string{
				"pom.xml":                                    "<project><groupId>com.acme</groupId><artifactId>shop</artifactId></project>",
				"src/main/java/com/acme/shop/Cart.java":      "package com.acme.shop;\n\nimport com.acme.money.Money;\nimport static com.acme.money.Rounding.halfEven;\nimport com.acme.money.fmt.*;\nimport com.acme.money.MoneyTest;\nimport java.util.List;\nimport com.acme.shop.util.Util;\n\npublic class Cart {}\n",
				"src/main/java/com/acme/shop/util/Util.java": "package com.acme.shop.util;\n\npublic class Util {}\n",
			},
			want: []string{
				"shop:src/main/java/com/acme/shop/Cart.java -> lib:src/main/java/com/acme/money/Money.java (maven com.acme:money)",
				"shop:src/main/java/com/acme/shop/Cart.java -> lib:src/main/java/com/acme/money/Rounding.java (maven com.acme:money)",
				"shop:src/main/java/com/acme/shop/Cart.java -> lib:src/main/java/com/acme/money/fmt/Fmt.java (maven com.acme:money)",
			},
			provides: []Identity{{Ecosystem: Maven, Name: "com.acme:money", Imports: []string{"com.acme.money", "com.acme.money.fmt"}}},
		},
		{
			name: "cargo",
			lib: map[string]string{
				"Cargo.toml":         "[package]\nname = \"acme-money\"\nversion = \"0.1.0\"\n\n[dependencies]\nserde = \"1\"\n",
				"src/lib.rs":         "pub mod round;\n\npub struct Money(i64);\n",
				"src/round.rs":       "pub fn half_even(x: f64) -> i64 { x as i64 }\n",
				"src/round/table.rs": "pub const T: i32 = 1;\n",
			},
			shop: map[string]string{
				"Cargo.toml":  "[package]\nname = \"shop\"\n",
				"src/lib.rs":  "pub mod cart;\n",
				"src/main.rs": "use shop::cart;\nuse std::fmt;\n\nfn main() {}\n",
				"src/cart.rs": "use acme_money::round::half_even;\nuse acme_money::Money;\nuse acme_money::round::table::T;\nuse serde::Serialize;\n\npub fn total() {}\n",
			},
			want: []string{
				"shop:src/cart.rs -> lib:src/lib.rs (cargo acme-money)",
				"shop:src/cart.rs -> lib:src/round.rs (cargo acme-money)",
				"shop:src/cart.rs -> lib:src/round/table.rs (cargo acme-money)",
			},
			provides: []Identity{{Ecosystem: Cargo, Name: "acme-money", Imports: []string{"acme_money"}}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lib, shop := repoOf(t, "lib", c.lib), repoOf(t, "shop", c.shop)
			g := Build([]Repo{lib, shop})
			if got := linkStrings(g.Links()); !slices.Equal(got, c.want) {
				t.Errorf("links:\n got %q\nwant %q", got, c.want)
			}
			if got := g.Provides("lib"); !slices.EqualFunc(got, c.provides, func(a, b Identity) bool {
				return a.Ecosystem == b.Ecosystem && a.Name == b.Name && a.Dir == b.Dir && slices.Equal(a.Imports, b.Imports)
			}) {
				t.Errorf("lib provides %+v, want %+v", got, c.provides)
			}
			// The index both ways.
			for _, l := range g.Links() {
				same := func(m Link) bool { return m.From == l.From && m.To == l.To && m.Spec == l.Spec }
				if !slices.ContainsFunc(g.Importers(l.To.Repo, l.To.Path), same) || !slices.ContainsFunc(g.Imports(l.From.Repo, l.From.Path), same) {
					t.Errorf("link %+v missing from Importers or Imports", l)
				}
			}
			// Nothing links when the provider is not among the repositories
			// given (another tenant's): the resolver sees only its input.
			if n := Build([]Repo{shop}).Len(); n != 0 {
				t.Errorf("shop alone: %d links", n)
			}
			// Order of the input does not matter.
			if got := linkStrings(Build([]Repo{shop, lib}).Links()); !slices.Equal(got, c.want) {
				t.Errorf("reversed input: links %q", got)
			}
		})
	}
}

// An import the repository resolves itself never links to another that
// provides the same name; two repositories providing one name (a fork)
// are both linked.
func TestLocalWinsAndForks(t *testing.T) {
	lib := repoOf(t, "lib", map[string]string{
		"pyproject.toml":    "[project]\nname = \"money\"\n",
		"money/__init__.py": "X = 1\n",
		"go.mod":            "module github.com/acme/money\n",
		"m.go":              "package money\n",
		// A test fixture's module is not published.
		"testdata/x/go.mod": "module github.com/evil/x\n",
		"testdata/x/x.go":   "package x\n",
	})
	fork := repoOf(t, "fork", map[string]string{
		"go.mod": "module github.com/acme/money\n",
		"m.go":   "package money\n",
	})
	shop := repoOf(t, "shop", map[string]string{
		"money/__init__.py": "Y = 2\n",
		"app.py":            "import money\n",
		"go.mod":            "module github.com/acme/shop\n",
		"main.go":           "package main\n\nimport (\n\t\"github.com/acme/money\"\n\t\"github.com/evil/x\"\n)\n\nfunc main() {}\n",
	})
	got := linkStrings(Build([]Repo{lib, fork, shop}).Links())
	want := []string{
		"shop:main.go -> fork:m.go (go github.com/acme/money)",
		"shop:main.go -> lib:m.go (go github.com/acme/money)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("links %q, want %q", got, want)
	}
}

// Hostile manifests and specs give no links and no panic.
func TestHostileInput(t *testing.T) {
	lib := repoOf(t, "lib", map[string]string{
		"package.json":   `{"name": "../../etc", "main": "../../../etc/passwd"}`,
		"a/package.json": `{"name": "ok", "main": "../../../../x", "exports": {"./*": "../*"}}`,
		"a/index.js":     "module.exports = 1\n",
		"Cargo.toml":     "[package]\nname = \"x\"\n[lib]\npath = \"../../outside.rs\"\n",
		"go.mod":         "module \n",
		"pom.xml":        "<project><groupId>",
		"b/package.json": `{"name": 5, "exports": [[[[[[[[[[[["x"]]]]]]]]]]]}`,
	})
	shop := repoOf(t, "shop", map[string]string{
		"a.js": "require('ok/../../../../etc/passwd');\nrequire('../../etc');\nrequire('ok');\n",
		"b.rs": "use x::y;\n\nfn f() {}\n",
	})
	g := Build([]Repo{lib, shop})
	for _, l := range g.Links() {
		if l.To.Path != "a/index.js" {
			t.Errorf("hostile link %+v", l)
		}
	}
}
