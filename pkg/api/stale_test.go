package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/blob"
)

// downStore is a blob driver over a real store that can be taken down:
// every call then fails like an S3 endpoint that refuses connections.
type downStore struct {
	*blob.Bucket
	down atomic.Bool
}

var errRefused = errors.New("dial tcp 127.0.0.1:9000: connect: connection refused")

func (d *downStore) Get(ctx context.Context, key string) ([]byte, error) {
	if d.down.Load() {
		return nil, errRefused
	}
	return d.Bucket.Get(ctx, key)
}

func (d *downStore) Exists(ctx context.Context, key string) (bool, error) {
	if d.down.Load() {
		return false, errRefused
	}
	return d.Bucket.Exists(ctx, key)
}

// A store outage does not stop queries: the last HEAD the server read
// answers, marked stale, counted in a metric; a repository the server
// never read says "store unavailable", not "not indexed" (issue 14 item 1).
func TestQueryServesLastHeadWhenStoreIsDown(t *testing.T) {
	mem := blob.NewMem()
	sum := fixture(t, mem, "")
	ds := &downStore{Bucket: mem}
	ts, c := newServer(t, &Server{Store: blob.NewBucket(ds), Routes: AllRoutes})
	ctx := context.Background()
	q := QueryRequest{Repo: "demo", Query: "where is ParseToken defined", Budget: 2000}
	resp, err := c.Query(ctx, q)
	if err != nil || resp.Stale {
		t.Fatalf("query with the store up: %v, stale %v", err, resp != nil && resp.Stale)
	}

	ds.down.Store(true)
	start := time.Now()
	resp, err = c.Query(ctx, q)
	if err != nil {
		t.Fatalf("query with the store down: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("stale answer took %v", took)
	}
	if !resp.Stale || !strings.Contains(resp.StaleReason, "store unavailable") || resp.Commit != sum.Commit || len(resp.Chunks) == 0 || resp.Chunks[0].Path != "auth/token.go" {
		t.Errorf("query with the store down = stale %v (%q), commit %s, %d chunks; want a stale answer from %s", resp.Stale, resp.StaleReason, resp.Commit, len(resp.Chunks), sum.Commit)
	}
	// A repository never read: 503 "store unavailable".
	code, body := post(t, ts.URL+"/v1/query", `{"repo":"other","query":"x"}`)
	if msg, _ := body["error"].(string); code != http.StatusServiceUnavailable || !strings.Contains(msg, "store unavailable") {
		t.Errorf("unknown repo with the store down = %d %v, want 503 store unavailable", code, body)
	}
	mresp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if !strings.Contains(string(m), "codectx_stale_head_answers_total 1") {
		t.Errorf("metrics lack one stale answer:\n%s", grepLines(string(m), "stale"))
	}

	ds.down.Store(false)
	if resp, err = c.Query(ctx, q); err != nil || resp.Stale {
		t.Errorf("query with the store back: %v, stale %v", err, resp != nil && resp.Stale)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Readiness checks run concurrently, each with its own deadline: a hung
// store fails only the store check, and the answer comes within about one
// deadline, not the sum (issue 14 item 2).
func TestReadyChecksHaveOwnDeadlines(t *testing.T) {
	hang := &hangStore{Bucket: blob.NewMem()}
	ok := func(ctx context.Context) error { return ctx.Err() }
	slow := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	s := &Server{Store: blob.NewBucket(hang), Checks: []Check{
		{Name: "temporal", Fn: ok}, {Name: "nats", Fn: ok},
		{Name: "slow", Fn: slow, Timeout: 300 * time.Millisecond},
		{Name: "slow2", Fn: slow}, {Name: "slow3", Fn: slow},
	}}
	ts, _ := newServer(t, s)
	start := time.Now()
	resp, err := http.Get(ts.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	took := time.Since(start)
	var r Readiness
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || r.Checks["temporal"] != "ok" || r.Checks["nats"] != "ok" || r.Checks["store"] == "ok" || r.Checks["slow"] == "ok" || r.Checks["slow2"] == "ok" || r.Checks["slow3"] == "ok" {
		t.Errorf("/readyz with a hung store = %d %+v, want 503 with temporal and nats ok, store and slow failing", resp.StatusCode, r)
	}
	// The store and two checks hang for a deadline each: run one after
	// another they take three, side by side about one.
	if took >= 3*checkTimeout {
		t.Errorf("/readyz took %v, want about one deadline (%v), not one per hung check", took, checkTimeout)
	}
}

// hangStore never answers Exists (a store behind a black-holed network).
type hangStore struct{ *blob.Bucket }

func (h *hangStore) Exists(ctx context.Context, key string) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}

// forgetBus is HeadNotices delivered at once to the servers on it.
type forgetBus struct{ servers []*Server }

func (b *forgetBus) HeadGone(_ context.Context, tenant, repo string) error {
	for _, s := range b.servers {
		s.ForgetHead(tenant, repo)
	}
	return nil
}

// A DELETE on one server (the gateway) makes the servers that answer
// queries forget the repository's last HEAD: with their store down they
// answer 503, not the deleted code from the HEAD they read before. Before,
// a query service kept it until one of its HEAD reads succeeded.
func TestDeleteOnAnotherServerForgetsItsHead(t *testing.T) {
	mem := blob.NewMem()
	fixture(t, mem, "")
	ds := &downStore{Bucket: mem}
	query := &Server{Store: blob.NewBucket(ds), Routes: QueryRoutes}
	_, qc := newServer(t, query)
	gw := &Server{Store: mem, Routes: AdminRoutes, Notices: &forgetBus{servers: []*Server{query}}}
	gts, _ := newServer(t, gw)
	ctx := context.Background()
	q := QueryRequest{Repo: "demo", Query: "where is ParseToken defined", Budget: 2000}
	if _, err := qc.Query(ctx, q); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("DELETE", gts.URL+"/v1/repos/default/demo", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE on the gateway: %d", resp.StatusCode)
	}
	ds.down.Store(true)
	if r, err := qc.Query(ctx, q); err == nil {
		t.Errorf("after a DELETE on the gateway, the query service with its store down answered the deleted repository: stale %v, commit %s, %d chunks", r.Stale, r.Commit, len(r.Chunks))
	}
}

// TestNoLastHeadWhileDeletesUnheard: a server that does not hear the other
// servers' DELETE notices now (NATS away) answers no query from the last
// HEAD it read, which may be of a repository deleted meanwhile; nor from
// one read before it listened or before NATS came back (ForgetHeads). It
// answers 503 while the store is down. When it hears them, the last HEAD
// answers as before.
func TestNoLastHeadWhileDeletesUnheard(t *testing.T) {
	mem := blob.NewMem()
	fixture(t, mem, "")
	ds := &downStore{Bucket: mem}
	var heard atomic.Bool
	heard.Store(true)
	srv := &Server{Store: blob.NewBucket(ds), Routes: QueryRoutes, HeadsHeard: heard.Load}
	_, c := newServer(t, srv)
	ctx := context.Background()
	q := QueryRequest{Repo: "demo", Query: "where is ParseToken defined", Budget: 2000}
	read := func() {
		t.Helper()
		ds.down.Store(false)
		if _, err := c.Query(ctx, q); err != nil {
			t.Fatal(err)
		}
		ds.down.Store(true)
	}
	read()
	if r, err := c.Query(ctx, q); err != nil || !r.Stale {
		t.Fatalf("notices heard, store down: %v; want the last HEAD's stale answer", err)
	}
	heard.Store(false)
	if r, err := c.Query(ctx, q); err == nil {
		t.Errorf("notices unheard, store down: answered from the last HEAD (stale %v, commit %s); want 503", r.Stale, r.Commit)
	}
	heard.Store(true)
	read()
	srv.ForgetHeads() // NATS came back: what was read before may be of a deleted repository
	if r, err := c.Query(ctx, q); err == nil {
		t.Errorf("after ForgetHeads, store down: answered from the last HEAD (stale %v, commit %s); want 503", r.Stale, r.Commit)
	}
}

// With the store down, status and a query of a repository the server has
// not read say the store is unavailable, never that the repository has no
// published index: it may well have one, and an operator reading "no
// published index" looks for a lost index instead of a store outage.
func TestStoreDownIsNotNoIndex(t *testing.T) {
	mem := blob.NewMem()
	fixture(t, mem, "")
	ds := &downStore{Bucket: mem}
	ds.down.Store(true)
	ts, _ := newServer(t, &Server{Store: blob.NewBucket(ds), Routes: AllRoutes})
	resp, err := http.Get(ts.URL + "/v1/repos/default/demo/status")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	msg, _ := body["error"].(string)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(msg, "store unavailable") || strings.Contains(msg, "no published index") {
		t.Errorf("status with the store down = %d %q, want 503 saying the store is unavailable", resp.StatusCode, msg)
	}
	code, qbody := post(t, ts.URL+"/v1/query", `{"repo":"demo","query":"x"}`)
	if msg, _ := qbody["error"].(string); code != http.StatusServiceUnavailable || !strings.Contains(msg, "store unavailable") || strings.Contains(msg, "no published index") {
		t.Errorf("query with the store down = %d %q, want 503 saying the store is unavailable", code, msg)
	}
}

// hungGets never answers a Get: a store server that takes connections but
// is stopped (SIGSTOP) or wedged.
type hungGets struct{ *blob.Bucket }

func (h *hungGets) Get(ctx context.Context, key string) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A store that never answers makes status, and a query of a repository
// the server has not read, a 503 within headReadTimeout: not a request
// held for as long as the store client retries.
func TestHungStoreAnswers503(t *testing.T) {
	old := headReadTimeout
	headReadTimeout = 200 * time.Millisecond
	t.Cleanup(func() { headReadTimeout = old })
	mem := blob.NewMem()
	fixture(t, mem, "")
	ts, _ := newServer(t, &Server{Store: blob.NewBucket(&hungGets{Bucket: mem}), Routes: AllRoutes})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/repos/default/demo/status", ""},
		{"POST", "/v1/query", `{"repo":"demo","query":"where is ParseToken defined"}`},
	} {
		req, _ := http.NewRequestWithContext(ctx, r.method, ts.URL+r.path, strings.NewReader(r.body))
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%s %s with a hung store: no answer after %v: %v", r.method, r.path, time.Since(start).Round(time.Millisecond), err)
			continue
		}
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if msg, _ := body["error"].(string); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(msg, "store unavailable") {
			t.Errorf("%s %s with a hung store = %d %q, want 503 store unavailable", r.method, r.path, resp.StatusCode, msg)
		}
	}
}
