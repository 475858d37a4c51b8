package natskv_test

import (
	"context"
	"testing"
	"time"

	"codectx/pkg/queue/natsq"
	"codectx/pkg/session/natskv"
	"codectx/pkg/session/sessiontest"
)

func TestConformance(t *testing.T) {
	srv, err := natsq.StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := natsq.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	st, err := natskv.Open(ctx, q.JetStream(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sessiontest.Run(t, st)
}
