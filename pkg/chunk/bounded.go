package chunk

import (
	"context"
	"errors"
	"runtime"
	"time"

	sitter "github.com/smacker/go-tree-sitter"
)

// maxLoadStretch bounds how far a parse's clock time may stretch past its
// timeout when the machine is busy.
const maxLoadStretch = 8

// parseBounded parses src with tree-sitter within timeout of CPU, not only
// of the clock. Tree-sitter's timeout is clock time, so on a loaded machine
// a file that parses well within its budget times out, and its degraded
// windows would be cached as if the file were pathological (an index of
// the same tree would then depend on the load). A parse that timed out
// having used less than half its budget of the thread's CPU is parsed again
// with a clock limit stretched for the load (see nextLimit), at most
// maxLoadStretch times the timeout in all and never past left, the time
// the caller's deadline leaves. Where the thread's CPU cannot be read, the
// clock alone decides, as before.
func parseBounded(p *sitter.Parser, src []byte, timeout, left time.Duration) (*sitter.Tree, error) {
	runtime.LockOSThread() // the thread's CPU is this parse's while locked
	defer runtime.UnlockOSThread()
	limit, spent, cpu := min(timeout, left), time.Duration(0), time.Duration(0)
	for {
		cpu0, ok := threadCPU()
		start := time.Now()
		p.SetOperationLimit(int(max(limit.Microseconds(), 1)))
		tree, err := p.ParseCtx(context.Background(), nil, src)
		if err == nil || !errors.Is(err, sitter.ErrOperationLimit) || !ok {
			return tree, err
		}
		cpu1, _ := threadCPU()
		spent += time.Since(start)
		cpu += cpu1 - cpu0
		next, again := nextLimit(timeout, left, spent, cpu)
		if !again {
			return tree, err
		}
		p.Reset() // a halted parse would otherwise resume
		limit = next
	}
}

// nextLimit decides whether a parse that timed out after spent clock time
// and cpu thread CPU (over all its tries) of a timeout budget is tried
// again, and with which clock limit: only while it has used less than half
// its CPU budget, with the clock time its CPU share so far says the rest of
// the budget needs, within maxLoadStretch times the timeout in all and
// within left (the caller's deadline).
func nextLimit(timeout, left, spent, cpu time.Duration) (time.Duration, bool) {
	if cpu >= timeout/2 || spent >= left {
		return 0, false
	}
	total := maxLoadStretch * timeout
	if cpu > 0 {
		// Clock time per CPU so far, times the whole budget.
		total = min(total, time.Duration(float64(timeout)*float64(spent)/float64(cpu)))
	}
	total = min(total, left)
	if total <= spent {
		return 0, false
	}
	return total - spent, true
}
