package api

import (
	"context"
	"slices"
	"strings"
	"testing"

	"codectx/pkg/blob"
)

// swapHook is a driver that runs put once, before the first write of a
// registration (pending or settled), and hook once, before the first Swap
// of a generation object.
type swapHook struct {
	blob.Driver
	put, hook func()
}

func (d *swapHook) Put(ctx context.Context, key string, data []byte) error {
	if h := d.put; h != nil && strings.HasPrefix(key, registryRoot) && !strings.HasSuffix(key, "/"+generationName) {
		d.put = nil
		h()
	}
	return d.Driver.Put(ctx, key, data)
}

func (d *swapHook) Swap(ctx context.Context, key string, old, new []byte) error {
	if h := d.hook; h != nil && strings.HasSuffix(key, "/"+generationName) {
		d.hook = nil
		h()
	}
	return d.Driver.Swap(ctx, key, old, new)
}

// Three servers share a store; beta holds vault under a bound of 2.
// Server A counts beta's repositories (1) for a new x; server C, having
// counted as many, registers y and moves the generation on; A writes x's
// registration and, before its swap, server B is asked for a push of x
// (it finds A's registration: held, so it signals). A's swap loses: it removes
// x's registration and, counting again, refuses x (409). The push B let
// through starts x's workflow with no registration: x is indexed outside
// the count, and once it publishes beta holds 3 repositories under a
// bound of 2.
//
// This was so while a registration was trusted as held before its swap
// had made it count. It is now pending until then: B registers x itself,
// and whichever swap wins settles it.
func TestAuditLostSwapLetsAnotherServerPush(t *testing.T) {
	mem := blob.NewMem()
	ctx := context.Background()
	if err := mem.Put(ctx, registryKey("beta", "vault"), []byte{}); err != nil {
		t.Fatal(err)
	}
	newServer := func(b *blob.Bucket) *Server {
		s := &Server{Store: b, KeyStore: testCapKeys, Limits: Limits{TenantRepos: 2}}
		s.init()
		return s
	}
	drv := &swapHook{Driver: mem} // a Bucket is a Driver
	a, b, c := newServer(blob.NewBucket(drv)), newServer(mem), newServer(mem)
	var bCode, cCode int
	var bErr, cErr error
	drv.put = func() { cCode, cErr = c.holdRepo(ctx, "beta", "y", false) }  // C: a new y
	drv.hook = func() { bCode, bErr = b.holdRepo(ctx, "beta", "x", false) } // B: a push of x
	aCode, aErr := a.holdRepo(ctx, "beta", "x", false)
	t.Logf("A (x): %d %v; B (x): %d %v; C (y): %d %v", aCode, aErr, bCode, bErr, cCode, cErr)
	regX, _ := mem.Exists(ctx, registryKey("beta", "x"))
	if bErr == nil && !regX {
		t.Errorf("server B let a push of x through (its workflow starts), yet x has no registration: x is indexed outside beta's bound (held after it publishes: vault, y, x under a bound of 2)")
	}
	held, err := a.heldRepos(ctx, "beta")
	if err != nil || len(held) > 2 {
		t.Errorf("beta holds %v (%v) under a bound of 2", held, err)
	}
	if keys := pendingLeft(ctx, t, mem, "beta"); len(keys) > 0 {
		t.Errorf("pending registrations left: %v", keys)
	}
}

// pendingLeft lists the pending registrations of tenant in store.
func pendingLeft(ctx context.Context, t *testing.T, store *blob.Bucket, tenant string) []string {
	t.Helper()
	keys, err := store.List(ctx, registryRoot+tenant+"/")
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(keys, func(k string) bool { return !strings.Contains(k, pendingFile) })
}
