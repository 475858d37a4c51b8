package api

import (
	"context"
	"sync"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/session"
)

// overlapping is a session store whose Load waits until n loads have
// begun (or a second has passed), so that n queries of one session read
// it before any of them writes it.
type overlapping struct {
	*session.Mem
	mu      sync.Mutex
	waiting int
	n       int
	all     chan struct{}
}

func (o *overlapping) Load(ctx context.Context, key string) (*session.Session, error) {
	o.mu.Lock()
	if o.waiting++; o.waiting == o.n {
		close(o.all)
	}
	o.mu.Unlock()
	select {
	case <-o.all:
	case <-time.After(time.Second):
	}
	return o.Mem.Load(ctx, key)
}

// TestSessionQueriesAtOnce: two queries of one session that run at once
// (an agent's parallel tool calls) both leave their chunks in the
// session. Each wrote back the session it had read with its own chunks
// added, so the second write dropped the first's: later queries sent
// those chunks again, and "the function we looked at before" could not
// find them.
func TestSessionQueriesAtOnce(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "")
	mem := &session.Mem{}
	s := &Server{Store: store, Sessions: &overlapping{Mem: mem, n: 2, all: make(chan struct{})}}
	s.init()
	ctx := context.Background()
	var wg sync.WaitGroup
	sent := make([]int, 2)
	for i, q := range []string{"ParseToken", "Reverse"} {
		wg.Go(func() {
			resp, err := s.search(ctx, Search{Tenant: "default", Repos: []string{"demo"}, Query: q, Budget: 4000, Session: "s1"})
			if err != nil {
				t.Error(err)
				return
			}
			sent[i] = len(resp.Chunks)
		})
	}
	wg.Wait()
	key, _ := session.Key("default", "s1")
	got, err := mem.Load(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if sent[0] == 0 || sent[1] == 0 || len(got.Sent) != sent[0]+sent[1] {
		t.Fatalf("the queries sent %d and %d chunks; the session holds %d", sent[0], sent[1], len(got.Sent))
	}
}
