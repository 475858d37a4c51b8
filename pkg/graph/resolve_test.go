package graph

import (
	"testing"

	"codectx/pkg/codectx"
)

const (
	fn     = codectx.KindFunction
	method = codectx.KindMethod
	class  = codectx.KindClass
	strct  = codectx.KindStruct
	iface  = codectx.KindInterface
	typ    = codectx.KindType
)

func goFixture() fixture {
	return fixture{
		name: "go",
		in: Input{
			GoModule:  "example.com/app",
			GoModules: map[string]string{"tools": "example.com/tools"},
			Files: []FileInput{
				{Path: "cmd/app/main.go", Language: codectx.Go, Package: "main",
					Imports: []string{"fmt", "example.com/app/store"},
					Symbols: []SymbolInput{sym(1, "main", fn, []string{"store.Open", "fmt.Println", "serve"}, nil)}},
				{Path: "cmd/app/serve.go", Language: codectx.Go, Package: "main",
					Imports: []string{"example.com/app/store"},
					Symbols: []SymbolInput{sym(2, "serve", fn, nil, []string{"*store.DB"})}},
				{Path: "store/db.go", Language: codectx.Go, Package: "store",
					Symbols: []SymbolInput{
						sym(3, "DB", strct, nil, nil),
						sym(4, "Open", fn, []string{"newDB"}, []string{"DB", "error"}),
						sym(5, "(*DB).Get", method, []string{"d.lookup", "strings.TrimSpace"}, nil),
						sym(6, "(*DB).lookup", method, nil, nil),
					}},
				{Path: "store/helpers.go", Language: codectx.Go, Package: "store",
					Symbols: []SymbolInput{sym(7, "newDB", fn, nil, []string{"DB"})}},
				{Path: "store/db_test.go", Language: codectx.Go, Package: "store_test",
					Imports: []string{"testing", "example.com/app/store"},
					Symbols: []SymbolInput{sym(8, "TestOpen", fn, []string{"store.Open"}, []string{"testing.T"})}},
				{Path: "tools/gen/gen.go", Language: codectx.Go, Package: "gen",
					Imports: []string{"example.com/tools/lint", "example.com/app/missing"},
					Symbols: []SymbolInput{sym(9, "Generate", fn, []string{"lint.Check"}, nil)}},
				{Path: "tools/lint/lint.go", Language: codectx.Go, Package: "lint",
					Symbols: []SymbolInput{sym(10, "Check", fn, nil, nil)}},
			},
		},
		imports: []string{
			"cmd/app/main.go -> store/db.go",
			"cmd/app/main.go -> store/helpers.go",
			"cmd/app/serve.go -> store/db.go",
			"cmd/app/serve.go -> store/helpers.go",
			"store/db_test.go -> store/db.go",
			"store/db_test.go -> store/helpers.go",
			"tools/gen/gen.go -> tools/lint/lint.go",
		},
		fileRefs: []string{
			"call cmd/app/main.go -> cmd/app/serve.go",
			"call cmd/app/main.go -> store/db.go",
			"type cmd/app/serve.go -> store/db.go",
			"call store/db.go -> store/helpers.go",
			"type store/helpers.go -> store/db.go",
			"call store/db_test.go -> store/db.go",
			"call tools/gen/gen.go -> tools/lint/lint.go",
		},
		symbols: []string{
			"call main -> Open",
			"call main -> serve",
			"type serve -> DB",
			"call Open -> newDB",
			"type Open -> DB",
			"call (*DB).Get -> (*DB).lookup",
			"type newDB -> DB",
			"call TestOpen -> Open",
			"call Generate -> Check",
		},
		unresolved: 3, // fmt, testing, example.com/app/missing
	}
}

func pythonFixture() fixture {
	return fixture{
		name: "python",
		in: Input{Files: []FileInput{
			{Path: "pkg/__init__.py", Language: codectx.Python, Imports: []string{".core"}},
			{Path: "pkg/core.py", Language: codectx.Python,
				Imports: []string{"os", ".utils", ".utils.helper", "pkg.models", "pkg.models.Model"},
				Symbols: []SymbolInput{
					sym(1, "Engine", class, nil, nil),
					sym(2, "Engine.run", method, []string{"self.step", "helper", "os.path.join"}, nil),
					sym(3, "Engine.step", method, []string{"Model"}, []string{"Model"}),
				}},
			{Path: "pkg/utils.py", Language: codectx.Python,
				Symbols: []SymbolInput{sym(4, "helper", fn, nil, nil)}},
			{Path: "pkg/models.py", Language: codectx.Python,
				Symbols: []SymbolInput{sym(5, "Model", class, nil, nil), sym(6, "Model.join", method, nil, nil)}},
			{Path: "pkg/sub/__init__.py", Language: codectx.Python},
			{Path: "pkg/sub/deep.py", Language: codectx.Python,
				Imports: []string{"..utils", "..", ".", "...toofar"},
				Symbols: []SymbolInput{sym(7, "deep_fn", fn, []string{"utils.helper"}, nil)}},
			{Path: "src/lib2/__init__.py", Language: codectx.Python},
			{Path: "src/lib2/api.py", Language: codectx.Python,
				Symbols: []SymbolInput{sym(8, "fetch", fn, nil, nil)}},
			{Path: "app.py", Language: codectx.Python,
				Imports: []string{"lib2.api", "requests"},
				Symbols: []SymbolInput{sym(9, "main", fn, []string{"api.fetch", "requests.get"}, nil)}},
			{Path: "tests/test_x.py", Language: codectx.Python,
				Imports: []string{"conftest_helpers"},
				Symbols: []SymbolInput{sym(10, "test_a", fn, []string{"make_thing"}, nil)}},
			{Path: "tests/conftest_helpers.py", Language: codectx.Python,
				Symbols: []SymbolInput{sym(11, "make_thing", fn, nil, nil)}},
		}},
		imports: []string{
			"pkg/__init__.py -> pkg/core.py",
			"pkg/core.py -> pkg/utils.py",
			"pkg/core.py -> pkg/models.py",
			"pkg/sub/deep.py -> pkg/utils.py",
			"pkg/sub/deep.py -> pkg/__init__.py",
			"pkg/sub/deep.py -> pkg/sub/__init__.py",
			"app.py -> src/lib2/api.py",
			"tests/test_x.py -> tests/conftest_helpers.py",
		},
		fileRefs: []string{
			"call pkg/core.py -> pkg/utils.py",
			"call pkg/core.py -> pkg/models.py",
			"type pkg/core.py -> pkg/models.py",
			"call pkg/sub/deep.py -> pkg/utils.py",
			"call app.py -> src/lib2/api.py",
			"call tests/test_x.py -> tests/conftest_helpers.py",
		},
		symbols: []string{
			"call Engine.run -> Engine.step",
			"call Engine.run -> helper",
			"call Engine.step -> Model",
			"type Engine.step -> Model",
			"call deep_fn -> helper",
			"call main -> fetch",
			"call test_a -> make_thing",
		},
		unresolved: 3, // os, requests, ...toofar
	}
}

func tsFixture() fixture {
	ts, tsx := codectx.TypeScript, codectx.TSX
	return fixture{
		name: "typescript",
		in: Input{Files: []FileInput{
			{Path: "src/index.ts", Language: ts,
				Imports: []string{"./router", "./util.js", "./components", "h3", "./missing"},
				Symbols: []SymbolInput{sym(1, "main", fn, []string{"slugify", "new Router", "router.use", "h3.createApp"}, []string{"Router"})}},
			{Path: "src/router.ts", Language: ts,
				Symbols: []SymbolInput{
					sym(2, "Router", class, nil, nil),
					sym(3, "Router.use", method, []string{"this.handle"}, nil),
					sym(4, "Router.handle", method, nil, nil),
				}},
			{Path: "src/util.ts", Language: ts, Symbols: []SymbolInput{sym(5, "slugify", fn, nil, nil)}},
			{Path: "src/components/index.tsx", Language: tsx, Imports: []string{"./Button", "../util"},
				Symbols: []SymbolInput{sym(6, "App", fn, []string{"Button", "util.slugify"}, nil)}},
			{Path: "src/components/Button.tsx", Language: tsx, Symbols: []SymbolInput{sym(7, "Button", fn, nil, nil)}},
			{Path: "legacy/a.js", Language: codectx.JavaScript, Imports: []string{"./b.mjs", "./c", "../src/util.js"}},
			{Path: "legacy/b.mjs", Language: codectx.JavaScript},
			{Path: "legacy/c.cjs", Language: codectx.JavaScript},
		}},
		imports: []string{
			"src/index.ts -> src/router.ts",
			"src/index.ts -> src/util.ts",
			"src/index.ts -> src/components/index.tsx",
			"src/components/index.tsx -> src/components/Button.tsx",
			"src/components/index.tsx -> src/util.ts",
			"legacy/a.js -> legacy/b.mjs",
			"legacy/a.js -> legacy/c.cjs",
			"legacy/a.js -> src/util.ts",
		},
		fileRefs: []string{
			"call src/index.ts -> src/util.ts",
			"call src/index.ts -> src/router.ts",
			"type src/index.ts -> src/router.ts",
			"call src/components/index.tsx -> src/components/Button.tsx",
			"call src/components/index.tsx -> src/util.ts",
		},
		symbols: []string{
			"call main -> slugify",
			"call main -> Router",
			"type main -> Router",
			"call Router.use -> Router.handle",
			"call App -> Button",
			"call App -> slugify",
		},
		unresolved: 2, // h3, ./missing
	}
}

func javaFixture() fixture {
	const root = "src/main/java/org/jsoup/"
	j := codectx.Java
	return fixture{
		name: "java",
		in: Input{Files: []FileInput{
			{Path: root + "nodes/Document.java", Language: j, Package: "org.jsoup.nodes",
				Imports: []string{"org.jsoup.helper.Validate", "java.util.List"},
				Symbols: []SymbolInput{
					sym(1, "Document", class, nil, []string{"Element"}),
					sym(2, "Document.outputSettings", method, []string{"Validate.notNull", "settings", "List.of"}, []string{"List", "Element"}),
					sym(3, "Document.settings", method, nil, nil),
				}},
			{Path: root + "nodes/Element.java", Language: j, Package: "org.jsoup.nodes",
				Symbols: []SymbolInput{sym(4, "Element", class, nil, nil)}},
			{Path: root + "helper/Validate.java", Language: j, Package: "org.jsoup.helper",
				Symbols: []SymbolInput{
					sym(5, "Validate", class, nil, nil),
					sym(6, "Validate.notNull", method, nil, nil), // two overloads
					sym(7, "Validate.notNull", method, nil, nil),
				}},
			{Path: root + "parser/Parser.java", Language: j, Package: "org.jsoup.parser",
				Imports: []string{"org.jsoup.nodes.*", "static org.jsoup.helper.Validate.notNull"},
				Symbols: []SymbolInput{
					sym(8, "Parser", class, nil, nil),
					sym(9, "Parser.parse", method, []string{"notNull", "new Document"}, []string{"Document", "Element"}),
				}},
		}},
		imports: []string{
			root + "nodes/Document.java -> " + root + "helper/Validate.java",
			root + "parser/Parser.java -> " + root + "nodes/Document.java",
			root + "parser/Parser.java -> " + root + "nodes/Element.java",
			root + "parser/Parser.java -> " + root + "helper/Validate.java",
		},
		fileRefs: []string{
			"type " + root + "nodes/Document.java -> " + root + "nodes/Element.java",
			"call " + root + "nodes/Document.java -> " + root + "helper/Validate.java",
			"call " + root + "parser/Parser.java -> " + root + "helper/Validate.java",
			"call " + root + "parser/Parser.java -> " + root + "nodes/Document.java",
			"type " + root + "parser/Parser.java -> " + root + "nodes/Document.java",
			"type " + root + "parser/Parser.java -> " + root + "nodes/Element.java",
		},
		symbols: []string{
			"type Document -> Element",
			"call Document.outputSettings -> Validate.notNull",
			"call Document.outputSettings -> Document.settings",
			"type Document.outputSettings -> Element",
			"call Parser.parse -> Validate.notNull",
			"call Parser.parse -> Document",
			"type Parser.parse -> Document",
			"type Parser.parse -> Element",
		},
		unresolved: 1, // java.util.List
	}
}

func rustFixture() fixture {
	r := codectx.Rust
	return fixture{
		name: "rust",
		in: Input{Files: []FileInput{
			{Path: "src/lib.rs", Language: r, Imports: []string{"mod:de", "mod:error", "std::fmt", "mod:absent"},
				Symbols: []SymbolInput{sym(1, "from_str", fn, []string{"de::Deserializer::new", "fmt::format"}, nil)}},
			{Path: "src/de.rs", Language: r,
				Imports: []string{"crate::error::Error", "super::error", "mod:read", "serde::de::Visitor"},
				Symbols: []SymbolInput{
					sym(2, "Deserializer", strct, nil, nil),
					sym(3, "Deserializer", typ, nil, nil), // impl block
					sym(4, "Deserializer::new", method, []string{"Self::with_reader"}, nil),
					sym(5, "Deserializer::with_reader", method, nil, nil),
					sym(6, "Deserializer::deserialize_any", method, []string{"read::next_byte", "crate::error::make"}, []string{"Error", "Visitor"}),
				}},
			{Path: "src/de/read.rs", Language: r, Imports: []string{"super::super::error::Error"},
				Symbols: []SymbolInput{sym(7, "next_byte", fn, nil, []string{"Result<u8, Error>"})}},
			{Path: "src/error/mod.rs", Language: r, Imports: []string{"mod:kind", "crate::de::Deserializer", "self::kind::{ErrorKind, Other}"},
				Symbols: []SymbolInput{
					sym(8, "Error", strct, nil, []string{"ErrorKind"}),
					sym(9, "make", fn, nil, nil),
				}},
			{Path: "src/error/kind.rs", Language: r, Imports: []string{"super::Error"},
				Symbols: []SymbolInput{sym(10, "ErrorKind", typ, nil, []string{"Error"})}},
		}},
		imports: []string{
			"src/lib.rs -> src/de.rs",
			"src/lib.rs -> src/error/mod.rs",
			"src/de.rs -> src/error/mod.rs",
			"src/de.rs -> src/de/read.rs",
			"src/de/read.rs -> src/error/mod.rs",
			"src/error/mod.rs -> src/error/kind.rs",
			"src/error/mod.rs -> src/de.rs",
			"src/error/kind.rs -> src/error/mod.rs",
		},
		fileRefs: []string{
			"call src/lib.rs -> src/de.rs",
			"call src/de.rs -> src/de/read.rs",
			"call src/de.rs -> src/error/mod.rs",
			"type src/de.rs -> src/error/mod.rs",
			"type src/de/read.rs -> src/error/mod.rs",
			"type src/error/mod.rs -> src/error/kind.rs",
			"type src/error/kind.rs -> src/error/mod.rs",
		},
		symbols: []string{
			"call from_str -> Deserializer::new",
			"call Deserializer::new -> Deserializer::with_reader",
			"call Deserializer::deserialize_any -> next_byte",
			"call Deserializer::deserialize_any -> make",
			"type Deserializer::deserialize_any -> Error",
			"type next_byte -> Error",
			"type Error -> ErrorKind",
			"type ErrorKind -> Error",
		},
		unresolved: 3, // std::fmt, mod:absent, serde::de::Visitor
	}
}

func TestResolve(t *testing.T) {
	for _, fx := range []fixture{goFixture(), pythonFixture(), tsFixture(), javaFixture(), rustFixture()} {
		t.Run(fx.name, func(t *testing.T) { checkFixture(t, fx) })
	}
}
