package api

import (
	"context"
	"sync"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/pack"
	"codectx/pkg/query"
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

// TestSessionQueriesAtOnceSendOnce: two queries of one session at once
// send each chunk in full once between them: the second reads the
// session after the first wrote it and names the first's chunks as
// already sent. Both had read the empty session, and the agent got the
// same chunks twice. (The store lets both loads begin at once when the
// server lets them: without the session's lock each query sent both files' chunks.)
func TestSessionQueriesAtOnceSendOnce(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "")
	s := &Server{Store: store, Sessions: &overlapping{Mem: &session.Mem{}, n: 2, all: make(chan struct{})}}
	s.init()
	ctx := context.Background()
	var wg sync.WaitGroup
	resps := make([]*query.Response, 2)
	for i := range resps {
		wg.Go(func() {
			resp, err := s.search(ctx, Search{Tenant: "default", Repos: []string{"demo"}, Query: "ParseToken Reverse", Budget: 4000, Session: "s1"})
			if err != nil {
				t.Error(err)
				return
			}
			resps[i] = resp
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	full := map[string]int{}
	for _, r := range resps {
		for _, c := range r.Chunks {
			if c.Granularity == string(pack.Full) {
				full[c.Provenance]++
			}
		}
	}
	if len(full) == 0 {
		t.Fatal("no chunk sent in full")
	}
	for p, n := range full {
		if n > 1 {
			t.Errorf("%s sent in full %d times by two queries of one session", p, n)
		}
	}
	if len(resps[0].AlreadySent)+len(resps[1].AlreadySent) == 0 {
		t.Error("neither query named a chunk as already sent")
	}
}

// TestSessionLockWaitEnds: a query waiting for its session's turn gives
// up when its request ends, and the lock's entry goes with the last
// user.
func TestSessionLockWaitEnds(t *testing.T) {
	var l sessionLocks
	unlock, err := l.lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.lock(ctx, "k"); err == nil {
		t.Fatal("a second lock of a held session returned before its context ended")
	}
	other, err := l.lock(context.Background(), "other")
	if err != nil {
		t.Fatal(err)
	}
	other()
	unlock()
	if n := len(l.m); n != 0 {
		t.Errorf("%d entries left after every lock was released", n)
	}
}
