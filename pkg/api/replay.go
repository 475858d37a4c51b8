package api

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// Deliveries remembers webhook deliveries for a window, so that a replayed
// delivery is refused. Keys are opaque strings made by the server (a hash
// of the tenant, host and delivery id or body). Implementations: the
// in-memory log below, and a NATS KV bucket (natsq) where NATS runs.
type Deliveries interface {
	// Remember records key and reports whether it is new: false means it
	// was recorded within the window (a replay or a redelivery).
	Remember(ctx context.Context, key string) (fresh bool, err error)
	// Forget drops key, for a delivery that was not acted on (the host's
	// retry must then be taken).
	Forget(ctx context.Context, key string) error
}

// DefaultDeliveryWindow is how long a delivery is remembered. GitHub
// retries and manual redeliveries keep the delivery id; beyond the window
// a replay still cannot move HEAD back (pushes only move HEAD forward).
const DefaultDeliveryWindow = 24 * time.Hour

// DefaultMaxDeliveries bounds the in-memory log (about 100 bytes each).
const DefaultMaxDeliveries = 100_000

// MemDeliveries is an in-memory Deliveries: at most max keys, each for the
// window. It is lost on restart; `codectx up` uses NATS KV instead.
type MemDeliveries struct {
	window time.Duration
	max    int
	now    func() time.Time

	mu   sync.Mutex
	ll   *list.List // of memDelivery, oldest first (one window: oldest expires first)
	keys map[string]*list.Element
}

type memDelivery struct {
	key     string
	expires time.Time
}

// NewMemDeliveries returns an empty log; max <= 0 means DefaultMaxDeliveries.
func NewMemDeliveries(window time.Duration, max int) *MemDeliveries {
	if max <= 0 {
		max = DefaultMaxDeliveries
	}
	return &MemDeliveries{window: window, max: max, now: time.Now, ll: list.New(), keys: map[string]*list.Element{}}
}

// Remember implements Deliveries.
func (m *MemDeliveries) Remember(_ context.Context, key string) (bool, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for el := m.ll.Front(); el != nil && (m.ll.Len() >= m.max || !now.Before(el.Value.(memDelivery).expires)); el = m.ll.Front() {
		delete(m.keys, el.Value.(memDelivery).key)
		m.ll.Remove(el)
	}
	if _, ok := m.keys[key]; ok {
		return false, nil
	}
	m.keys[key] = m.ll.PushBack(memDelivery{key: key, expires: now.Add(m.window)})
	return true, nil
}

// Forget implements Deliveries.
func (m *MemDeliveries) Forget(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.keys[key]; ok {
		m.ll.Remove(el)
		delete(m.keys, key)
	}
	return nil
}
