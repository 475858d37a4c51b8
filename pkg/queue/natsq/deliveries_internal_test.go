package natsq

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A delivery log an older gateway made (a key-value bucket refusing
// writes once full) is set to drop its oldest entries when opened, and
// keeps what it holds.
func TestDeliveriesOpenOlderBucket(t *testing.T) {
	s, err := StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	q, err := Connect(t.Context(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	old, err := q.js.CreateOrUpdateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: DeliveriesBucket, History: 1, TTL: time.Hour, MaxBytes: MaxDeliveryBytes})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Create(t.Context(), "seen", []byte{1}); err != nil {
		t.Fatal(err)
	}
	d, err := q.DeliveriesBounded(t.Context(), 2*time.Hour, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	st, err := q.js.Stream(t.Context(), "KV_"+DeliveriesBucket)
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.Discard != jetstream.DiscardOld || c.MaxAge != 2*time.Hour || c.MaxBytes != 1<<20 {
		t.Errorf("opened bucket: discard %v, max age %v, max bytes %d; want DiscardOld, 2h, 1 MiB", c.Discard, c.MaxAge, c.MaxBytes)
	}
	if fresh, err := d.Remember(t.Context(), "seen"); err != nil || fresh {
		t.Errorf("Remember of a key the older gateway recorded = %v, %v; want false", fresh, err)
	}
}
