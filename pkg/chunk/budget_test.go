package chunk

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// TestBudget checks that a budget is spent by its CPU, a spent deadline
// or a done context, and not before.
func TestBudget(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := startBudget(ctx, time.Second)
	if !b.spent() {
		t.Error("a done context: budget not spent")
	}
	b.stop()
	ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	b = startBudget(ctx, time.Second)
	if !b.spent() {
		t.Error("a deadline passed: budget not spent")
	}
	b.stop()

	const timeout = 50 * time.Millisecond
	b = startBudget(context.Background(), timeout)
	defer b.stop()
	if b.spent() {
		t.Fatal("a new budget is spent")
	}
	runtime.LockOSThread() // nested in the budget's: its CPU is this loop's
	defer runtime.UnlockOSThread()
	c0, ok := threadCPU()
	start := time.Now()
	n := 0
	for !b.spend(1) {
		if n++; time.Since(start) > time.Minute {
			t.Fatalf("not spent after %v (%d units)", time.Since(start), n)
		}
	}
	clock, took := time.Since(start), time.Since(start)
	if c1, _ := threadCPU(); ok {
		took = c1 - c0
	}
	// Below the timeout only where the clock bound came first (a machine
	// too busy to give the loop an eighth of a CPU).
	if took < timeout*9/10 && clock < maxLoadStretch*timeout || took > 2*timeout {
		t.Errorf("a budget of %v spent after %v of CPU, %v of clock (%d units)", timeout, took, clock, n)
	}
}
