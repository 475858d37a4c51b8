package main

import (
	"context"
	"log/slog"
	"testing"

	"codectx/pkg/api"
	"codectx/pkg/queue/natsq"
)

// A gateway's delivery log is in memory until NATS connects, then in NATS
// KV (shared by replicas); a delivery taken before stays refused.
func TestLazyDeliveries(t *testing.T) {
	ctx := context.Background()
	d := &deps{log: slog.Default()}
	l := &lazyDeliveries{d: d, mem: api.NewMemDeliveries(api.DefaultDeliveryWindow, 0)}
	remember := func(l *lazyDeliveries, k string) bool {
		t.Helper()
		fresh, err := l.Remember(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return fresh
	}
	if !remember(l, "early") || remember(l, "early") {
		t.Fatal("before NATS: a key is new once")
	}
	ns, err := natsq.StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	q, err := natsq.Connect(ctx, ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	d.queue.Store(q)
	if remember(l, "early") {
		t.Error("a delivery taken before NATS connected was taken again")
	}
	if !remember(l, "late") {
		t.Fatal("a new delivery refused")
	}
	// Another replica (its own memory) shares the NATS log.
	other := &lazyDeliveries{d: d, mem: api.NewMemDeliveries(api.DefaultDeliveryWindow, 0)}
	if remember(other, "late") {
		t.Error("another replica took a delivery this one took")
	}
	if err := l.Forget(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	if !remember(other, "late") {
		t.Error("a forgotten delivery is still refused")
	}
}
