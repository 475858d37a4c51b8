package natsq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/queue"
	"codectx/pkg/queue/natsq"

	"github.com/nats-io/nats.go/jetstream"
)

// position is where the first message of subject prefix share was
// handled among got (-1: never).
func position(got []queue.Message, share string) int {
	return slices.IndexFunc(got, func(m queue.Message) bool {
		return m.Subject == share || len(m.Subject) > len(share) && m.Subject[:len(share)+1] == share+"."
	})
}

// TestSharesTakeTurns: a share that queued many messages does not hold
// back another share's one, whether queued before the consumer started or
// while it works; within a share the order is kept.
func TestSharesTakeTurns(t *testing.T) {
	for _, limit := range []int{0, 100} {
		t.Run(fmt.Sprintf("share limit %d", limit), func(t *testing.T) {
			s := startServer(t)
			q := connect(t, s)
			q.SetShareLimit("parse", limit)
			for i := range 30 {
				publish(t, q, "parse", fmt.Sprintf("tbusy.s%d", i%3), fmt.Sprintf("busy-%02d", i), fmt.Sprintf("busy-%d", i))
			}
			publish(t, q, "parse", "tsmall.s1", "small-1", "small-1")
			waitPending(t, q, "parse", 31)

			var rec recorder
			release := make(chan struct{})
			consume(t, q, queue.Config{Stage: "parse", Workers: 1}, func(ctx context.Context, m queue.Message) error {
				if rec.add(m) == 3 {
					<-release // the second push arrives while the consumer works
				}
				time.Sleep(2 * time.Millisecond)
				return nil
			})
			waitFor(t, "3 handled", func() bool { return rec.count() >= 3 })
			publish(t, q, "parse", "tlate.s9", "late-1", "late-1")
			time.Sleep(50 * time.Millisecond) // its notice is in
			close(release)
			waitPending(t, q, "parse", 0)

			got := rec.get()
			if len(got) != 32 {
				t.Fatalf("handled %d messages, want 32", len(got))
			}
			// Queued behind 30 of another share, handled in its first turn.
			if i := position(got, "tsmall"); i < 0 || i > 1 {
				t.Errorf("the small share's message was handled %dth, after %d of the busy share; want in the first two", i+1, i)
			}
			// Published while 27 of the busy share waited.
			if i := position(got, "tlate"); i < 3 || i > 5 {
				t.Errorf("the late share's message was handled %dth; want within two turns of its publish (3rd-5th)", i+1)
			}
			var busy []string
			for _, m := range got {
				if string(m.Data[:4]) == "busy" {
					busy = append(busy, string(m.Data))
				}
			}
			if !slices.IsSorted(busy) {
				t.Errorf("the busy share's messages were handled out of order: %v", busy)
			}
		})
	}
}

// TestSharesTakeTurnsAcrossWorkers: with several workers, every share
// still gets a turn before a busy one's backlog, and retries with a delay
// come back. In the order published, tc would come 43rd; taking turns, it
// comes 4th-7th unloaded, and up to 9th on a loaded machine (CI once,
// and 60 runs beside three busy loops): the bound leaves room for that and
// stays far from the backlog's 40.
func TestSharesTakeTurnsAcrossWorkers(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	for i := range 40 {
		publish(t, q, "parse", "tbusy.x", fmt.Sprint("busy-", i), fmt.Sprint("busy-", i))
	}
	for _, sh := range []string{"ta", "tb", "tc"} {
		publish(t, q, "parse", sh+".x", sh, sh)
	}
	var rec recorder
	consume(t, q, queue.Config{Stage: "parse", Workers: 3, Backoff: []time.Duration{100 * time.Millisecond}},
		func(ctx context.Context, m queue.Message) error {
			rec.add(m)
			if m.Subject == "tb.x" && m.Deliveries == 1 {
				return fmt.Errorf("transient")
			}
			time.Sleep(5 * time.Millisecond)
			return nil
		})
	waitPending(t, q, "parse", 0)
	got := rec.get()
	for _, sh := range []string{"ta", "tb", "tc"} {
		if i := position(got, sh); i < 0 || i > 11 {
			t.Errorf("share %s first handled %dth of %d; want within the first 12", sh, i+1, len(got))
		}
	}
	if n := len(got); n != 44 {
		t.Errorf("handled %d deliveries, want 44 (43 messages, one retried)", n)
	}
}

// TestSharesReplaceTheOldConsumer: a stream left by a version with one
// unfiltered consumer (which would overlap every share's) is taken over,
// its queued messages included.
func TestSharesReplaceTheOldConsumer(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	publish(t, q, "parse", "ta.x", "a", "a")
	publish(t, q, "parse", "tb.x", "b", "b")
	_, js := rawJS(t, s)
	if _, err := js.CreateOrUpdateConsumer(t.Context(), "CODECTX_PARSE", jetstream.ConsumerConfig{
		Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	consume(t, q, queue.Config{Stage: "parse"}, rec.handle)
	waitPending(t, q, "parse", 0)
	if n := rec.count(); n != 2 {
		t.Errorf("handled %d messages, want 2", n)
	}
	if _, err := js.Consumer(t.Context(), "CODECTX_PARSE", "workers"); err == nil {
		t.Errorf("the unfiltered consumer is still there")
	}
}

// TestSharesReplaceTheOldConsumerAgain: an older worker that makes its
// unfiltered consumer again while a newer one runs does not stop the
// newer one (a rolling upgrade).
func TestSharesReplaceTheOldConsumerAgain(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	publish(t, q, "parse", "ta.x", "a", "a")
	var rec recorder
	consume(t, q, queue.Config{Stage: "parse"}, rec.handle)
	waitFor(t, "the first message", func() bool { return rec.count() == 1 })
	_, js := rawJS(t, s)
	// An older worker can make its consumer only while no other exists
	// (a work-queue stream takes no unfiltered consumer beside others):
	// as when the newer one's consumers were removed as idle. Remove
	// them, and make it, until it takes (the newer worker may make one
	// again between the two).
	st, err := js.Stream(t.Context(), "CODECTX_PARSE")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the old consumer made", func() bool {
		for name := range st.ConsumerNames(t.Context()).Name() {
			js.DeleteConsumer(t.Context(), "CODECTX_PARSE", name)
		}
		_, err := js.CreateOrUpdateConsumer(t.Context(), "CODECTX_PARSE", jetstream.ConsumerConfig{
			Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy,
		})
		return err == nil
	})
	publish(t, q, "parse", "tb.x", "b", "b")
	publish(t, q, "parse", "ta.x", "a2", "a2")
	waitFor(t, "the messages after the old consumer came back", func() bool { return rec.count() == 3 })
	waitPending(t, q, "parse", 0)
}

// TestSharesNoticeIsNotMissed: a message announced to idle workers is
// handled at once, never left to the next read of the stream's shares
// (made a minute here). The server tells a stream's consumers of a stored
// message shortly after acknowledging it to the publisher, so a pull that
// does not wait, made on the notice, could find nothing.
func TestSharesNoticeIsNotMissed(t *testing.T) {
	t.Cleanup(natsq.SetRescan(time.Minute)) // runs last: after the consumer stops
	s := startServer(t)
	q := connect(t, s)
	got := make(chan string, 16)
	consume(t, q, queue.Config{Stage: "parse", Workers: 4}, func(_ context.Context, m queue.Message) error {
		got <- m.Subject
		return nil
	})
	var worst time.Duration
	for i := range 1000 {
		start := time.Now()
		publish(t, q, "parse", fmt.Sprintf("t%d.x", i%3), "m", "")
		select {
		case <-got:
		case <-time.After(patience):
			t.Fatalf("message %d not handled within %v of its publish", i, patience)
		}
		worst = max(worst, time.Since(start))
	}
	t.Logf("slowest of 1000: %v", worst)
}

// TestSharesRetryComesBackBesideOthers: a message handed back with a
// retry delay is taken again when the delay is over, not at the next read
// of the stream's shares (made a minute here), while other shares' work
// comes and goes meanwhile.
func TestSharesRetryComesBackBesideOthers(t *testing.T) {
	t.Cleanup(natsq.SetRescan(time.Minute)) // runs last: after the consumer stops
	s := startServer(t)
	q := connect(t, s)
	again := make(chan time.Time, 1)
	var failedAt atomic.Int64
	consume(t, q, queue.Config{Stage: "parse", Workers: 2, Backoff: []time.Duration{300 * time.Millisecond}},
		func(_ context.Context, m queue.Message) error {
			if m.Subject != "tretry.x" {
				return nil
			}
			if m.Deliveries == 1 {
				failedAt.Store(time.Now().UnixNano())
				return errors.New("transient")
			}
			again <- time.Now()
			return nil
		})
	publish(t, q, "parse", "tretry.x", "r", "r")
	waitFor(t, "the first delivery", func() bool { return failedAt.Load() != 0 })
	for i := range 50 { // other shares' work while the retry waits
		publish(t, q, "parse", fmt.Sprintf("tother%d.x", i%4), "o", "")
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case at := <-again:
		if d := at.Sub(time.Unix(0, failedAt.Load())); d > 2*time.Second {
			t.Errorf("retried %v after its failure, want about its 300 ms delay", d)
		}
	case <-time.After(patience):
		t.Fatal("the retry never came")
	}
}

// TestSharesOneBadShareDoesNotStopTheOthers: a share whose consumer
// cannot be made (here a consumer of its name exists, of another kind),
// and notices naming no valid share, leave the other shares' work going.
func TestSharesOneBadShareDoesNotStopTheOthers(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	publish(t, q, "parse", "tbad.x", "bad", "bad")
	nc, js := rawJS(t, s)
	if _, err := js.CreateOrUpdateConsumer(t.Context(), "CODECTX_PARSE", jetstream.ConsumerConfig{
		Durable: natsq.ShareConsumer("tbad"), AckPolicy: jetstream.AckExplicitPolicy,
		DeliverSubject: "elsewhere", FilterSubjects: []string{"codectx.parse.tbad", "codectx.parse.tbad.>"},
	}); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	consume(t, q, queue.Config{Stage: "parse"}, rec.handle)
	for _, forged := range []string{"a.b", "*", ">", "with space", strings.Repeat("x", 1000)} {
		if err := nc.Publish("codectx_new.parse", []byte(forged)); err != nil {
			t.Fatal(err)
		}
	}
	// Each failed turn cost the worker a 100 ms pause (a transient
	// error), every other turn: 50 messages took about 5 s.
	start := time.Now()
	for i := range 50 {
		publish(t, q, "parse", "tgood.x", fmt.Sprint("good-", i), "")
	}
	waitFor(t, "the good share's messages", func() bool { return rec.count() == 50 })
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("50 messages of the good share took %v, want well under 2 s", d)
	}
	for _, m := range rec.get() {
		if m.Subject != "tgood.x" {
			t.Errorf("handled %+v", m)
		}
	}
}
