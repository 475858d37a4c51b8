package natsq_test

import (
	"context"
	"errors"
	"sync"
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
	s, q := startOn(t, dir)
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
	redeliveredAfterRestart(t, dir, s, q, stop, cfg, "t1.a", "handed-back message")
}

// TestRetrySurvivesRestart: a message whose handler failed with a
// retryable error, without a retry delay, is handed back for a retry; its
// worker moves on to another share's message, and the server restarts
// before anything pulled the failed message again. The server started
// again on the same directory redelivers it at once, not after the ack
// wait.
func TestRetrySurvivesRestart(t *testing.T) {
	const ackWait = 30 * time.Second
	dir := t.TempDir()
	s, q := startOn(t, dir)
	// No Backoff: a failed message is retried at once. One worker: it
	// takes t1's message, then t2's (the shares' turn order), and holds
	// t2's until the restart, so nothing pulls t1's again before it.
	cfg := queue.Config{Stage: "parse", AckWait: ackWait, Workers: 1}
	if d := cfg.RetryDelay(1); d != 0 {
		t.Fatalf("RetryDelay(1) = %v, want 0", d)
	}
	publish(t, q, "parse", "t1.a", "fails", "job-a")
	publish(t, q, "parse", "t2.b", "holds", "job-b")
	failed, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stop := consume(t, q, cfg, func(ctx context.Context, m queue.Message) error {
		if m.Subject == "t1.a" {
			once.Do(func() { close(failed) })
			return errors.New("store unavailable")
		}
		close(held)
		<-ctx.Done()
		return ctx.Err()
	})
	for _, ch := range []chan struct{}{failed, held} {
		select {
		case <-ch:
		case <-time.After(patience):
			t.Fatal("the failing message, then the held one, were never delivered")
		}
	}
	// Right after the failure, as `up` stops: the workers, the connection,
	// then the server.
	redeliveredAfterRestart(t, dir, s, q, stop, cfg, "t1.a", "retried message")
}

// redeliveredAfterRestart stops the workers (stop), closes q and the
// server s, starts the server again on dir and checks that the message of
// subject comes back well before cfg's ack wait.
func redeliveredAfterRestart(t *testing.T, dir string, s *natsq.Server, q *natsq.Queue, stop func(), cfg queue.Config, subject, what string) {
	t.Helper()
	stop()
	q.Close()
	s.Shutdown()

	_, q = startOn(t, dir)
	start := time.Now()
	got := make(chan int, 1)
	consume(t, q, cfg, func(_ context.Context, m queue.Message) error {
		if m.Subject == subject {
			select {
			case got <- m.Deliveries:
			default:
			}
		}
		return nil
	})
	select {
	case n := <-got:
		d := time.Since(start)
		t.Logf("%s redelivered %v after the restart (delivery %d)", what, d.Round(time.Millisecond), n)
		if d > 5*time.Second {
			t.Errorf("%s redelivered %v after the restart, want well under the ack wait %v", what, d, cfg.AckWait)
		}
	case <-time.After(cfg.AckWait + 10*time.Second):
		t.Fatalf("%s not redelivered within %v of the restart", what, cfg.AckWait+10*time.Second)
	}
}

// startOn starts the embedded server on dir and connects to it; both end
// with the test (Shutdown may come earlier: it is idempotent).
func startOn(t *testing.T, dir string) (*natsq.Server, *natsq.Queue) {
	t.Helper()
	s, err := natsq.StartEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s, connect(t, s)
}
