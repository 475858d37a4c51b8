// Package queue is the work-queue port of codectx: stages of the indexing
// pipeline hand each other jobs as messages that are delivered at least
// once, retried with backoff when a handler fails, and parked in a dead-letter
// queue when they keep failing. The NATS JetStream adapter is in queue/natsq.
package queue

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Message is one delivery of a job.
type Message struct {
	Subject    string // as given to Publish
	Data       []byte
	Deliveries int    // 1 on the first delivery
	ID         string // the publisher's message id ("" if none)
}

// Done says that a consumer finished a message: acknowledged it (its
// handler succeeded) or, Dead, dead-lettered it. Notifications are a hint
// that wakes a waiter early; the waiter still reads the outcome where it
// is kept (the store, the dead-letter queue) and still polls, because a
// notification may be lost.
type Done struct {
	ID   string // the publisher's message id
	Dead bool
}

// Handler processes one message. Returning nil acknowledges it; an error
// (or a panic, which is recovered and counted) makes it redelivered after a
// backoff, until the delivery limit sends it to the dead-letter queue.
// Handlers must be idempotent: delivery is at least once.
type Handler func(ctx context.Context, m Message) error

// Config configures a consumer of one stage.
type Config struct {
	Stage      string          // stage name: [a-z0-9_]+, e.g. "parse"
	AckWait    time.Duration   // redeliver if neither acked nor heartbeated for this long; default 30s
	MaxDeliver int             // handler attempts before dead-lettering; default 5
	Backoff    []time.Duration // delay before retry n (last value repeats); none = at once (on NATS 10 ms or more: the server takes a stored retry back at its next check of pending ones, later under load)
	Workers    int             // concurrent handlers; default 1
}

// Defaults for zero Config fields.
const (
	DefaultAckWait    = 30 * time.Second
	DefaultMaxDeliver = 5
)

// WithDefaults returns c with zero fields filled in, or an error if c is
// invalid.
func (c Config) WithDefaults() (Config, error) {
	if err := ValidStage(c.Stage); err != nil {
		return c, err
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = DefaultMaxDeliver
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	switch {
	case c.AckWait < 0:
		return c, fmt.Errorf("queue %s: negative AckWait", c.Stage)
	case c.MaxDeliver < 1:
		return c, fmt.Errorf("queue %s: MaxDeliver %d < 1", c.Stage, c.MaxDeliver)
	case c.Workers < 1:
		return c, fmt.Errorf("queue %s: Workers %d < 1", c.Stage, c.Workers)
	}
	for _, d := range c.Backoff {
		if d < 0 {
			return c, fmt.Errorf("queue %s: negative backoff", c.Stage)
		}
	}
	return c, nil
}

// RetryDelay is the backoff before redelivering a message whose delivery
// number deliveries failed.
func (c Config) RetryDelay(deliveries int) time.Duration {
	if len(c.Backoff) == 0 {
		return 0
	}
	i := min(max(deliveries-1, 0), len(c.Backoff)-1)
	return c.Backoff[i]
}

// ErrInvalidStage reports a stage name outside [a-z0-9_]+.
var ErrInvalidStage = errors.New("queue: invalid stage name")

// ValidStage checks a stage name.
func ValidStage(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty", ErrInvalidStage)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return fmt.Errorf("%w %q: want [a-z0-9_]+", ErrInvalidStage, s)
		}
	}
	return nil
}

// ErrShareFull is returned by a publish refused because the message's
// share already holds the stage's share limit of messages (an adapter
// option; in NATS, natsq.Queue.SetShareLimit). A message's share is the
// first dot-separated token of its subject. Nothing was published: publish
// it again once some of the share's messages are done.
var ErrShareFull = errors.New("queue: the share of the subject holds its limit of messages")

// DeadLetter is a message that exhausted its deliveries.
type DeadLetter struct {
	Stage      string
	Subject    string
	Data       []byte
	ID         string // original message id
	Reason     string // last handler error, or why it was given up
	Cause      string // CausePanic, CauseTimeout, CausePermanent or CauseError
	Deliveries int
	Time       time.Time // when it was dead-lettered
}

// Causes of a dead letter. Panic, timeout and permanent point at the
// message itself (a poison input); CauseError is a handler error that kept
// failing, such as an unavailable store, which a later retry may fix.
const (
	CausePanic     = "panic"     // the last delivery's handler panicked
	CauseTimeout   = "timeout"   // the last delivery was never acknowledged (worker crashed or hung)
	CausePermanent = "permanent" // the handler returned a Permanent error
	CauseError     = "error"     // the handler returned another error on every delivery
)

// Poison reports whether a dead letter's cause lies in the message itself
// rather than in the infrastructure. Dead letters without a cause (written
// before causes existed) count as infrastructure failures: a retry is safe.
func (d DeadLetter) Poison() bool {
	return d.Cause == CausePanic || d.Cause == CauseTimeout || d.Cause == CausePermanent
}

// permanent marks an error that no retry fixes.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks a handler error that no retry fixes (the message or the
// input it names is bad): the message is dead-lettered at once with
// CausePermanent.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err (or an error it wraps) was marked by
// Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// Stats counts what a queue client's consumers did.
type Stats struct {
	Acked        int64 // handler succeeded
	Retried      int64 // handler failed, message redelivered later
	Panics       int64 // handler panicked (also counted as Retried or DeadLettered)
	DeadLettered int64 // moved to the dead-letter queue
}
