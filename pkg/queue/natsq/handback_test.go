package natsq_test

import (
	"context"
	"testing"
	"time"

	"codectx/pkg/queue"
	"codectx/pkg/queue/natsq"
)

// TestHandBackSurvivesRestart: a message whose handler returned because
// its consumer stopped is handed back; the process then closes its
// connection and the server, and the server started again on the same
// directory redelivers the message at once, not after the ack wait.
func TestHandBackSurvivesRestart(t *testing.T) {
	const ackWait = 30 * time.Second
	dir := t.TempDir()
	s, err := natsq.StartEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	q, err := natsq.Connect(t.Context(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg := queue.Config{Stage: "parse", AckWait: ackWait}
	publish(t, q, "parse", "t1.a", "job", "job-1")
	held := make(chan struct{})
	stop := consume(t, q, cfg, func(ctx context.Context, _ queue.Message) error {
		close(held)
		<-ctx.Done()
		return ctx.Err()
	})
	select {
	case <-held:
	case <-time.After(patience):
		t.Fatal("the message was never delivered")
	}
	// As `up` stops: the workers first, then the connection, then the
	// server.
	stop()
	q.Close()
	s.Shutdown()

	s, err = natsq.StartEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	q = connect(t, s)
	start := time.Now()
	got := make(chan int, 1)
	consume(t, q, cfg, func(_ context.Context, m queue.Message) error {
		select {
		case got <- m.Deliveries:
		default:
		}
		return nil
	})
	select {
	case n := <-got:
		t.Logf("redelivered %v after the restart (delivery %d)", time.Since(start).Round(time.Millisecond), n)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("handed-back message redelivered %v after the restart, want well under the ack wait %v", d, ackWait)
		}
	case <-time.After(ackWait + 10*time.Second):
		t.Fatalf("handed-back message not redelivered within %v of the restart", ackWait+10*time.Second)
	}
}
