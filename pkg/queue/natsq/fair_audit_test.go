package natsq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"codectx/pkg/queue"
	"codectx/pkg/queue/natsq"

	"github.com/nats-io/nats-server/v2/server"
)

// TestSharesIdleConsumerNotRemovedUnderMessage: with the idle removal of a
// share's consumer shortened to 300 ms, a handler running 1.5 s (its only
// message), a retry delay of 1 s, and a worker stopped until its share's
// consumer is removed, while the share's message waits: every message is handled to success once, and a
// consumer removed while idle is made again.
func TestSharesIdleConsumerNotRemovedUnderMessage(t *testing.T) {
	t.Cleanup(natsq.SetShareIdle(300 * time.Millisecond))
	s := startServer(t)
	q := connect(t, s)
	var mu sync.Mutex
	ok := map[string]int{}
	cfg := queue.Config{Stage: "parse", Workers: 2, AckWait: 600 * time.Millisecond, Backoff: []time.Duration{time.Second}}
	h := func(_ context.Context, m queue.Message) error {
		switch string(m.Data) {
		case "slow":
			time.Sleep(1500 * time.Millisecond)
		case "retry":
			if m.Deliveries == 1 {
				return errors.New("transient")
			}
		}
		mu.Lock()
		ok[string(m.Data)]++
		mu.Unlock()
		return nil
	}
	stop := consume(t, q, cfg, h)
	publish(t, q, "parse", "tslow.x", "slow", "slow")
	publish(t, q, "parse", "tretry.x", "retry", "retry")
	waitPending(t, q, "parse", 0)
	stop()
	publish(t, q, "parse", "tlater.x", "later", "later")
	// No worker: the consumers idle past 300 ms are removed.
	waitFor(t, "the idle consumers removed", func() bool { return consumers(t, s) == 0 })
	consume(t, q, cfg, h)
	waitPending(t, q, "parse", 0)
	mu.Lock()
	defer mu.Unlock()
	for _, d := range []string{"slow", "retry", "later"} {
		if ok[d] != 1 {
			t.Errorf("%s handled to success %d times, want once", d, ok[d])
		}
	}
}

// consumers counts the parse stream's consumers.
func consumers(t *testing.T, s *natsq.Server) int {
	t.Helper()
	_, js := rawJS(t, s)
	st, err := js.Stream(t.Context(), "CODECTX_PARSE")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range st.ConsumerNames(t.Context()).Name() {
		n++
	}
	return n
}

// TestSharesPastTheConsumerLimit: on a NATS whose account allows 4
// consumers a stream, 6 shares' messages are all handled: the consumers
// of shares with nothing left make room for the others' (the server
// removes an idle one only an hour after its last pull; 10 of the 30
// messages waited for that).
func TestSharesPastTheConsumerLimit(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	if err := srv.GlobalAccount().UpdateJetStreamLimits(map[string]server.JetStreamAccountLimits{
		"": {MaxMemory: -1, MaxStore: -1, MaxStreams: -1, MaxConsumers: 4, MaxAckPending: -1},
	}); err != nil {
		t.Fatal(err)
	}
	q, err := natsq.Connect(t.Context(), srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	for i := range 30 {
		publish(t, q, "parse", fmt.Sprintf("t%d.x", i%6), "m", "")
	}
	var mu sync.Mutex
	by := map[string]int{}
	start := time.Now()
	consume(t, q, queue.Config{Stage: "parse", Workers: 2}, func(_ context.Context, m queue.Message) error {
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		by[m.Subject]++
		mu.Unlock()
		return nil
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := q.Pending(t.Context(), "parse")
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			t.Fatalf("%d of 30 messages still queued after 10 s; handled per share %v", n, by)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("30 messages of 6 shares, 4 consumers allowed: all handled in %v", time.Since(start).Round(time.Millisecond))
}
