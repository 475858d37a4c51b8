package natsq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"codectx/pkg/queue"
)

// A stream the server lost after this client made it (NATS restarted
// without its JetStream state, or the stream deleted) is made again by the
// next publish: the stage does not fail every publish until the
// publisher's process restarts. A consumer takes the job.
func TestPublishAfterStreamLost(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	publish(t, q, "graph", "t.r.c", "first", "id-1")
	_, js := rawJS(t, s)
	if err := js.DeleteStream(t.Context(), "CODECTX_GRAPH"); err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(t.Context(), "graph", "t.r.c", []byte("second"), "id-2"); err != nil {
		t.Fatalf("publish after the stream was lost: %v", err)
	}
	var r recorder
	consume(t, connect(t, s), queue.Config{Stage: "graph", AckWait: 5 * time.Second}, r.handle)
	waitFor(t, "the job published after the loss", func() bool { return r.count() == 1 })
	if got := string(r.get()[0].Data); got != "second" {
		t.Errorf("consumed %q, want the job published after the loss", got)
	}
}

// So is a lost dead-letter stream: a job refused for good is dead-lettered,
// not redelivered until the server gives it up unrecorded.
func TestDeadLetterAfterStreamLost(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	_, js := rawJS(t, s)
	if err := js.DeleteStream(t.Context(), "CODECTX_DLQ"); err != nil {
		t.Fatal(err)
	}
	publish(t, q, "parse", "t.r.c", "bad", "id-1")
	consume(t, q, queue.Config{Stage: "parse", AckWait: 5 * time.Second}, func(context.Context, queue.Message) error {
		return queue.Permanent(errors.New("bad input"))
	})
	waitFor(t, "the dead letter", func() bool {
		dls, err := q.DeadLetters(t.Context(), "parse")
		return err == nil && len(dls) == 1 && dls[0].Cause == queue.CausePermanent
	})
}

// Reading the dead letters of a lost dead-letter stream finds none, rather
// than failing every wait of a stage (WaitParse, Graph) until the process
// restarts; the stream is made again for the next one.
func TestDeadLettersOfALostStream(t *testing.T) {
	s := startServer(t)
	q := connect(t, s)
	if _, err := q.DeadLetters(t.Context(), "parse"); err != nil {
		t.Fatal(err)
	}
	_, js := rawJS(t, s)
	if err := js.DeleteStream(t.Context(), "CODECTX_DLQ"); err != nil {
		t.Fatal(err)
	}
	if dls, err := q.DeadLettersOf(t.Context(), "parse", "t.r.c"); err != nil || len(dls) != 0 {
		t.Fatalf("dead letters of a lost stream = %v, %v; want none, no error", dls, err)
	}
	if _, err := js.Stream(t.Context(), "CODECTX_DLQ"); err != nil {
		t.Errorf("the lost dead-letter stream was not made again: %v", err)
	}
}
