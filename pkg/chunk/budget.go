package chunk

import (
	"context"
	"runtime"
	"time"
)

// checkEvery is how many units of work pass between two looks at the
// budget: a unit is a node, a capture or a symbol (a symbol's body counts
// a unit a KiB), so looks are a few milliseconds of work apart at most
// (a go/ast node's position can take thousands of steps) and cost the
// common path nothing measurable.
const checkEvery = 256

// budget bounds the whole chunking of one file, its parse and every pass
// after it (the go/ast walk, tree-sitter's depth check, walk, query and
// the chunks' build), by Options.ParseTimeout of the thread's CPU, as
// parseBounded bounds the parse: the parse timeout alone let a file just
// under the depth bounds (1 MiB of call chains 2,000 calls long) hold a
// parse worker 3.8-5.6 s of CPU after a parse well within the 2 s
// timeout (TestSecurityChunkBudget). A file over the budget
// degrades to line windows as parse_timeout. The clock bounds it too, at
// maxLoadStretch times the timeout and at the context's deadline, and a
// done context ends it; where the thread's CPU cannot be read, the clock
// alone decides at the timeout.
//
// The thread is locked while the budget runs (start to stop), so that its
// CPU is this file's. As a thread's CPU cannot pass the clock time, the CPU
// is read only once the clock says it may be spent, so an ordinary file
// reads the clock a few times and its CPU once.
type budget struct {
	timeout time.Duration
	start   time.Time
	hard    time.Time     // the clock bound
	next    time.Time     // before this clock time the CPU cannot be spent
	cpu0    time.Duration // the thread's CPU at start
	cpuOK   bool
	done    <-chan struct{}
	units   int // work counted so far
	look    int // units at which the budget is looked at next
	over    bool
}

// startBudget locks the calling goroutine to its thread and starts a
// budget of timeout; the caller must call stop.
func startBudget(ctx context.Context, timeout time.Duration) *budget {
	runtime.LockOSThread()
	b := &budget{timeout: timeout, start: time.Now(), done: ctx.Done(), look: checkEvery}
	b.cpu0, b.cpuOK = threadCPU()
	clock := maxLoadStretch * timeout
	if !b.cpuOK {
		clock = timeout
	}
	b.hard = b.start.Add(clock)
	if dl, ok := ctx.Deadline(); ok && dl.Before(b.hard) {
		b.hard = dl
	}
	b.next = earlier(b.start.Add(timeout), b.hard)
	return b
}

// stop unlocks the thread startBudget locked.
func (b *budget) stop() { runtime.UnlockOSThread() }

// spend counts n units of work and reports whether the budget is spent,
// looking at it every checkEvery units.
func (b *budget) spend(n int) bool {
	if b.units += n; b.units < b.look {
		return b.over
	}
	b.look = b.units + checkEvery
	return b.spent()
}

// spent reports whether the budget is spent, looking at it now.
func (b *budget) spent() bool {
	if b.over {
		return true
	}
	select {
	case <-b.done:
		b.over = true
		return true
	default:
	}
	now := time.Now()
	switch {
	case now.Before(b.next):
		return false
	case !now.Before(b.hard) || !b.cpuOK:
		b.over = true
		return true
	}
	cpu := b.cpu()
	if cpu >= b.timeout {
		b.over = true
		return true
	}
	// The rest of the CPU budget takes at least as long on the clock.
	b.next = earlier(now.Add(b.timeout-cpu), b.hard)
	return false
}

// cpu is the thread's CPU since start (the clock's time where it cannot
// be read).
func (b *budget) cpu() time.Duration {
	if c, ok := threadCPU(); b.cpuOK && ok {
		return c - b.cpu0
	}
	return time.Since(b.start)
}

// left is what the budget leaves for a parse: its CPU not yet used and the
// clock time to its clock bound.
func (b *budget) left() (cpu, clock time.Duration) {
	return b.timeout - b.cpu(), time.Until(b.hard)
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
