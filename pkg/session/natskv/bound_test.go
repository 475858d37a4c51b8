package natskv_test

import (
	"context"
	"testing"
	"time"

	"codectx/pkg/queue/natsq"
	"codectx/pkg/session/natskv"
)

// The session bucket is bounded: any tenant's key may create sessions
// (an id is the caller's choice, each kept up to 1 MiB for the TTL), so
// without a bound one tenant could fill the disk the embedded NATS shares
// with the delivery log and the work queues of every tenant.
func TestBucketBounded(t *testing.T) {
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
	if _, err := natskv.Open(ctx, q.JetStream(), time.Hour); err != nil {
		t.Fatal(err)
	}
	kv, err := q.JetStream().KeyValue(ctx, natskv.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := q.JetStream().Stream(ctx, "KV_"+st.Bucket())
	if err != nil {
		t.Fatal(err)
	}
	if max := info.CachedInfo().Config.MaxBytes; max <= 0 {
		t.Errorf("session bucket MaxBytes = %d: unbounded, one tenant's sessions can fill the shared disk", max)
	}
}
