package natsq_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/queue"
	"codectx/pkg/queue/natsq"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// patience bounds every wait; a healthy run needs a small fraction of it.
const patience = 20 * time.Second

func startServer(t testing.TB) *natsq.Server {
	t.Helper()
	s, err := natsq.StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func connect(t testing.TB, s *natsq.Server) *natsq.Queue {
	t.Helper()
	q, err := natsq.Connect(t.Context(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	return q
}

// consume runs q.Consume in the background; the returned stop cancels it
// and waits for it to return.
func consume(t *testing.T, q *natsq.Queue, cfg queue.Config, h queue.Handler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Consume(ctx, cfg, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "closed") {
					t.Errorf("Consume: %v", err)
				}
			case <-time.After(patience):
				t.Errorf("Consume did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func publish(t testing.TB, q *natsq.Queue, stage, subject, data, id string) {
	t.Helper()
	if err := q.Publish(t.Context(), stage, subject, []byte(data), id); err != nil {
		t.Fatal(err)
	}
}

// rawJS connects a plain NATS and JetStream client to s, as another
// program would (an older worker, an operator's tool); it closes when the
// test ends.
func rawJS(t testing.TB, s *natsq.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// waitFor polls cond until it holds or patience runs out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitPending(t *testing.T, q *natsq.Queue, stage string, want int) {
	t.Helper()
	var got int
	waitFor(t, fmt.Sprintf("Pending(%s) == %d", stage, want), func() bool {
		var err error
		got, err = q.Pending(t.Context(), stage)
		if err != nil {
			t.Fatal(err)
		}
		return got == want
	})
}

// recorder collects handled messages.
type recorder struct {
	mu   sync.Mutex
	msgs []queue.Message
}

func (r *recorder) add(m queue.Message) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
	return len(r.msgs)
}

func (r *recorder) get() []queue.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

func (r *recorder) count() int { return len(r.get()) }

// handle is a queue.Handler that records each message and succeeds.
func (r *recorder) handle(_ context.Context, m queue.Message) error {
	r.add(m)
	return nil
}

func TestPublishConsume(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	if n, err := q.Pending(t.Context(), "parse"); err != nil || n != 0 {
		t.Fatalf("Pending before any publish = %d, %v; want 0", n, err)
	}
	want := []queue.Message{
		{Subject: "repo.a", Data: []byte("one"), Deliveries: 1, ID: "id-1"},
		{Subject: "", Data: []byte("two"), Deliveries: 1, ID: ""},
		{Subject: "repo.b.deep", Data: []byte("three"), Deliveries: 1, ID: "id-3"},
	}
	for _, m := range want {
		publish(t, q, "parse", m.Subject, string(m.Data), m.ID)
	}
	waitPending(t, q, "parse", 3)
	var rec recorder
	consume(t, q, queue.Config{Stage: "parse"}, rec.handle)
	waitFor(t, "3 messages", func() bool { return rec.count() >= 3 })
	waitPending(t, q, "parse", 0)
	got := rec.get()
	if len(got) != len(want) {
		t.Fatalf("handled %d messages, want %d", len(got), len(want))
	}
	// Shares ("repo", and "" for the bare subject) take turns; within
	// one, messages keep their order.
	at := map[string]int{}
	for i, g := range got {
		at[string(g.Data)] = i
	}
	for _, w := range want {
		i, ok := at[string(w.Data)]
		if !ok {
			t.Errorf("message %+v not handled", w)
			continue
		}
		if g := got[i]; g.Subject != w.Subject || g.Deliveries != w.Deliveries || g.ID != w.ID {
			t.Errorf("handled %+v, want %+v", g, w)
		}
	}
	if at["one"] > at["three"] {
		t.Errorf("repo.b.deep handled before repo.a, published after it in the same share")
	}
	if st := q.Stats(); st.Acked != 3 || st.Retried != 0 {
		t.Errorf("Stats = %+v, want 3 acked", st)
	}
}

func TestStagesAreSeparate(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	publish(t, q, "parse", "x", "p", "")
	publish(t, q, "embed", "x", "e", "")
	var rec recorder
	consume(t, q, queue.Config{Stage: "embed"}, rec.handle)
	waitPending(t, q, "embed", 0)
	if got := rec.get(); len(got) != 1 || string(got[0].Data) != "e" {
		t.Fatalf("embed consumer got %+v, want only the embed message", got)
	}
	if n, err := q.Pending(t.Context(), "parse"); err != nil || n != 1 {
		t.Fatalf("Pending(parse) = %d, %v; want 1", n, err)
	}
}

func TestRedeliveryAfterError(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	publish(t, q, "parse", "job", "data", "")
	var rec recorder
	consume(t, q, queue.Config{Stage: "parse", MaxDeliver: 5, Backoff: []time.Duration{50 * time.Millisecond}},
		func(_ context.Context, m queue.Message) error {
			if rec.add(m) == 1 {
				return errors.New("transient")
			}
			return nil
		})
	waitFor(t, "second delivery", func() bool { return rec.count() >= 2 })
	waitPending(t, q, "parse", 0)
	got := rec.get()
	if len(got) != 2 || got[0].Deliveries != 1 || got[1].Deliveries != 2 {
		t.Fatalf("deliveries = %+v, want deliveries 1 then 2", got)
	}
	if st := q.Stats(); st.Retried != 1 || st.Acked != 1 {
		t.Errorf("Stats = %+v, want 1 retried, 1 acked", st)
	}
}

// TestCrashedWorker: a worker takes a message and dies without acking (its
// connection closes, so no ack and no heartbeat); after AckWait another
// worker gets the message.
func TestCrashedWorker(t *testing.T) {
	s := startServer(t)
	crashing, err := natsq.Connect(t.Context(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer crashing.Close()
	cfg := queue.Config{Stage: "parse", AckWait: 500 * time.Millisecond}
	publish(t, crashing, "parse", "job", "data", "m1")

	taken := make(chan struct{})
	stopCrashing := consume(t, crashing, cfg, func(ctx context.Context, m queue.Message) error {
		close(taken)
		<-ctx.Done()
		return ctx.Err()
	})
	select {
	case <-taken:
	case <-time.After(patience):
		t.Fatal("crashing worker never got the message")
	}
	crashing.Close() // the process dies: no ack, no nak, no heartbeat
	stopCrashing()

	survivor := connect(t, s)
	got := make(chan queue.Message, 1)
	consume(t, survivor, cfg, func(_ context.Context, m queue.Message) error {
		got <- m
		return nil
	})
	select {
	case m := <-got:
		if m.ID != "m1" || string(m.Data) != "data" || m.Deliveries != 2 {
			t.Fatalf("survivor got %+v, want m1 on delivery 2", m)
		}
	case <-time.After(patience):
		t.Fatal("message was never redelivered")
	}
	waitPending(t, survivor, "parse", 0)
}

// TestCrashOnFinalDelivery: when the last allowed attempt dies without an
// ack, the message is dead-lettered instead of being stuck forever, and the
// handler is not run again.
func TestCrashOnFinalDelivery(t *testing.T) {
	s := startServer(t)
	crashing, err := natsq.Connect(t.Context(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer crashing.Close()
	cfg := queue.Config{Stage: "parse", AckWait: 500 * time.Millisecond, MaxDeliver: 1}
	publish(t, crashing, "parse", "job", "data", "m1")
	taken := make(chan struct{})
	stopCrashing := consume(t, crashing, cfg, func(ctx context.Context, m queue.Message) error {
		close(taken)
		<-ctx.Done()
		return ctx.Err()
	})
	select {
	case <-taken:
	case <-time.After(patience):
		t.Fatal("crashing worker never got the message")
	}
	crashing.Close()
	stopCrashing()

	survivor := connect(t, s)
	var rec recorder
	consume(t, survivor, cfg, rec.handle)
	waitPending(t, survivor, "parse", 0)
	dls, err := survivor.DeadLetters(t.Context(), "parse")
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || dls[0].ID != "m1" || !strings.Contains(dls[0].Reason, "not acknowledged") {
		t.Fatalf("dead letters = %+v, want m1 with a timeout reason", dls)
	}
	if n := rec.count(); n != 0 {
		t.Errorf("handler ran %d times after the final attempt, want 0", n)
	}
}

// TestPoisonMessage: a handler that always panics sends its message to the
// DLQ after MaxDeliver attempts, and messages behind it are still handled.
func TestPoisonMessage(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	publish(t, q, "parse", "bad", "poison", "p1")
	publish(t, q, "parse", "good", "ok1", "g1")
	publish(t, q, "parse", "good", "ok2", "g2")

	var good recorder
	var mu sync.Mutex
	var goodsSeenByRetry []int // goods handled when the poison came back
	consume(t, q, queue.Config{Stage: "parse", MaxDeliver: 3, Backoff: []time.Duration{time.Second}},
		func(_ context.Context, m queue.Message) error {
			if string(m.Data) == "poison" {
				if m.Deliveries > 1 {
					mu.Lock()
					goodsSeenByRetry = append(goodsSeenByRetry, good.count())
					mu.Unlock()
				}
				panic("cannot parse " + m.Subject)
			}
			good.add(m)
			return nil
		})
	var dls []queue.DeadLetter
	waitFor(t, "dead letter", func() bool {
		var err error
		if dls, err = q.DeadLetters(t.Context(), "parse"); err != nil {
			t.Fatal(err)
		}
		return len(dls) > 0
	})
	waitPending(t, q, "parse", 0)

	if len(dls) != 1 {
		t.Fatalf("dead letters = %+v, want 1", dls)
	}
	dl := dls[0]
	if dl.Stage != "parse" || dl.Subject != "bad" || string(dl.Data) != "poison" || dl.ID != "p1" || dl.Deliveries != 3 {
		t.Errorf("dead letter = %+v", dl)
	}
	if !strings.Contains(dl.Reason, "panic: cannot parse bad") {
		t.Errorf("reason = %q, want the panic message", dl.Reason)
	}
	if n := good.count(); n != 2 {
		t.Errorf("handled %d good messages, want 2", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(goodsSeenByRetry) == 0 || goodsSeenByRetry[0] != 2 {
		t.Errorf("good messages handled before the poison's retry = %v, want 2 (not blocked behind it)", goodsSeenByRetry)
	}
	if st := q.Stats(); st.Panics != 3 || st.DeadLettered != 1 || st.Acked != 2 {
		t.Errorf("Stats = %+v, want 3 panics, 1 dead-lettered, 2 acked", st)
	}
	if other, err := q.DeadLetters(t.Context(), "embed"); err != nil || len(other) != 0 {
		t.Errorf("DeadLetters(embed) = %+v, %v; want none", other, err)
	}
}

func TestDuplicateMsgID(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	publish(t, q, "parse", "job", "first", "same")
	publish(t, q, "parse", "job", "second", "same")
	publish(t, q, "parse", "job", "other", "different")
	publish(t, q, "parse", "job", "anon", "")
	publish(t, q, "parse", "job", "anon", "")
	if n, err := q.Pending(t.Context(), "parse"); err != nil || n != 4 {
		t.Fatalf("Pending = %d, %v; want 4 (one duplicate dropped)", n, err)
	}
	var rec recorder
	consume(t, q, queue.Config{Stage: "parse"}, rec.handle)
	waitPending(t, q, "parse", 0)
	var got []string
	for _, m := range rec.get() {
		got = append(got, string(m.Data))
	}
	if want := []string{"first", "other", "anon", "anon"}; !slices.Equal(got, want) {
		t.Errorf("handled %q, want %q", got, want)
	}
}

// TestHeartbeat: a handler running for 3x AckWait is not redelivered to the
// idle second worker, because in-progress heartbeats reset the ack timer.
func TestHeartbeat(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	// An ack wait long beside a loaded scheduler's hiccups: the heartbeats
	// (a third of it apart) must keep the message, not luck.
	const ackWait = 1500 * time.Millisecond
	publish(t, q, "parse", "slow", "data", "")
	var rec recorder
	done := make(chan struct{})
	consume(t, q, queue.Config{Stage: "parse", AckWait: ackWait, Workers: 2}, func(ctx context.Context, m queue.Message) error {
		if rec.add(m) > 1 {
			return nil // a redelivery: the bug under test
		}
		defer close(done)
		select {
		case <-time.After(3 * ackWait):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	select {
	case <-done:
	case <-time.After(patience):
		t.Fatal("slow handler never ran")
	}
	waitPending(t, q, "parse", 0)
	if got := rec.get(); len(got) != 1 || got[0].Deliveries != 1 {
		t.Fatalf("handler calls = %+v, want one call with Deliveries 1", got)
	}
}

func TestInvalidInput(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	for _, tc := range []struct{ stage, subject string }{
		{"", "x"}, {"Parse", "x"}, {"a.b", "x"}, {"parse", "a..b"}, {"parse", "*"}, {"parse", "a.>"}, {"parse", "has space"},
	} {
		if err := q.Publish(t.Context(), tc.stage, tc.subject, nil, ""); err == nil {
			t.Errorf("Publish(%q, %q) succeeded, want error", tc.stage, tc.subject)
		}
	}
	if err := q.Consume(t.Context(), queue.Config{Stage: "BAD"}, nil); !errors.Is(err, queue.ErrInvalidStage) {
		t.Errorf("Consume(BAD) err = %v, want ErrInvalidStage", err)
	}
}

// DeadLettersOf reads one subject's dead letters only, and the dead-letter
// stream is bounded in age and count.
func TestDeadLettersOfSubject(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	publish(t, q, "parse", "snap1", "poison", "a1")
	publish(t, q, "parse", "snap2", "poison", "b1")
	publish(t, q, "parse", "snap2", "poison", "b2")
	consume(t, q, queue.Config{Stage: "parse", MaxDeliver: 1}, func(context.Context, queue.Message) error {
		return errors.New("bad file")
	})
	waitFor(t, "dead letters", func() bool {
		all, err := q.DeadLetters(t.Context(), "parse")
		if err != nil {
			t.Fatal(err)
		}
		return len(all) == 3
	})
	got, err := q.DeadLettersOf(t.Context(), "parse", "snap2")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "b1" || got[1].ID != "b2" {
		t.Errorf("DeadLettersOf(snap2) = %+v, want b1, b2", got)
	}
	if got, err := q.DeadLettersOf(t.Context(), "parse", "snap3"); err != nil || len(got) != 0 {
		t.Errorf("DeadLettersOf(snap3) = %+v, %v; want none", got, err)
	}
	if _, err := q.DeadLettersOf(t.Context(), "parse", "bad subject"); err == nil {
		t.Error("DeadLettersOf accepted an invalid subject")
	}
	_, js := rawJS(t, s)
	st, err := js.Stream(t.Context(), "CODECTX_DLQ")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Polling dead letters creates no consumer (issue 14: 121 ephemeral
	// consumers were open after a few snapshots).
	for range 50 {
		if _, err := q.DeadLettersOf(t.Context(), "parse", "snap2"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.DeadLetters(t.Context(), "parse"); err != nil {
		t.Fatal(err)
	}
	if info, err = st.Info(t.Context()); err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 0 {
		t.Errorf("%d consumers on the dead-letter stream after 51 reads, want 0", info.State.Consumers)
	}
	for _, d := range got {
		if d.Cause != queue.CauseError || d.Poison() {
			t.Errorf("dead letter %s: cause %q, want %q (a handler error, not a poison input)", d.ID, d.Cause, queue.CauseError)
		}
	}
	if info.Config.MaxAge != natsq.DeadLetterMaxAge || info.Config.MaxMsgs <= 0 {
		t.Errorf("dead-letter stream limits: max age %v, max msgs %d; want %v and a bound", info.Config.MaxAge, info.Config.MaxMsgs, natsq.DeadLetterMaxAge)
	}
}

// The embedded server refuses a client without the run's token.
func TestEmbeddedNeedsToken(t *testing.T) {
	s, err := natsq.StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if strings.Contains(s.Addr(), "@") {
		t.Errorf("Addr %q carries credentials", s.Addr())
	}
	for _, u := range []string{s.Addr(), strings.Replace(s.URL(), "://", "://x", 1)} {
		_, err := natsq.Connect(t.Context(), u)
		if err == nil {
			t.Fatalf("connected to %s without the token", u)
		}
		if strings.Contains(err.Error(), s.URL()) {
			t.Errorf("the error shows the token: %v", err)
		}
	}
	q, err := natsq.Connect(t.Context(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	d, err := q.Deliveries(t.Context(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		if fresh, err := d.Remember(t.Context(), "k1"); err != nil || fresh != want {
			t.Fatalf("Remember #%d = %v, %v; want %v", i, fresh, err, want)
		}
	}
	if err := d.Forget(t.Context(), "k1"); err != nil {
		t.Fatal(err)
	}
	if fresh, err := d.Remember(t.Context(), "k1"); err != nil || !fresh {
		t.Fatalf("Remember after Forget = %v, %v; want fresh", fresh, err)
	}
}

// A watcher hears of each message of its stage and subject a consumer
// finishes, acknowledged or dead-lettered, and of no other; a message a
// handler retries is announced once it is finished.
func TestWatch(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	w := connect(t, s) // the watcher may use another connection
	ch, stop, err := w.Watch("parse", "snap1")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var tries sync.Map
	consume(t, q, queue.Config{Stage: "parse", MaxDeliver: 2}, func(_ context.Context, m queue.Message) error {
		n, _ := tries.LoadOrStore(m.ID, new(atomic.Int32))
		switch {
		case string(m.Data) == "poison":
			return errors.New("bad file")
		case string(m.Data) == "flaky" && n.(*atomic.Int32).Add(1) == 1:
			return errors.New("store unavailable")
		}
		return nil
	})
	publish(t, q, "parse", "snap1", "ok", "a1")
	publish(t, q, "parse", "snap2", "ok", "b1")
	publish(t, q, "graph", "snap1", "ok", "g1")
	publish(t, q, "parse", "snap1", "poison", "a2")
	publish(t, q, "parse", "snap1", "flaky", "a3")
	got := map[string]bool{}
	for len(got) < 3 {
		select {
		case d := <-ch:
			if _, ok := got[d.ID]; ok {
				t.Errorf("%s announced twice", d.ID)
			}
			got[d.ID] = d.Dead
		case <-time.After(patience):
			t.Fatalf("announced %v, want a1, a2 (dead) and a3", got)
		}
	}
	if want := map[string]bool{"a1": false, "a2": true, "a3": false}; !maps.Equal(got, want) {
		t.Errorf("announced %v, want %v", got, want)
	}
	select {
	case d := <-ch:
		t.Errorf("announced %+v of another stage or subject", d)
	case <-time.After(200 * time.Millisecond):
	}
	stop()
	publish(t, q, "parse", "snap1", "ok", "a4")
	select {
	case d, ok := <-ch:
		if ok {
			t.Errorf("announced %+v after stop", d)
		}
	case <-time.After(200 * time.Millisecond):
	}
	if _, _, err := w.Watch("parse", "bad subject"); err == nil {
		t.Error("Watch accepted an invalid subject")
	}
}

// TestShareLimit: with a share limit, a stage holds at most that many
// messages per share (the first token of the subject) and refuses more
// with queue.ErrShareFull until some are done; other shares are not held
// up; a refused message id is taken once there is room, a duplicate of a
// stored one is still dropped; consumers, dead letters and watchers see
// the whole subject.
func TestShareLimit(t *testing.T) {
	s := startServer(t)
	old := connect(t, s)
	publish(t, old, "parse", "a.s0", "before", "p0") // the stream exists without a limit
	q := connect(t, s)
	q.SetShareLimit("parse", 3)
	ctx := t.Context()
	publish(t, q, "parse", "a.s1", "one", "a1")
	publish(t, q, "parse", "a.s2", "two", "a2")
	publish(t, q, "parse", "a.s3", "three", "a3") // p0, stored under its whole subject, counts apart
	if err := q.Publish(ctx, "parse", "a.s1", []byte("four"), "a4"); !errors.Is(err, queue.ErrShareFull) {
		t.Fatalf("4th message of share a: %v, want ErrShareFull", err)
	}
	if err := q.Publish(ctx, "parse", "a.s1", []byte("one"), "a1"); err != nil {
		t.Errorf("duplicate of a stored message in a full share: %v, want dropped without error", err)
	}
	publish(t, q, "parse", "b.s1", "other", "b1") // another share
	w, stop, err := q.Watch("parse", "a.s2")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	var rec recorder
	release := make(chan struct{})
	stopQ := consume(t, q, queue.Config{Stage: "parse", MaxDeliver: 1}, func(_ context.Context, m queue.Message) error {
		<-release
		rec.add(m)
		if string(m.Data) == "two" {
			return queue.Permanent(errors.New("bad input"))
		}
		return nil
	})
	close(release)
	waitPending(t, q, "parse", 0)
	publish(t, q, "parse", "a.s1", "four", "a4") // refused before: taken now
	waitPending(t, q, "parse", 0)
	got := map[string]string{}
	for _, m := range rec.get() {
		got[m.ID] = m.Subject
	}
	want := map[string]string{"p0": "a.s0", "a1": "a.s1", "a2": "a.s2", "a3": "a.s3", "b1": "b.s1", "a4": "a.s1"}
	if !maps.Equal(got, want) {
		t.Errorf("handled %v, want %v", got, want)
	}
	select {
	case d := <-w:
		if d.ID != "a2" || !d.Dead {
			t.Errorf("watch of a.s2 announced %+v, want a2 dead", d)
		}
	case <-time.After(patience):
		t.Error("watch of a.s2 announced nothing")
	}
	dls, err := q.DeadLettersOf(ctx, "parse", "a.s2")
	if err != nil || len(dls) != 1 || dls[0].ID != "a2" || dls[0].Subject != "a.s2" {
		t.Errorf("dead letters of a.s2: %+v, %v", dls, err)
	}

	// A consumer started without a limit leaves the publishers' limit.
	stopQ()
	wk := connect(t, s)
	got2 := make(chan string, 1)
	stopW := consume(t, wk, queue.Config{Stage: "parse"}, func(_ context.Context, m queue.Message) error {
		got2 <- m.Subject
		return nil
	})
	defer stopW()
	publish(t, q, "parse", "c.s1", "late", "c1")
	select {
	case <-got2:
	case <-time.After(patience):
		t.Fatal("nothing consumed")
	}
	st, err := wk.JetStream().Stream(ctx, "CODECTX_PARSE")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.Config.MaxMsgsPerSubject != 3 || !info.Config.DiscardNewPerSubject {
		t.Errorf("after a consumer without a limit: stream limit %d (discard new per subject %v), %v; want 3", info.Config.MaxMsgsPerSubject, info.Config.DiscardNewPerSubject, err)
	}
}

// TestWatchShare: WatchShare announces every finished message whose
// subject's first token is the share, and no other.
func TestWatchShare(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	ch, stop, err := q.WatchShare("parse", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	consume(t, q, queue.Config{Stage: "parse"}, func(context.Context, queue.Message) error { return nil })
	for _, m := range []struct{ subject, id string }{{"a.s1", "1"}, {"b.s1", "2"}, {"a.s2", "3"}, {"ab.s1", "4"}, {"a", "5"}} {
		publish(t, q, "parse", m.subject, "x", m.id)
	}
	got := map[string]bool{}
	for len(got) < 3 {
		select {
		case d := <-ch:
			got[d.ID] = true
		case <-time.After(patience):
			t.Fatalf("announced %v, want 1, 3 and 5", got)
		}
	}
	select {
	case d := <-ch:
		t.Errorf("announced %+v of another share", d)
	case <-time.After(200 * time.Millisecond):
	}
	if !maps.Equal(got, map[string]bool{"1": true, "3": true, "5": true}) {
		t.Errorf("announced %v, want 1, 3 and 5", got)
	}
	for _, bad := range []string{"", "a.b", "a*", ">"} {
		if _, _, err := q.WatchShare("parse", bad); err == nil {
			t.Errorf("WatchShare accepted share %q", bad)
		}
	}
}

// TestHeadGone: a HeadGone notice reaches every listener, on any
// connection, and none after stop.
func TestHeadGone(t *testing.T) {
	s := startServer(t)
	a, b := connect(t, s), connect(t, s)
	got := make(chan string, 4)
	stop, err := b.OnHeadGone(func(tenant, repo string) { got <- tenant + "/" + repo }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.HeadGone(t.Context(), "beta", "shop"); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n != "beta/shop" {
			t.Errorf("notice %q, want beta/shop", n)
		}
	case <-time.After(patience):
		t.Fatal("no notice")
	}
	stop()
	if err := a.HeadGone(t.Context(), "beta", "cart"); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		t.Errorf("notice %q after stop", n)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestHeadGoneMissed: OnHeadGone says when notices may have gone unheard,
// once listening and after NATS came back, and Connected is false
// meanwhile.
func TestHeadGoneMissed(t *testing.T) {
	dir := t.TempDir()
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true}
	start := func() *server.Server {
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats not ready")
		}
		return s
	}
	s := start()
	opts.Port = s.Addr().(*net.TCPAddr).Port // the same port when it comes back
	q, err := natsq.Connect(t.Context(), s.ClientURL(), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var missed atomic.Int32
	stop, err := q.OnHeadGone(func(string, string) {}, func() { missed.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if n := missed.Load(); n != 1 || !q.Connected() {
		t.Fatalf("once listening: missed %d, connected %v; want 1, true", n, q.Connected())
	}
	s.Shutdown()
	s.WaitForShutdown()
	waitFor(t, "the client to see NATS gone", func() bool { return !q.Connected() })
	s = start()
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	waitFor(t, "the reconnection to be reported", func() bool { return missed.Load() == 2 })
	if !q.Connected() {
		t.Error("not connected after the reconnection")
	}
}
