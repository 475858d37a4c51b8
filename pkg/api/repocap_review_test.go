package api

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/index"
)

// reviewHook is a driver with hooks around single operations: afterSwap
// runs once after the first successful Swap of a generation object;
// beforePut runs once before the first Put of a key for which putKey
// answers true; failGet makes Get (and so Exists) of a key fail while it
// answers true; failPut makes a Put fail while it answers true.
type reviewHook struct {
	blob.Driver
	mu        sync.Mutex
	afterSwap func()
	putKey    func(string) bool
	beforePut func()
	failGet   func(string) bool
	failPut   func(string) bool
}

var errReviewStore = errors.New("store unavailable")

func (d *reviewHook) Swap(ctx context.Context, key string, old, new []byte) error {
	err := d.Driver.Swap(ctx, key, old, new)
	d.mu.Lock()
	h := d.afterSwap
	if err == nil && h != nil && strings.HasSuffix(key, "/"+generationName) {
		d.afterSwap = nil
	} else {
		h = nil
	}
	d.mu.Unlock()
	if h != nil {
		h()
	}
	return err
}

func (d *reviewHook) Put(ctx context.Context, key string, data []byte) error {
	d.mu.Lock()
	h := d.beforePut
	if h != nil && d.putKey != nil && d.putKey(key) {
		d.beforePut = nil
	} else {
		h = nil
	}
	fail := d.failPut != nil && d.failPut(key)
	d.mu.Unlock()
	if h != nil {
		h()
	}
	if fail {
		return errReviewStore
	}
	return d.Driver.Put(ctx, key, data)
}

func (d *reviewHook) Get(ctx context.Context, key string) ([]byte, error) {
	d.mu.Lock()
	fail := d.failGet != nil && d.failGet(key)
	d.mu.Unlock()
	if fail {
		return nil, errReviewStore
	}
	return d.Driver.Get(ctx, key)
}

func reviewServer(b *blob.Bucket, limit int) *Server {
	s := &Server{Store: b, KeyStore: testCapKeys, Limits: Limits{TenantRepos: limit}}
	s.init()
	return s
}

// Three servers share a store; beta holds vault under a bound of 2.
// Server A registers x: its swap wins, and before A settles x's
// registration the whole DELETE of x runs on server B (it removes A's
// pending registration, and moves the generation on). Server C then
// counts beta's repositories (vault alone) and registers y. A then
// settles x. beta holds vault, x and y under a bound of 2.
func TestReviewDeleteBetweenSwapAndSettle(t *testing.T) {
	mem := blob.NewMem()
	ctx := context.Background()
	if err := mem.Put(ctx, registryKey("beta", "vault"), []byte{}); err != nil {
		t.Fatal(err)
	}
	drv := &reviewHook{Driver: mem}
	a := reviewServer(blob.NewBucket(drv), 2)
	b, _ := newServer(t, &Server{Store: mem, Indexer: &capIndexer{}, Routes: AllRoutes, KeyStore: testCapKeys, Limits: Limits{TenantRepos: 2}})
	c := reviewServer(mem, 2)
	var delCode, cCode int
	var cErr error
	drv.afterSwap = func() {
		delCode, _ = capCall(t, "DELETE", b.URL+"/v1/repos/beta/x", "operator", "")
		cCode, cErr = c.holdRepo(ctx, "beta", "y", false)
	}
	aCode, aErr := a.holdRepo(ctx, "beta", "x", false)
	t.Logf("A (x): %d %v; DELETE x on B: %d; C (y): %d %v", aCode, aErr, delCode, cCode, cErr)
	held, err := c.heldRepos(ctx, "beta")
	if err != nil || len(held) > 2 {
		t.Errorf("beta holds %v (%v) under a bound of 2", held, err)
	}
	if keys := pendingLeft(ctx, t, mem, "beta"); len(keys) > 0 {
		t.Errorf("pending registrations left: %v", keys)
	}
}

// beta holds vault (registered) and legacy (a HEAD from before the bound)
// under a bound of 2. A push of legacy on server A finds its HEAD; before
// A writes legacy's registration, the DELETE of legacy runs on server B
// and server C registers y (counting vault alone). A then wrote legacy's
// registration, with no swap: beta held vault, legacy and y. Now A finds
// the HEAD gone once its pending registration is written, and counts
// legacy as a new repository (409).
func TestReviewDeleteBetweenHeadCheckAndLegacyRegistration(t *testing.T) {
	mem := blob.NewMem()
	ctx := context.Background()
	for _, k := range []string{registryKey("beta", "vault"), index.HeadKey("beta", "legacy")} {
		if err := mem.Put(ctx, k, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	drv := &reviewHook{Driver: mem, putKey: func(k string) bool { return strings.HasPrefix(k, index.RepoPrefix(registryRoot, "beta", "legacy")) }}
	a := reviewServer(blob.NewBucket(drv), 2)
	b, _ := newServer(t, &Server{Store: mem, Indexer: &capIndexer{}, Routes: AllRoutes, KeyStore: testCapKeys, Limits: Limits{TenantRepos: 2}})
	c := reviewServer(mem, 2)
	var delCode, cCode int
	var cErr error
	drv.beforePut = func() {
		delCode, _ = capCall(t, "DELETE", b.URL+"/v1/repos/beta/legacy", "operator", "")
		cCode, cErr = c.holdRepo(ctx, "beta", "y", false)
	}
	aCode, aErr := a.holdRepo(ctx, "beta", "legacy", false)
	t.Logf("A (legacy): %d %v; DELETE legacy on B: %d; C (y): %d %v", aCode, aErr, delCode, cCode, cErr)
	if delCode != 200 {
		t.Fatalf("setup: DELETE of legacy on B: %d", delCode)
	}
	held, err := c.heldRepos(ctx, "beta")
	if err != nil || len(held) > 2 {
		t.Errorf("beta holds %v (%v) under a bound of 2", held, err)
	}
}

// A push of a repository the tenant holds, whose confirmation after the
// signal meets one failed read of the store, ends the repository's
// workflow (its running snapshot and queued pushes with it) though
// nothing deleted the repository.
func TestReviewConfirmErrorEndsLiveWorkflow(t *testing.T) {
	mem := blob.NewMem()
	ctx := context.Background()
	if err := mem.Put(ctx, registryKey("beta", "vault"), []byte{}); err != nil {
		t.Fatal(err)
	}
	drv := &reviewHook{Driver: mem}
	ix := &capIndexer{}
	ix.before = func(IndexRequest) {
		// After holdRepo's check: the next read of the registration
		// (the confirmation) fails once.
		n := 0
		drv.mu.Lock()
		drv.failGet = func(k string) bool {
			if k == registryKey("beta", "vault") && n == 0 {
				n++
				return true
			}
			return false
		}
		drv.mu.Unlock()
	}
	ts, _ := newServer(t, &Server{Store: blob.NewBucket(drv), Indexer: ix, Routes: AllRoutes, KeyStore: testCapKeys, Limits: Limits{TenantRepos: 2}})
	code, msg := capCall(t, "POST", ts.URL+"/v1/index", "beta", indexBody("beta", "vault"))
	ix.mu.Lock()
	closed := slices.Clone(ix.closed)
	ix.mu.Unlock()
	if len(closed) > 0 {
		t.Errorf("a push of held vault meeting one store error ended its workflow: closed %v (push: %d %q)", closed, code, msg)
	}
	if code != 202 {
		t.Errorf("push of held vault with one transient store error: %d %q, want 202", code, msg)
	}
}

// A registration whose swap won but whose settled registration could not
// be written leaves its pending registration behind: counted for good,
// though the push was refused (503) and no server ever settles or removes
// it but a DELETE of a repository the tenant cannot see in its listing.
func TestReviewFailedSettleLeavesPending(t *testing.T) {
	mem := blob.NewMem()
	ctx := context.Background()
	drv := &reviewHook{Driver: mem}
	fail := true
	drv.failPut = func(k string) bool { return fail && k == registryKey("beta", "x") }
	a := reviewServer(blob.NewBucket(drv), 2)
	code, err := a.holdRepo(ctx, "beta", "x", false)
	if code != 503 || err == nil {
		t.Fatalf("register with the settled write failing: %d %v, want 503", code, err)
	}
	if keys := pendingLeft(ctx, t, mem, "beta"); len(keys) > 0 {
		t.Errorf("pending registration left after a refused registration: %v", keys)
	}
}

// A DELETE leaves a pending registration young enough to be settled by
// the request that wrote it, and removes an older one (a request that
// ended without removing it) and one of the form without a time.
func TestReviewDeleteKeepsYoungPending(t *testing.T) {
	mem := blob.NewMem()
	ctx := context.Background()
	young := pendingKey("beta", "x")
	old := index.RepoPrefix(registryRoot, "beta", "x") + pendingFile + "1000000000.OLD"
	untimed := index.RepoPrefix(registryRoot, "beta", "x") + pendingFile + "UNTIMED"
	for _, k := range []string{young, old, untimed, registryKey("beta", "x")} {
		if err := mem.Put(ctx, k, []byte{}); err != nil {
			t.Fatal(err)
		}
	}
	ts, _ := newServer(t, &Server{Store: mem, Indexer: &capIndexer{}, Routes: AllRoutes, KeyStore: testCapKeys, Limits: Limits{TenantRepos: 2}})
	if code, msg := capCall(t, "DELETE", ts.URL+"/v1/repos/beta/x", "operator", ""); code != 200 {
		t.Fatalf("DELETE: %d %s", code, msg)
	}
	keys, _ := mem.List(ctx, registryRoot+"beta/x/")
	if !slices.Equal(keys, []string{young}) {
		t.Errorf("registrations after the DELETE: %v, want only the young pending one", keys)
	}
}
