package natsq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DeliveriesBucket is the KV bucket of the webhook delivery log.
const DeliveriesBucket = "codectx-deliveries"

// MaxDeliveryBytes bounds the bucket (about 300 bytes an entry: some
// 200,000 deliveries within the window).
const MaxDeliveryBytes = 64 << 20

// Deliveries is a webhook delivery log in a JetStream KV bucket: entries
// expire after the window, survive a restart of the process, and are
// shared by every gateway on the NATS cluster. It implements
// api.Deliveries.
type Deliveries struct{ kv jetstream.KeyValue }

// Deliveries opens (creating it if needed) the delivery log with the given
// window, bounded at MaxDeliveryBytes.
func (q *Queue) Deliveries(ctx context.Context, window time.Duration) (*Deliveries, error) {
	return q.DeliveriesBounded(ctx, window, MaxDeliveryBytes)
}

// DeliveriesBounded is Deliveries with the bucket bounded at maxBytes. A
// full bucket drops its oldest entries, not the new one: the log is
// shared by every tenant, and a key-value bucket refuses writes once full
// (DiscardNew), so one tenant's stream of signed pushes (its own secret,
// within its rate) filled it and every tenant's deliveries were answered
// 503 until entries expired, up to the whole window. Dropping the oldest
// keeps the newest deliveries refused as replays, as the in-memory log
// does (MemDeliveries); a replay of a forgotten one cannot move HEAD back.
func (q *Queue) DeliveriesBounded(ctx context.Context, window time.Duration, maxBytes int64) (*Deliveries, error) {
	// Opened as it is, then set in one update: creating or updating it as
	// a key-value bucket would set it back to refusing writes when full,
	// for a moment, under every gateway sharing it.
	kv, err := q.js.KeyValue(ctx, DeliveriesBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = q.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      DeliveriesBucket,
			Description: "webhook deliveries already taken (replay protection)",
			History:     1,
			TTL:         window,
			MaxBytes:    maxBytes,
			Storage:     jetstream.FileStorage,
		})
		if errors.Is(err, jetstream.ErrBucketExists) { // another gateway made it first
			kv, err = q.js.KeyValue(ctx, DeliveriesBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("delivery log: %w", err)
	}
	st, err := q.js.Stream(ctx, "KV_"+DeliveriesBucket)
	if err != nil {
		return nil, fmt.Errorf("delivery log: %w", err)
	}
	if cfg := st.CachedInfo().Config; cfg.Discard != jetstream.DiscardOld || cfg.MaxAge != window || cfg.MaxBytes != maxBytes {
		cfg.Discard, cfg.MaxAge, cfg.MaxBytes = jetstream.DiscardOld, window, maxBytes
		if _, err := q.js.UpdateStream(ctx, cfg); err != nil {
			return nil, fmt.Errorf("delivery log: drop the oldest deliveries when full: %w", err)
		}
	}
	return &Deliveries{kv: kv}, nil
}

// Remember records key; false when it is already recorded (Create fails on
// an existing key, atomically across gateways).
func (d *Deliveries) Remember(ctx context.Context, key string) (bool, error) {
	_, err := d.kv.Create(ctx, key, []byte{1})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyExists):
		return false, nil
	default:
		return false, fmt.Errorf("delivery log: %w", err)
	}
}

// Forget drops key.
func (d *Deliveries) Forget(ctx context.Context, key string) error {
	if err := d.kv.Purge(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("delivery log: %w", err)
	}
	return nil
}
