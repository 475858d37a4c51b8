package api

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"codectx/pkg/blob"
)

// blockingIndexer holds every Index call until release is closed.
type blockingIndexer struct {
	fakeIndexer
	entered chan string
	release chan struct{}
}

func (b *blockingIndexer) Index(ctx context.Context, req IndexRequest) (string, error) {
	b.entered <- req.Tenant
	select {
	case <-b.release:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return b.fakeIndexer.Index(ctx, req)
}

// A tenant's requests past Limits.TenantConcurrency wait for the
// tenant's own turn, then get 429 with Retry-After; another tenant's
// request does not wait behind them, and the slots come back when the
// handlers return.
func TestTenantConcurrency(t *testing.T) {
	ix := &blockingIndexer{entered: make(chan string, 8), release: make(chan struct{})}
	keys := Keys{HashKey("acme-key"): "acme", HashKey("beta-key"): "beta"}
	srv := &Server{Store: blob.NewMem(), Indexer: ix, Routes: AllRoutes, Keys: keys, Limits: Limits{TenantConcurrency: 1}}
	ts, _ := newServer(t, srv)
	ctx := context.Background()
	index := func(key, tenant string) error {
		_, err := (&Client{BaseURL: ts.URL, Key: key}).Index(ctx, IndexRequest{Tenant: tenant, Repo: "r", Location: "https://git.example/" + tenant + "/r.git"})
		return err
	}
	first := make(chan error, 1)
	go func() { first <- index("acme-key", "acme") }()
	if got := <-ix.entered; got != "acme" {
		t.Fatalf("entered %q", got)
	}
	// acme's second request: its one slot is held.
	start := time.Now()
	err := index("acme-key", "acme")
	var e *Error
	if !errors.As(err, &e) || e.Code != http.StatusTooManyRequests {
		t.Errorf("acme's second request while its first is worked on: %v, want 429", err)
	}
	if waited := time.Since(start); waited < tenantWait/2 {
		t.Errorf("refused after %v, want a wait of about %v for the tenant's turn", waited, tenantWait)
	}
	// beta is not behind acme.
	second := make(chan error, 1)
	go func() { second <- index("beta-key", "beta") }()
	select {
	case got := <-ix.entered:
		if got != "beta" {
			t.Fatalf("entered %q", got)
		}
	case <-time.After(tenantWait / 2):
		t.Fatal("beta's request waited behind acme's")
	}
	close(ix.release)
	if err := <-first; err != nil {
		t.Errorf("acme's first request: %v", err)
	}
	if err := <-second; err != nil {
		t.Errorf("beta's request: %v", err)
	}
	// The slots are back: acme goes straight in, and no tenant is left
	// in the map.
	if err := index("acme-key", "acme"); err != nil {
		t.Errorf("acme after its first returned: %v", err)
	}
	<-ix.entered
	srv.busy.mu.Lock()
	defer srv.busy.mu.Unlock()
	if n := len(srv.busy.m); n != 0 {
		t.Errorf("%d tenants left in the slot map with nothing in flight", n)
	}
}
