package chunk

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	sitter "github.com/smacker/go-tree-sitter"
)

// TestNextLimit checks the retry rule of a timed-out parse: again only
// while under half the CPU budget is used, for the clock time the CPU
// share so far calls for, within maxLoadStretch times the timeout and the
// caller's deadline.
func TestNextLimit(t *testing.T) {
	const s = time.Second
	forever := time.Duration(1 << 62)
	for _, tc := range []struct {
		name                      string
		timeout, left, spent, cpu time.Duration
		next                      time.Duration
		again                     bool
	}{
		{"budget of CPU spent", 2 * s, forever, 2 * s, 2 * s, 0, false},
		{"half of it spent", 2 * s, forever, 3 * s, s, 0, false},
		{"a quarter of the CPU: four times the clock", 2 * s, forever, 2 * s, s / 2, 6 * s, true},
		{"no CPU seen: the stretch bound", 2 * s, forever, 2 * s, 0, 14 * s, true},
		{"a tiny CPU share: the stretch bound", 2 * s, forever, 2 * s, time.Millisecond, 14 * s, true},
		{"the deadline is nearer", 2 * s, 5 * s, 2 * s, s / 2, 3 * s, true},
		{"the deadline is spent", 2 * s, 2 * s, 2 * s, s / 2, 0, false},
		{"the stretch bound is spent", 2 * s, forever, 16 * s, s / 4, 0, false},
	} {
		next, again := nextLimit(tc.timeout, tc.left, tc.spent, tc.cpu)
		if next != tc.next || again != tc.again {
			t.Errorf("%s: nextLimit = %v, %v; want %v, %v", tc.name, next, again, tc.next, tc.again)
		}
	}
}

// TestThreadCPU checks that the thread's CPU clock moves with work done on
// the thread (where it can be read at all).
func TestThreadCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a, ok := threadCPU()
	if !ok {
		t.Skip("no thread CPU clock on " + runtime.GOOS)
	}
	x := 0
	for d := time.Now(); time.Since(d) < 50*time.Millisecond; {
		x++
	}
	if b, _ := threadCPU(); b <= a {
		t.Fatalf("thread CPU %v -> %v after 50 ms of work (%d loops)", a, b, x)
	}
}

// TestParseBoundedSpendsBudget checks that a parse really over its CPU
// budget still times out (the stretch is for a busy machine only), and
// that the parser parses again afterwards.
func TestParseBoundedSpendsBudget(t *testing.T) {
	sp := specFor("go")
	if sp == nil {
		t.Fatal("no Go grammar")
	}
	w := sp.get()
	defer w.close()
	var b strings.Builder
	b.WriteString("package big\n")
	for i := range 40000 {
		b.WriteString("func f")
		b.WriteString(strings.Repeat("x", i%7+1))
		b.WriteString("() { a := []int{1, 2, 3}; _ = a[0] + len(a) }\n")
	}
	_, err := parseBounded(w.p, []byte(b.String()), 200*time.Microsecond, 1<<62)
	if !errors.Is(err, sitter.ErrOperationLimit) {
		t.Fatalf("parse of %d bytes in 200µs: %v, want the operation limit", b.Len(), err)
	}
	w.p.Reset()
	tree, err := parseBounded(w.p, []byte("package small\n\nfunc F() {}\n"), 2*time.Second, 1<<62)
	if err != nil {
		t.Fatalf("small parse after a timeout: %v", err)
	}
	tree.Close()
}
