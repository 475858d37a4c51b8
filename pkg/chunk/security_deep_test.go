package chunk

import (
	"context"
	"strings"
	"testing"
	"time"

	"codectx/pkg/codectx"
)

// TestSecurityDeepTreeQuery: a tree tens of thousands of levels deep parses
// within the timeout, but tree-sitter's query over it took time quadratic
// in the depth, in one call nothing interrupts: 300 KB of nested generics
// or subscripts held a parse worker 28 s to over 2 minutes. Such a tree
// now degrades to line windows at once; a file nesting a thousand
// levels is still chunked.
func TestSecurityDeepTreeQuery(t *testing.T) {
	const n = 50000
	for _, c := range []struct{ path, src string }{
		{"gen.ts", "type X = " + strings.Repeat("A<\n", n) + "B" + strings.Repeat(">\n", n)},
		{"sub.py", "x: " + strings.Repeat("A[\n", n) + "B" + strings.Repeat("]\n", n) + "\n"},
		{"call.rs", "fn f() {\n" + strings.Repeat("g(\n", n) + "1" + strings.Repeat(")\n", n) + ";\n}\n"},
	} {
		start := time.Now()
		r := Parse(context.Background(), c.path, []byte(c.src), Options{MaxFileSize: 4 << 20})
		took := time.Since(start)
		if r.Degraded != codectx.DegradedParseTimeout {
			t.Errorf("%s: degraded %q after %v, want %q", c.path, r.Degraded, took, codectx.DegradedParseTimeout)
			continue
		}
		if took > 10*time.Second {
			t.Errorf("%s: %v", c.path, took)
		}
		checkWindows(t, r, len(strings.TrimSpace(c.src)))
	}
	// A thousand levels are code, if odd: chunked as usual.
	src := "fn f() {\n" + strings.Repeat("g(\n", 1000) + "1" + strings.Repeat(")\n", 1000) + ";\n}\n"
	r := Parse(context.Background(), "ok.rs", []byte(src), Options{})
	if r.Degraded != "" || len(r.Chunks) < 2 || r.Chunks[1].Name != "f" {
		t.Fatalf("1000 levels: degraded %q, %d chunks", r.Degraded, len(r.Chunks))
	}
}
