package chunk

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"codectx/pkg/codectx"
)

// chains is a file of one function per call chain x.m().m()... of n
// calls, each a statement of its own, size bytes or so in all.
func chains(lang codectx.Language, n, size int) string {
	var b strings.Builder
	chain := "x" + strings.Repeat(".m()", n)
	switch lang {
	case codectx.Go:
		b.WriteString("package p\n\n")
		for b.Len() < size {
			b.WriteString("func f() { " + chain + " }\n")
		}
	case codectx.Java:
		b.WriteString("class A {\n")
		for b.Len() < size {
			b.WriteString("void f() { " + chain + "; }\n")
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// TestSecurityChunkBudget: the parse timeout bounded only the parse, not
// the passes after it (the go/ast walk, tree-sitter's depth check, query
// and build), so 1 MiB of call chains 2,000 calls long, just under the
// depth bounds, held a parse worker 3.8 s (Go) and 5.6 s (Java) of CPU
// where the timeout is 2 s, and 2.3 s and 1.7 s on a faster machine. The
// budget now bounds the whole chunking of a file: such a file degrades
// to line windows as parse_timeout within about the timeout's CPU. A
// timeout of 750 ms stands in for the default on a slower machine (the
// parse itself takes 0.3-0.45 s of it); a small file of such chains is
// still chunked.
func TestSecurityChunkBudget(t *testing.T) {
	const timeout, bound = 750 * time.Millisecond, time.Second
	for _, c := range []struct {
		path string
		lang codectx.Language
		gp   GoParser
	}{
		{"chain.go", codectx.Go, GoAST},
		{"chain.go", codectx.Go, GoTreeSitter},
		{"Chain.java", codectx.Java, GoDefault},
	} {
		src := chains(c.lang, 2000, 1<<20-10<<10)
		opt := Options{ParseTimeout: timeout, GoParser: c.gp}
		r, cpu := cpuOf(func() Result { return Parse(context.Background(), c.path, []byte(src), opt) })
		t.Logf("%s (%d): %d bytes, %v, degraded %q", c.path, c.gp, len(src), cpu, r.Degraded)
		if r.Degraded != codectx.DegradedParseTimeout || r.Skip != "" {
			t.Errorf("%s (%d): degraded %q, skipped %q, want degraded %q", c.path, c.gp, r.Degraded, r.Skip, codectx.DegradedParseTimeout)
		} else {
			checkWindows(t, r, len(strings.TrimSpace(src)))
		}
		if cpu > bound {
			t.Errorf("%s (%d): chunked in %v, past %v", c.path, c.gp, cpu, bound)
		}
		// A few such chains are code: chunked as usual, calls and all.
		small := chains(c.lang, 2000, 32<<10)
		r = Parse(context.Background(), c.path, []byte(small), opt)
		if last := r.Chunks[len(r.Chunks)-1]; r.Degraded != "" || last.Kind != codectx.KindMethod && last.Kind != codectx.KindFunction || len(last.Calls) == 0 {
			t.Errorf("%s (%d), %d bytes: degraded %q, last chunk %s %q calls %q", c.path, c.gp, len(small), r.Degraded, last.Kind, last.Name, last.Calls)
		}
	}
}

// cpuOf runs f and returns its result and the CPU it took on its thread
// (the clock time where the thread's CPU cannot be read), so that a
// bound checked on it holds on a busy machine.
func cpuOf(f func() Result) (Result, time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	c0, ok := threadCPU()
	r := f()
	if c1, _ := threadCPU(); ok {
		return r, c1 - c0
	}
	return r, time.Since(start)
}
