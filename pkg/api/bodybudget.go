package api

import (
	"context"
	"errors"
	"io"
	"math/bits"
	"sync"
	"time"
)

// The bodies of webhook deliveries are read before they are verified, so
// their memory is bounded by a budget of bytes (Limits.WebhookBytes), not
// by a count of deliveries: a count lets a few slow connections hold every
// slot at next to no bandwidth, while bytes must be sent to be held.
//
// A delivery reserves its body's memory as the body arrives, a chunk at a
// time: nothing before its first byte (it waits for that byte in a 1-byte
// buffer of its own, so a connection that sends only headers holds no
// budget until the pace cuts it), then a chunk of firstStep bytes, each
// next chunk twice the last up to maxStep, each reserved only once a byte
// for it has arrived. What a delivery holds is thus at most twice what it
// has sent plus firstStep, and at most what it has sent plus maxStep.
//
// Every reservation is one chunk of at most maxStep bytes, so no waiter is
// ever big: the queue is first come, first served, and the head of the
// queue is served as soon as maxStep bytes are free (unlike a semaphore
// whose head may wait for a whole body's worth while smaller requests
// behind it starve).
const (
	firstStep = 4 << 10
	maxStep   = 64 << 10
	nSteps    = 5 // firstStep << (nSteps-1) == maxStep
)

// errBusy is the answer of a reservation that found no budget in time.
var errBusy = errors.New("api: the webhook body budget is in use")

// keepBuffer is how many bytes of idle chunks the budget keeps once no
// body is being read: enough for a push's JSON.
const keepBuffer = 64 << 10

// stepSize is the size of chunks of class c.
func stepSize(c int) int { return firstStep << c }

// stepClass is the class of a chunk of capacity n (a stepSize).
func stepClass(n int) int { return bits.Len(uint(n/firstStep)) - 1 }

// bodyBudget lends the chunks delivery bodies are read into, at most size
// bytes of them at once. The chunks given back are kept for the next
// deliveries (idle), so a burst of big forged bodies reuses the same
// memory instead of allocating its own: what is lent and what is idle
// together stay within size, whatever the collector's timing. When
// nothing is lent, the idle chunks are cut back to keepBuffer, so an
// attack's memory is not kept once it is over.
type bodyBudget struct {
	size int64

	mu        sync.Mutex
	held      int64 // bytes lent
	idle      [nSteps][][]byte
	idleBytes int64
	queue     []*budgetWait // first come, first served
	seq       uint64
	// holders are the deliveries holding budget (leaving ones apart);
	// queuedHolders those of them waiting in the queue; leaving those
	// refused to break a standstill, whose budget is about to come back.
	holders, queuedHolders, leaving int
}

// budgetWait is a reservation waiting in the queue.
type budgetWait struct {
	d       *bodyRead
	class   int
	done    chan struct{} // closed when served or refused
	chunk   []byte        // the chunk, once served
	refused bool
}

func newBodyBudget(size int64) *bodyBudget {
	return &bodyBudget{size: max(size, maxStep)}
}

// bodyRead is one delivery's body being read against a budget. Its
// chunks are its own goroutine's; held and leaving are under the
// budget's lock.
type bodyRead struct {
	b       *bodyBudget
	born    uint64
	chunks  [][]byte // the body so far; only the last may have room
	n       int64
	held    int64
	leaving bool
}

// start begins a delivery's body; release ends it.
func (b *bodyBudget) start() *bodyRead {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	return &bodyRead{b: b, born: b.seq}
}

// reserve takes d's next chunk, waiting up to wait for budget when it has
// none free (errBusy then, or ctx's error when the request ended first).
// It returns how long it waited.
func (d *bodyRead) reserve(ctx context.Context, wait time.Duration) ([]byte, time.Duration, error) {
	b := d.b
	c := min(len(d.chunks), nSteps-1)
	b.mu.Lock()
	if len(b.queue) == 0 && b.held+int64(stepSize(c)) <= b.size {
		chunk := b.giveLocked(d, c)
		b.mu.Unlock()
		return chunk, 0, nil
	}
	w := &budgetWait{d: d, class: c, done: make(chan struct{})}
	b.queue = append(b.queue, w)
	if d.held > 0 {
		b.queuedHolders++
	}
	b.unstickLocked()
	b.mu.Unlock()

	t0 := time.Now()
	t := time.NewTimer(wait)
	defer t.Stop()
	err := errBusy
	select {
	case <-w.done:
	case <-t.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	waited := time.Since(t0)
	switch {
	case w.chunk != nil:
		return w.chunk, waited, nil // served, if only just
	case w.refused:
		return nil, waited, errBusy
	}
	for i, q := range b.queue {
		if q == w {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			break
		}
	}
	if d.held > 0 {
		b.queuedHolders--
	}
	b.serveLocked() // the next in line may fit where w did not
	b.unstickLocked()
	return nil, waited, err
}

// giveLocked lends d a chunk of class c, which fits.
func (b *bodyBudget) giveLocked(d *bodyRead, c int) []byte {
	size := stepSize(c)
	b.held += int64(size)
	if d.held == 0 {
		b.holders++
	}
	d.held += int64(size)
	if s := b.idle[c]; len(s) > 0 {
		chunk := s[len(s)-1]
		s[len(s)-1] = nil
		b.idle[c] = s[:len(s)-1]
		b.idleBytes -= int64(size)
		return chunk[:0]
	}
	// A new chunk: let idle chunks of other sizes go first as far as
	// needed, so that what is lent and what is kept stay within size.
	for k := nSteps - 1; k >= 0 && b.held+b.idleBytes > b.size; k-- {
		for len(b.idle[k]) > 0 && b.held+b.idleBytes > b.size {
			b.idle[k][len(b.idle[k])-1] = nil
			b.idle[k] = b.idle[k][:len(b.idle[k])-1]
			b.idleBytes -= int64(stepSize(k))
		}
	}
	return make([]byte, 0, size)
}

// serveLocked lends the waiting reservations their chunks, in order, as
// far as the budget goes.
func (b *bodyBudget) serveLocked() {
	for len(b.queue) > 0 {
		w := b.queue[0]
		if b.held+int64(stepSize(w.class)) > b.size {
			return
		}
		b.queue[0] = nil
		b.queue = b.queue[1:]
		if w.d.held > 0 {
			b.queuedHolders--
		}
		w.chunk = b.giveLocked(w.d, w.class)
		close(w.done)
	}
}

// unstickLocked breaks a standstill: when every delivery holding budget
// waits for more (bodies arriving together filled it, each part way), none
// would finish before its wait ran out, and all would be refused together.
// The youngest of them is refused at once instead, so that the older ones
// go on with what it gives back.
func (b *bodyBudget) unstickLocked() {
	if b.leaving > 0 || len(b.queue) == 0 || b.holders == 0 || b.holders != b.queuedHolders {
		return
	}
	at := -1
	for i, w := range b.queue {
		if w.d.held > 0 && (at < 0 || w.d.born > b.queue[at].d.born) {
			at = i
		}
	}
	w := b.queue[at]
	b.queue = append(b.queue[:at], b.queue[at+1:]...)
	b.queuedHolders--
	b.holders--
	b.leaving++
	w.d.leaving = true
	w.refused = true
	close(w.done)
}

// release gives back d's chunks; its body must no longer be used.
func (d *bodyRead) release() {
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range d.chunks {
		k := stepClass(cap(c))
		b.idle[k] = append(b.idle[k], c[:0])
		b.idleBytes += int64(cap(c))
	}
	d.chunks = nil
	if d.held > 0 {
		if d.leaving {
			b.leaving--
		} else {
			b.holders--
		}
	}
	b.held -= d.held
	d.held = 0
	if b.held == 0 {
		// Nothing is lent: keep at most one chunk of each size up to
		// keepBuffer bytes, smallest first.
		keep := int64(keepBuffer)
		for k := range b.idle {
			n := 0
			if len(b.idle[k]) > 0 && int64(stepSize(k)) <= keep {
				n = 1
				keep -= int64(stepSize(k))
			}
			clear(b.idle[k][n:])
			b.idle[k] = b.idle[k][:n:n]
		}
		b.idleBytes = int64(keepBuffer) - keep
	}
	b.serveLocked()
	b.unstickLocked()
}

// readFrom reads a body from r into d's chunks, writing it to v as it
// comes, until r's EOF. A chunk is reserved only once a byte for it has
// arrived; while a reservation waits, p's pace is paused (the sender is
// not slow, the server is), but not its bound in all.
func (d *bodyRead) readFrom(ctx context.Context, r io.Reader, v io.Writer, p *paced, wait time.Duration) error {
	var first [1]byte
	for {
		last := len(d.chunks) - 1
		if last < 0 || len(d.chunks[last]) == cap(d.chunks[last]) {
			n, err := r.Read(first[:])
			if n == 0 {
				if err == nil {
					continue
				}
				return eofNil(err)
			}
			chunk, waited, rerr := d.reserve(ctx, wait)
			if p != nil {
				p.pause(waited)
			}
			if rerr != nil {
				return rerr
			}
			d.chunks = append(d.chunks, append(chunk, first[0]))
			d.n++
			v.Write(first[:])
			if err != nil {
				return eofNil(err)
			}
			continue
		}
		c := d.chunks[last]
		n, err := r.Read(c[len(c):cap(c)])
		d.chunks[last] = c[:len(c)+n]
		d.n += int64(n)
		v.Write(c[len(c) : len(c)+n])
		if err != nil {
			return eofNil(err)
		}
	}
}

func eofNil(err error) error {
	if err == io.EOF {
		return nil
	}
	return err
}

// bytes copies the body out of d's chunks.
func (d *bodyRead) bytes() []byte {
	body := make([]byte, 0, d.n)
	for _, c := range d.chunks {
		body = append(body, c...)
	}
	return body
}

// waiting is how many reservations wait (for tests).
func (b *bodyBudget) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}
