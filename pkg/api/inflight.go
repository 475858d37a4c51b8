package api

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// inflight bounds how many requests of one tenant are worked on at once.
// The rate limit counts requests, not their cost: a tenant's few costly
// queries at a time (many repositories, a large budget) took every core,
// and another tenant's query waited 100 ms for its turn. Past the bound a
// request waits up to tenantWait for one of the tenant's own slots, then
// gets 429; other tenants' requests do not wait behind it.
type inflight struct {
	max int
	mu  sync.Mutex
	m   map[string]*tenantSlots // tenants with requests held or waiting; removed when none is
}

type tenantSlots struct {
	ch    chan struct{}
	users int
}

// tenantWait is how long a request waits for one of its tenant's slots.
const tenantWait = time.Second

func newInflight(max int) *inflight {
	return &inflight{max: max, m: map[string]*tenantSlots{}}
}

// acquire takes one of tenant's slots, waiting up to wait; release gives
// it back. ok is false when none came in time or ctx ended first.
func (f *inflight) acquire(ctx context.Context, tenant string, wait time.Duration) (release func(), ok bool) {
	f.mu.Lock()
	ts := f.m[tenant]
	if ts == nil {
		ts = &tenantSlots{ch: make(chan struct{}, f.max)}
		f.m[tenant] = ts
	}
	ts.users++
	f.mu.Unlock()
	leave := func() {
		f.mu.Lock()
		if ts.users--; ts.users == 0 {
			delete(f.m, tenant)
		}
		f.mu.Unlock()
	}
	release = func() { <-ts.ch; leave() }
	select {
	case ts.ch <- struct{}{}:
		return release, true
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case ts.ch <- struct{}{}:
		return release, true
	case <-t.C:
	case <-ctx.Done():
	}
	leave()
	return nil, false
}

// heldKey carries a request's slot from allow to the end of its handler.
type heldKey struct{}

type held struct{ release func() }

// holdSlots lets allow take a tenant slot for the request, given back
// when h returns.
func holdSlots(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var hd held
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), heldKey{}, &hd)))
		if hd.release != nil {
			hd.release()
		}
	})
}
