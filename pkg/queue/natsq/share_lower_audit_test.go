package natsq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"codectx/pkg/queue"
)

// A publisher whose share limit is lower than the stream's (an
// orchestrator or `up` restarted with a lower --tenant-batches, or an
// orchestrator with another value beside) must not delete the messages
// already queued past the new limit: they are work a snapshot waits for,
// and NATS keeps their ids, so publishing them again is dropped. It holds
// each share to its own limit itself and writes the lower limit once the
// shares are down to it.
func TestShareLimitLoweredKeepsQueued(t *testing.T) {
	s := startServer(t)
	ctx := t.Context()
	old := connect(t, s)
	old.SetShareLimit("parse", 8)
	for i := range 8 {
		publish(t, old, "parse", fmt.Sprintf("a.s%d", i), "x", fmt.Sprintf("m%d", i))
	}
	waitPending(t, old, "parse", 8)
	q := connect(t, s)
	q.SetShareLimit("parse", 2)
	publish(t, q, "parse", "b.s1", "y", "b1")
	if n, err := q.Pending(ctx, "parse"); err != nil || n != 9 {
		t.Fatalf("after a publisher with a lower share limit: %d messages queued (%v), want the 8 queued before and its own: queued work was deleted", n, err)
	}
	publish(t, q, "parse", "b.s2", "y", "b2")
	for _, m := range []struct{ subject, id string }{{"b.s3", "b3"}, {"a.s9", "a9"}} {
		if err := q.Publish(ctx, "parse", m.subject, []byte("z"), m.id); !errors.Is(err, queue.ErrShareFull) {
			t.Errorf("%s past the lower limit while the stream's is higher: %v, want ErrShareFull", m.id, err)
		}
	}
	consume(t, q, queue.Config{Stage: "parse"}, func(context.Context, queue.Message) error { return nil })
	waitPending(t, q, "parse", 0)
	time.Sleep(1100 * time.Millisecond) // lowerRetry
	publish(t, q, "parse", "c.s1", "w", "c1")
	st, err := q.JetStream().Stream(ctx, "CODECTX_PARSE")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.Config.MaxMsgsPerSubject != 2 {
		t.Errorf("once the shares were down: stream limit %d, %v; want 2", info.Config.MaxMsgsPerSubject, err)
	}
	// Lifting the limit (a publisher with none) works at once.
	l := connect(t, s)
	publish(t, l, "parse", "d.s1", "v", "d1")
	if info, err := st.Info(ctx); err != nil || info.Config.MaxMsgsPerSubject > 0 {
		t.Errorf("after a publisher without a limit: stream limit %d, %v; want none", info.Config.MaxMsgsPerSubject, err)
	}
}
