package api

import (
	"context"
	"sync"
)

// sessionLocks takes a session's queries in this process one at a time:
// each reads the session after the one before it wrote it, so an agent's
// calls at once do not both send a chunk in full (both had read the
// session before either wrote it). Queries of one session on two query
// replicas may still overlap; Append keeps both their chunks. Keys are
// per tenant (session.Key), so no tenant waits on another's session.
type sessionLocks struct {
	mu sync.Mutex
	m  map[string]*sessionLock // sessions with a query held or waiting; removed when none is
}

type sessionLock struct {
	ch    chan struct{}
	users int
}

// lock waits for key's turn, or for ctx to end. unlock gives it to the
// next query.
func (l *sessionLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*sessionLock{}
	}
	k := l.m[key]
	if k == nil {
		k = &sessionLock{ch: make(chan struct{}, 1)}
		l.m[key] = k
	}
	k.users++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if k.users--; k.users == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
	select {
	case k.ch <- struct{}{}:
		return func() { <-k.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
