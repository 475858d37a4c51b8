package chunk

import (
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"codectx/pkg/codectx"
)

type file struct {
	path string
	src  []byte
}

// goCorpus reads non-test Go files of the standard library up to limit bytes.
func goCorpus(tb testing.TB, limit int) []file {
	tb.Helper()
	var out []file
	total := 0
	for _, dir := range []string{"net/http", "go/parser", "go/types", "encoding/json", "text/template"} {
		paths, _ := filepath.Glob(filepath.Join(runtime.GOROOT(), "src", dir, "*.go"))
		sort.Strings(paths)
		for _, p := range paths {
			if strings.HasSuffix(p, "_test.go") || total >= limit {
				continue
			}
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			out = append(out, file{path: dir + "/" + filepath.Base(p), src: b})
			total += len(b)
		}
	}
	if total == 0 {
		tb.Skip("no Go standard library sources")
	}
	return out
}

// pySource is a realistic Python module of about n bytes.
func pySource(n int) string {
	var b strings.Builder
	b.WriteString(`"""Synthetic web framework module used for benchmarks."""
from __future__ import annotations

import os
import typing as t
from collections import defaultdict
from .helpers import get_root_path, send_file

`)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `
class Handler%[1]d(BaseHandler):
    """Handles requests for resource %[1]d.

    It keeps a registry of rules and dispatches them.
    """

    default_config: dict[str, t.Any] = {"DEBUG": False, "NAME": "h%[1]d"}

    def __init__(self, app: App, prefix: str = "/r%[1]d") -> None:
        super().__init__(app)
        self.prefix = prefix
        self.rules = defaultdict(list)

    @property
    def name(self) -> str:
        """The handler name."""
        return self.default_config["NAME"]

    def add_url_rule(self, rule: str, endpoint: t.Optional[str] = None, **options: t.Any) -> None:
        """Register a rule."""
        if endpoint is None:
            endpoint = _endpoint_from_view_func(rule)
        options["endpoint"] = endpoint
        methods = options.pop("methods", None)
        if methods is None:
            methods = getattr(rule, "methods", None) or ("GET",)
        self.rules[endpoint].append((rule, sorted(m.upper() for m in methods)))
        for key, value in options.items():
            self.app.logger.debug("option %%s=%%r", key, value)

    async def dispatch(self, request: Request) -> Response:
        try:
            rule = self.match(request.path)
        except NotFound as e:
            return self.handle_error(e)
        return await rule.view(**request.view_args)


def helper_%[1]d(values: list[int]) -> int:
    """Sum the squares of the even values."""
    total = 0
    for v in values:
        if v %% 2 == 0:
            total += v * v
    return os.environ.get("X", total)
`, i)
	}
	return b.String()
}

// BenchmarkParseGo runs Parse on Go files on each of its Go paths (their
// chunks are equal: TestGoASTMatchesTreeSitter).
func BenchmarkParseGo(b *testing.B) {
	files := parsedCorpus(b)
	total := 0
	for _, f := range files {
		total += len(f.src)
	}
	ctx := context.Background()
	for _, p := range []struct {
		name string
		gp   GoParser
	}{{"tree-sitter", GoTreeSitter}, {"go-parser", GoAST}} {
		b.Run(p.name, func(b *testing.B) {
			opt := Options{GoParser: p.gp}
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				for _, f := range files {
					if r := Parse(ctx, f.path, f.src, opt); r.Degraded != "" {
						b.Fatalf("%s: skip=%q degraded=%q", f.path, r.Skip, r.Degraded)
					}
				}
			}
		})
	}
}

func BenchmarkParsePython(b *testing.B) {
	src := []byte(pySource(100 << 10))
	ctx := context.Background()
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if r := Parse(ctx, "app/handlers.py", src, Options{}); r.Skip != "" || r.Degraded != "" {
			b.Fatalf("skip=%q degraded=%q", r.Skip, r.Degraded)
		}
	}
}

// parsedCorpus is goCorpus without the files Parse skips (generated code),
// so that the ceilings below parse what BenchmarkParseGo parses.
func parsedCorpus(b *testing.B) []file {
	var out []file
	for _, f := range goCorpus(b, 512<<10) {
		if Parse(context.Background(), f.path, f.src, Options{}).Skip == "" {
			out = append(out, f)
		}
	}
	return out
}

// BenchmarkParseGoTreeSitter is the ceiling of BenchmarkParseGo: the same
// files parsed by tree-sitter alone (no query, no chunks).
func BenchmarkParseGoTreeSitter(b *testing.B) {
	files := parsedCorpus(b)
	total := 0
	for _, f := range files {
		total += len(f.src)
	}
	w := specFor(codectx.Go).get()
	defer w.close()
	b.SetBytes(int64(total))
	b.ResetTimer()
	for b.Loop() {
		for _, f := range files {
			tree, err := w.p.ParseCtx(context.Background(), nil, f.src)
			if err != nil {
				b.Fatal(err)
			}
			tree.Close()
		}
	}
}

// BenchmarkParseGoStdlib parses the same files with go/parser (comments
// kept), the alternative parser for Go.
func BenchmarkParseGoStdlib(b *testing.B) {
	files := parsedCorpus(b)
	total := 0
	for _, f := range files {
		total += len(f.src)
	}
	b.SetBytes(int64(total))
	b.ResetTimer()
	for b.Loop() {
		for _, f := range files {
			if _, err := parser.ParseFile(token.NewFileSet(), f.path, f.src, parser.ParseComments|parser.SkipObjectResolution); err != nil {
				b.Fatal(err)
			}
		}
	}
}
