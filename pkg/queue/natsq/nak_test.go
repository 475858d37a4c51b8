package natsq

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestNakAfterStop: a retry with a delay, nak'ed by a process that closes
// its connection and its embedded server right after, is kept: the server
// started again redelivers it about when due, not after the ack wait
// (NakWithDelay, sent without waiting, was lost so in 19 runs of 20).
func TestNakAfterStop(t *testing.T) {
	const ackWait = 30 * time.Second
	dir := t.TempDir()
	s, err := StartEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	q, err := Connect(t.Context(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(t.Context(), "parse", "t1.a", []byte("job"), ""); err != nil {
		t.Fatal(err)
	}
	cfg := jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait}
	c, err := q.js.CreateOrUpdateConsumer(t.Context(), streamName("parse"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	q.nakAfter(msg, 200*time.Millisecond)
	q.Close()
	s.Shutdown()

	s, err = StartEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	q, err = Connect(t.Context(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	c, err = q.js.Consumer(t.Context(), streamName("parse"), "c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(jetstream.FetchMaxWait(ackWait + 10*time.Second)); err != nil {
		t.Fatalf("retry not redelivered within %v of the restart: %v", ackWait+10*time.Second, err)
	}
	// The server stores a delivery time to the second: a restart may
	// bring a retry back up to a second early.
	t.Logf("redelivered %v after the nak", time.Since(start).Round(time.Millisecond))
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("retry redelivered %v after the nak, want about its delay, well under the ack wait %v", d, ackWait)
	}
}
