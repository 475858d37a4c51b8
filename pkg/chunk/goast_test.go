package chunk

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"codectx/pkg/codectx"
)

// goDiff parses src on both Go paths and describes the first difference
// of their results ("" when equal), with the go/parser path's fallback
// reason ("" when it chunked the file itself).
func goDiff(p string, src []byte) (diff, fallback string) {
	// A long timeout: tree-sitter's parse must not time out on a loaded
	// machine (the go/parser path has no timeout of its own).
	ts := Parse(context.Background(), p, src, Options{GoParser: GoTreeSitter, ParseTimeout: time.Minute})
	ga := Parse(context.Background(), p, src, Options{GoParser: GoAST, ParseTimeout: time.Minute})
	fallback = GoFallback(p, src, Options{})
	return resultDiff(ts, ga), fallback
}

func resultDiff(a, b Result) string {
	if reflect.DeepEqual(a, b) {
		return ""
	}
	if a.Language != b.Language || a.Package != b.Package || a.Skip != b.Skip || a.Degraded != b.Degraded || !reflect.DeepEqual(a.Imports, b.Imports) {
		return fmt.Sprintf("result: tree-sitter %q %q %q %q %q, go/parser %q %q %q %q %q",
			a.Language, a.Package, a.Skip, a.Degraded, a.Imports, b.Language, b.Package, b.Skip, b.Degraded, b.Imports)
	}
	for i := 0; i < max(len(a.Chunks), len(b.Chunks)); i++ {
		if i >= len(a.Chunks) || i >= len(b.Chunks) {
			return fmt.Sprintf("chunk count: tree-sitter %d, go/parser %d", len(a.Chunks), len(b.Chunks))
		}
		ca, cb := a.Chunks[i], b.Chunks[i]
		if reflect.DeepEqual(ca, cb) {
			continue
		}
		va, vb := reflect.ValueOf(ca), reflect.ValueOf(cb)
		for f := 0; f < va.NumField(); f++ {
			if !reflect.DeepEqual(va.Field(f).Interface(), vb.Field(f).Interface()) {
				return fmt.Sprintf("chunk %d %s %q: %s: tree-sitter %#v, go/parser %#v", i, ca.Kind, ca.Name,
					va.Type().Field(f).Name, va.Field(f).Interface(), vb.Field(f).Interface())
			}
		}
	}
	return "differ"
}

// trickyGo is a corpus of Go constructs each path must chunk the same.
var trickyGo = map[string]string{
	"generics.go": `package g

// List is generic.
type List[T any] struct {
	next *List[T]
	val  T
}

type Pair[K comparable, V any] struct{ k K; v V }

type Number interface {
	~int | ~int64 | float64
}

// Push adds v.
func (l *List[T]) Push(v T) *List[T] { return &List[T]{next: l, val: v} }

func (p Pair[K, V]) Key() K { return p.k }

func Map[S ~[]E, E, R any](s S, f func(E) R) []R {
	out := make([]R, 0, len(s))
	for _, v := range s {
		out = append(out, f(v))
	}
	_ = Map[[]int, int, string]
	_ = List[int]{}
	x := Sum[int](1, 2)
	y := Conv[float64](3)
	z := m[k](x)
	w := pkg.F[T](y)
	return out
}
`,
	"grouped.go": `// Package grouped has grouped declarations.
package grouped

import "fmt"
import (
	"io"
	_ "embed"
	. "strings"
	alias "net/http"
)

const (
	A = iota
	B
)

var (
	x int = 1
	y     = fmt.Sprint(x)
)

type (
	// ID names.
	ID = string
	/* Table maps. */
	Table map[ID]*Row // trailing

	Row struct {
		io.Reader
		*alias.Client
		n int ` + "`json:\"n\"`" + `
	}
)

type ()

type (
	Single int
)

var z = struct{ a, b int }{1, 2}
`,
	"docs.go": `// Copyright notice.

//go:build linux && amd64
// +build linux,amd64

// Package docs has doc comments.
//
// Many lines.
package docs // trailing

/*
Block doc.
*/
func Block() {}

//go:noinline
// Directive then doc.
func Directive() {}

// Detached comment.

func NoDoc() {}

var v = 1 // trailing of v
// Doc of F.
func F() {} /* after */ // more

/** Starred
 * block
 */
type S struct{}
`,
	"cgo.go": `package cgo

/*
#include <stdio.h>
#cgo LDFLAGS: -lm
static void hello() { printf("hi\n"); }
*/
import "C"

import "unsafe"

func Hello() {
	C.hello()
	p := unsafe.Pointer(nil)
	_ = (*C.char)(p)
	_ = C.CString("x")
}
`,
	"iface.go": `package iface

import "io"

type RW interface {
	io.Reader
	io.Writer
	Close() error
	// Named returns.
	Named(a, b int) (n int, err error)
	comparable
}

type Embeds interface{ RW; ~struct{} }

type fn func(int) (string, error)

type ch <-chan chan<- *[4]map[string][]func()
`,
	"control.go": `package control

func Labels(xs []int) (n int) {
outer:
	for i := range xs {
		switch {
		case i > 3:
			break outer
		default:
			continue outer
		}
	}
	goto end
end:
	select {
	case v := <-c:
		n += v
	case c <- 1:
	default:
	}
	switch t := any(n).(type) {
	case nil, *int, error, interface{ M() }, func():
		_ = t
	case []byte, map[string]int, struct{}:
	}
	if v, ok := m["x"]; ok && v > 0 {
		n++
	} else if n--; n < 0 {
		n = -n
	}
	defer func() { recover() }()
	go func(a int) {}(1)
	f := func(a, b int) int { return a + b }
	for a, b := 0, 1; a < 3; a, b = a+1, b*2 {
		f(a, b)
	}
	var arr [len(xs)]int
	_ = [...]string{"a", "b"}
	_ = [][]int{{1}, {2, 3}}
	_ = map[string]T{"a": {X: 1}}
	_ = []byte("x")
	_ = (*T)(nil)
	_ = T(n)
	_ = pkg.T(n)
	_ = interface{}(n)
	_ = (func())(nil)
	_ = new(T)
	_ = new(pkg.T)
	_ = make(map[K]V, 4)
	_ = make(chan struct{})
	_ = a.b(x).c(y)
	_ = f()()()
	_ = xs[1:2:3]
	_ = x.(T).M()
	_ = (&T{}).M()
	_ = (T).M
	_ = (*T).M
	_ = -x + ^y &^ z
	_ = <-c
	return arr[0]
}
`,
	"unicode.go":         "package unicode\n\n// Grüße says hello in German.\nfunc Grüße() string { return \"héllo\" }\n\nfunc π() float64 { return 3.14 }\n",
	"unicode_strings.go": "package u\n\n// Doc: café, naïve, 日本語.\nfunc F() string { return \"日本語\" + `ünïcödé` }\n",
	"crlf.go":            "// Package crlf uses CRLF.\r\npackage crlf\r\n\r\nimport \"fmt\"\r\n\r\n// F prints.\r\nfunc F() {\r\n\tfmt.Println(`raw\r\nstring`)\r\n}\r\n\r\nvar x = `a\r\nb`\r\n",
	"bom.go":             "\ufeff// Package bom starts with a BOM.\npackage bom\n\nfunc F() {}\n",
	"huge.go":            "package huge\n\nvar big = []string{" + strings.Repeat(`"abcdefghij", `, 3000) + "}\n\nfunc Long(" + strings.Repeat("a, ", 300) + "z int) {}\n",
	"badutf8.go":         "package bad\n\n// Doc \xff\xfe.\nfunc F() string { return \"\xc3\x28\" }\n",
	"syntax_error.go":    "package broken\n\nfunc F( {\n\treturn\n}\n\nfunc G() {}\n",
	"toplevel_stmt.go":   "package p\n\nx := 1\n\nfunc F() {}\n",
	"closures.go": `package closures

func Outer() func() int {
	n := 0
	inner := func() int {
		type local struct{ v int }
		var l local
		n++
		return n + l.v
	}
	return inner
}

func NoBody(x int) int

func (r *recv) Method() {}
func (recv) Anon()      {}
func (r *pkg.T) Qual()  {}
`,
	"windows.go": "package w\n\n" + strings.Repeat("var a = b.C()\n", 100) + "\nfunc F() {}\n" + strings.Repeat("const k = 1\n", 50),
	"comments_inside.go": `package p

func /* name */ F() {}

type /* c */ (
	A int
	// B doc
	B /* mid */ int
)

func (/* recv */ r *T) M() {}
`,
	"pkgcomment.go": "package /* c */ p\n\nfunc F() {}\n",
}

func TestGoASTMatchesTreeSitter(t *testing.T) {
	names := make([]string, 0, len(trickyGo))
	for n := range trickyGo {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			d, fb := goDiff(n, []byte(trickyGo[n]))
			if d != "" {
				t.Errorf("%s (fallback %q): %s", n, fb, d)
			}
			t.Logf("fallback %q", fb)
		})
	}
	// The Go sources of the other tests.
	for i, src := range []string{goSrc} {
		if d, fb := goDiff(fmt.Sprintf("t%d.go", i), []byte(src)); d != "" {
			t.Errorf("test source %d (fallback %q): %s", i, fb, d)
		}
	}
}

// TestGoASTFallback checks the files the go/parser path hands over.
func TestGoASTFallback(t *testing.T) {
	tests := []struct{ file, want string }{
		{"syntax_error.go", fbSyntax},
		{"toplevel_stmt.go", fbSyntax},
		{"unicode.go", fbUnicode},
		{"pkgcomment.go", fbComment},
		{"generics.go", ""},
		{"control.go", ""},
		{"crlf.go", ""},
		{"bom.go", ""},
		{"unicode_strings.go", ""},
	}
	for _, tt := range tests {
		if got := GoFallback(tt.file, []byte(trickyGo[tt.file]), Options{}); got != tt.want {
			t.Errorf("%s: fallback %q, want %q", tt.file, got, tt.want)
		}
	}
	if got := GoFallback("a.py", []byte("x = 1\n"), Options{}); got != "" {
		t.Errorf("python: fallback %q", got)
	}
}

// goRootFiles lists the .go files under $GOROOT/src, sorted.
func goRootFiles(t *testing.T) []string {
	t.Helper()
	root := filepath.Join(runtime.GOROOT(), "src")
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return out
}

// TestGoASTGoRoot compares both paths on every 25th Go file of the
// standard library; CODECTX_GOAST_ALL=1 compares every file.
func TestGoASTGoRoot(t *testing.T) {
	files := goRootFiles(t)
	step := 25
	if os.Getenv("CODECTX_GOAST_ALL") != "" {
		step = 1
	}
	root := filepath.Join(runtime.GOROOT(), "src")
	compared, differ := 0, 0
	reasons := map[string]int{}
	for i := 0; i < len(files); i += step {
		src, err := os.ReadFile(files[i])
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, files[i])
		d, fb := goDiff(filepath.ToSlash(rel), src)
		compared++
		reasons[fb]++
		if d != "" {
			differ++
			if differ <= 40 {
				t.Errorf("%s (fallback %q): %s", rel, fb, d)
			}
		}
	}
	t.Logf("%d files compared, %d differ; fallback reasons %v", compared, differ, reasons)
	if compared < 100 {
		t.Fatalf("only %d files compared", compared)
	}
}

func TestGoParserOption(t *testing.T) {
	src := []byte(trickyGo["generics.go"])
	for _, gp := range []GoParser{GoDefault, GoAST, GoTreeSitter} {
		r := Parse(context.Background(), "g.go", src, Options{GoParser: gp})
		if r.Degraded != "" || len(r.Chunks) < 5 || r.Chunks[0].Kind != codectx.KindModule {
			t.Errorf("GoParser %d: degraded %q, %d chunks", gp, r.Degraded, len(r.Chunks))
		}
	}
}

func TestGoASTNewlineJoin(t *testing.T) {
	for _, src := range []string{
		"package p\n\nfunc f() {\n\tv := m[k]\n\t(c).d()\n}\n",
		"package p\n\nfunc f() {\n\tw := a[b]\n\t{\n\t}\n}\n",
		"package p\n\nfunc f() {\n\tz := x.y[T] // c\n\t/* d */\n\t(e)()\n}\n",
		"package p\n\nfunc f() {\n\tq := a[b, c]\n\t(d)()\n}\n",
		"package p\n\nfunc f() {\n\tz := x.y\n\t{\n\t}\n}\n",
	} {
		if d, fb := goDiff("j.go", []byte(src)); d != "" || fb != fbNewline {
			t.Errorf("%q: fallback %q, diff %s", src, fb, d)
		}
	}
	// A block after a call, a name or a brace is not joined, nor a
	// parenthesis after a name or a selector.
	src := "package p\n\nfunc f() {\n\tg()\n\t{\n\t}\n\tif x {\n\t}\n\t(h)()\n\tv := m\n\t(c).d()\n\tw := a\n\t{\n\t}\n\tq := x.y\n\t(e)()\n}\n"
	if d, fb := goDiff("j.go", []byte(src)); d != "" || fb != "" {
		t.Errorf("%q: fallback %q, diff %s", src, fb, d)
	}
}
