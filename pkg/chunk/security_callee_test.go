package chunk

import (
	"context"
	"strings"
	"testing"
	"time"

	"codectx/pkg/codectx"
)

// TestSecurityNestedCallees: a call's callee spans every call inside it
// (a chain x.m().m()..., a nested func() { ... }()), and the chunker
// read each callee whole, and go/ast finds a node's position by
// descending to its first leaf: time quadratic in the nesting, in a step
// the parse timeout does not bound. 80 KB of a Go chain 20,000 calls
// long held a parse worker 11 s (160 KB: 45 s), 20,000 nested function
// literals 18 s, and a Java chain of 4,000 calls on a 3 MB argument 9 s.
func TestSecurityNestedCallees(t *testing.T) {
	const n = 20000
	for _, c := range []struct {
		path, src, degraded string
	}{
		{"chain.go", "package p\n\nfunc f() { x" + strings.Repeat(".m()", n) + " }\n", codectx.DegradedParseTimeout},
		{"lit.go", "package p\n\nfunc f() {\n" + strings.Repeat("func() {\n", n) + strings.Repeat("}()\n", n) + "}\n", codectx.DegradedParseTimeout},
		{"Chain.java", "class A { void f() { x.m(\"" + strings.Repeat("a", 3<<20) + "\")" + strings.Repeat(".m()", 4000) + "; } }\n", ""},
	} {
		start := time.Now()
		r := Parse(context.Background(), c.path, []byte(c.src), Options{MaxFileSize: 4 << 20})
		took := time.Since(start)
		if r.Degraded != c.degraded || r.Skip != "" {
			t.Errorf("%s: degraded %q, skipped %q, want degraded %q", c.path, r.Degraded, r.Skip, c.degraded)
		}
		if took > 3*time.Second {
			t.Errorf("%s: chunked in %v", c.path, took)
		}
	}
}

// TestPlainName: the callee names plainName gives are compact's, and a
// text longer than maxNameText is no name.
func TestPlainName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a.b", "a.b"},
		{"a.\n\tb", "a.b"},
		{"f()", ""},
		{"x" + strings.Repeat(" ", maxNameText) + ".y", ""},
		{strings.Repeat("a", 121), ""},
	} {
		if got := plainName(c.in); got != c.want {
			t.Errorf("plainName(%.20q) = %q, want %q", c.in, got, c.want)
		}
	}
}
