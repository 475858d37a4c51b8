package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/tokens"
)

// fakeIndexer records requests; each Status call advances a pending push
// by one step: indexing, then done with commit "c0ffee01".
type fakeIndexer struct {
	mu    sync.Mutex
	reqs  []IndexRequest
	st    map[string]*RepoStatus
	fail  error
	steps int
}

func (f *fakeIndexer) Index(_ context.Context, req IndexRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return "", f.fail
	}
	f.reqs = append(f.reqs, req)
	k := req.Tenant + "/" + req.Repo
	if f.st == nil {
		f.st = map[string]*RepoStatus{}
	}
	st := f.st[k]
	if st == nil {
		st = &RepoStatus{State: StateIdle}
		f.st[k] = st
	}
	st.Received++
	st.HasPending = true
	return "run-1", nil
}

func (f *fakeIndexer) Status(_ context.Context, tenant, repo string) (RepoStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st[tenant+"/"+repo]
	if st == nil {
		return RepoStatus{}, ErrUnknownRepo
	}
	f.steps++
	switch {
	case st.HasPending:
		st.HasPending, st.State = false, StateIndexing
	case st.State == StateIndexing:
		st.State, st.Covered, st.LastCommit, st.Files = StateIdle, st.Received, "c0ffee01", 3
	}
	return *st, nil
}

// fixture indexes a directory with two Go files into store as repo "demo".
func fixture(t *testing.T, store *blob.Bucket, extra string) *index.Summary {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo")
	files := map[string]string{
		"auth/token.go":   "package auth\n\n// ParseToken validates a bearer token and returns its subject.\nfunc ParseToken(s string) (string, error) {\n\treturn s, nil\n}\n",
		"util/strings.go": "package util\n\n// Reverse reverses a string.\nfunc Reverse(s string) string {\n\treturn s\n}\n" + extra,
	}
	writeFiles(t, dir, files)
	sum, err := index.Build(context.Background(), store, dir, index.Options{Name: "demo", Workers: 1})
	if err != nil {
		t.Fatalf("index fixture: %v", err)
	}
	return sum
}

// writeFiles writes files (path -> content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func newServer(t *testing.T, s *Server) (*httptest.Server, *Client) {
	t.Helper()
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts, &Client{BaseURL: ts.URL, PollInterval: time.Millisecond}
}

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("POST %s: answer is not a JSON object: %v", url, err)
	}
	return resp.StatusCode, m
}

func TestQuery(t *testing.T) {
	store := blob.NewMem()
	sum := fixture(t, store, "")
	s := &Server{Store: store, Routes: AllRoutes}
	ts, c := newServer(t, s)
	ctx := context.Background()

	resp, err := c.Query(ctx, QueryRequest{Repo: "demo", Query: "where is ParseToken defined", Budget: 2000})
	if err != nil {
		t.Fatalf("Query: %v", err)
	}
	if resp.Commit != sum.Commit || len(resp.Chunks) == 0 || resp.Chunks[0].Path != "auth/token.go" {
		t.Fatalf("Query: commit %s, %d chunks, first %+v; want commit %s, first from auth/token.go", resp.Commit, len(resp.Chunks), resp.Chunks, sum.Commit)
	}
	// Count the context ourselves: the answer's own count is not evidence.
	if n := tokens.Count(resp.Context); n > 2000 || n != resp.Tokens || n == 0 {
		t.Errorf("context counts %d tokens (answer says %d), want 1..2000", n, resp.Tokens)
	}

	// A new HEAD is picked up on the next request.
	sum2 := fixture(t, store, "\n// Shout upper-cases a string.\nfunc Shout(s string) string { return s }\n")
	if sum2.Commit == sum.Commit {
		t.Fatal("fixture change did not change the snapshot name")
	}
	resp, err = c.Query(ctx, QueryRequest{Tenant: "default", Repo: "demo", Query: "Shout"})
	if err != nil {
		t.Fatalf("Query after reindex: %v", err)
	}
	if resp.Commit != sum2.Commit {
		t.Errorf("commit after reindex = %s, want %s", resp.Commit, sum2.Commit)
	}
	if n := s.segs.len(); n != 2 {
		t.Errorf("cached segments = %d, want 2", n)
	}

	for _, tc := range []struct {
		name, body string
		code       int
		errHas     string
	}{
		{"no repo", `{"query":"x"}`, 400, "no repo"},
		{"empty query", `{"repo":"demo","query":"  "}`, 400, "empty query"},
		{"bad arm", `{"repo":"demo","query":"x","arms":["nope"]}`, 400, "unknown arm"},
		{"bad json", `{"repo":`, 400, "bad request body"},
		{"bad name", `{"repo":"../etc","query":"x"}`, 400, "invalid repo"},
		{"bad budget", `{"repo":"demo","query":"x","budget":-1}`, 400, "budget"},
		{"zero budget", `{"repo":"demo","query":"x","budget":0}`, 400, "budget 0 out of range"},
		{"absent budget is the default", `{"repo":"demo","query":"ParseToken"}`, 200, ""},
		{"null budget is the default", `{"repo":"demo","query":"ParseToken","budget":null}`, 200, ""},
		{"unknown repo", `{"repo":"nope","query":"x"}`, 404, "not indexed"},
	} {
		code, m := post(t, ts.URL+"/v1/query", tc.body)
		msg, _ := m["error"].(string)
		if code != tc.code || !strings.Contains(msg, tc.errHas) {
			t.Errorf("%s: got %d %q, want %d containing %q", tc.name, code, msg, tc.code, tc.errHas)
		}
	}
	if _, err := c.Query(ctx, QueryRequest{Repo: "nope", Query: "x"}); !IsNotFound(err) {
		t.Errorf("client Query of unknown repo: err = %v, want a 404 Error", err)
	}
}

// TestQueryContentLength checks that an answer too big for the server's
// own buffering says its length instead of being sent chunked.
func TestQueryContentLength(t *testing.T) {
	store := blob.NewMem()
	var extra strings.Builder
	for i := range 40 {
		fmt.Fprintf(&extra, "\n// ParseTokenPart%d parses part %d of a token.\nfunc ParseTokenPart%d(s string) string { return s }\n", i, i, i)
	}
	fixture(t, store, extra.String())
	ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes})
	resp, err := http.Post(ts.URL+"/v1/query", "application/json", strings.NewReader(`{"repo":"demo","query":"where is ParseToken defined","budget":8000}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || len(body) < 4096 {
		t.Fatalf("answer: %d, %d bytes; want 200 and over 4 KiB (the test needs a big answer)", resp.StatusCode, len(body))
	}
	if resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) != 0 {
		t.Errorf("answer: Content-Length %d, transfer encoding %v, body %d bytes; want the body's length, not chunked",
			resp.ContentLength, resp.TransferEncoding, len(body))
	}
}

func TestHealthAndReady(t *testing.T) {
	store := blob.NewMem()
	var down error
	s := &Server{
		Store:    store,
		Checks:   []Check{{Name: "temporal", Fn: func(context.Context) error { return down }}},
		Notes:    map[string]string{"embed": "disabled: no embedder configured"},
		readyFor: 100 * time.Millisecond,
	}
	ts, _ := newServer(t, s)
	get := func(path string) (int, Readiness) {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r Readiness
		json.NewDecoder(resp.Body).Decode(&r)
		return resp.StatusCode, r
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d, want 200", code)
	}
	code, r := get("/readyz")
	if code != 200 || !r.Ready || r.Checks["store"] != "ok" || r.Checks["temporal"] != "ok" || r.Notes["embed"] == "" {
		t.Errorf("/readyz = %d %+v, want 200, ready, store and temporal ok, embed note", code, r)
	}
	down = errors.New("connection refused")
	// The last round answers for readyFor, then the checks run again.
	if code, r = get("/readyz"); code != 200 {
		t.Errorf("/readyz within readyFor of a good round = %d %+v, want its 200", code, r)
	}
	time.Sleep(110 * time.Millisecond)
	code, r = get("/readyz")
	if code != 503 || r.Ready || r.Checks["temporal"] != "connection refused" {
		t.Errorf("/readyz with temporal down = %d %+v, want 503 naming temporal", code, r)
	}
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 1<<16)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if !strings.Contains(b.String(), `codectx_http_requests_total{code="503",route="readyz"} 1`) {
		t.Errorf("/metrics does not count the 503 of /readyz:\n%s", b.String())
	}
	// A soft dependency (the query service's NATS: sessions, DELETE
	// notices) is shown degraded and leaves the server ready.
	soft := &Server{Store: store, Checks: []Check{{Name: "nats", Soft: true, Fn: func(context.Context) error { return errors.New("connection refused") }}}}
	ts, _ = newServer(t, soft)
	if code, r = get("/readyz"); code != 200 || !r.Ready || r.Checks["nats"] != "degraded: connection refused" {
		t.Errorf("/readyz with a soft dependency down = %d %+v, want 200, ready, nats degraded", code, r)
	}
}

func TestIndexAndStatus(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "")
	fake := &fakeIndexer{}
	ts, c := newServer(t, &Server{Store: store, Indexer: fake, Routes: AllRoutes})
	ctx := context.Background()

	loc := filepath.Join(t.TempDir(), "myrepo")
	got, err := c.Index(ctx, IndexRequest{Location: loc})
	if err != nil {
		t.Fatalf("Index: %v", err)
	}
	if got.Tenant != "default" || got.Repo != "myrepo" || got.RunID != "run-1" {
		t.Errorf("Index = %+v, want default/myrepo run-1", got)
	}
	if len(fake.reqs) != 1 || fake.reqs[0].Location != loc || fake.reqs[0].Repo != "myrepo" {
		t.Errorf("indexer got %+v", fake.reqs)
	}
	st, err := c.WaitIndexed(ctx, "default", "myrepo", "")
	if err != nil {
		t.Fatalf("WaitIndexed: %v", err)
	}
	if !st.Done() || st.LastCommit != "c0ffee01" || st.Files != 3 || st.Head != nil {
		t.Errorf("WaitIndexed = %+v, want done at c0ffee01 with 3 files and no head", st)
	}
	if fake.steps < 2 {
		t.Errorf("WaitIndexed returned after %d status calls, before the fake finished", fake.steps)
	}

	// A repository indexed outside the orchestrator shows its HEAD only.
	st, err = c.Status(ctx, "default", "demo")
	if err != nil {
		t.Fatalf("Status demo: %v", err)
	}
	if st.State != StateUnknown || st.Head == nil || st.Head.Commit == "" {
		t.Errorf("Status demo = %+v, want unknown state with a head", st)
	}
	if _, err := c.Status(ctx, "default", "nope"); !IsNotFound(err) {
		t.Errorf("Status nope: err = %v, want 404", err)
	}
	// Nested repo names go through the path.
	if _, err := c.Index(ctx, IndexRequest{Repo: "org/svc", Location: "https://example.com/org/svc.git", Commit: "abc"}); err != nil {
		t.Fatalf("Index org/svc: %v", err)
	}
	if _, err := c.Status(ctx, "default", "org/svc"); err != nil {
		t.Errorf("Status org/svc: %v", err)
	}

	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{"no location", `{}`, 400},
		{"relative path", `{"location":"some/dir"}`, 400},
		{"bad tenant", `{"tenant":"a b","location":"/x/y"}`, 400},
	} {
		if code, m := post(t, ts.URL+"/v1/index", tc.body); code != tc.code {
			t.Errorf("%s: got %d %v, want %d", tc.name, code, m, tc.code)
		}
	}
	fake.fail = errors.New("temporal down")
	if code, m := post(t, ts.URL+"/v1/index", `{"location":"/x/y"}`); code != 503 || !strings.Contains(m["error"].(string), "temporal down") {
		t.Errorf("index with failing indexer: %d %v, want 503 naming the cause", code, m)
	}
}

func TestRoutes(t *testing.T) {
	store := blob.NewMem()
	_, query := newServer(t, &Server{Store: store, Routes: QueryRoutes, Indexer: &fakeIndexer{}})
	if _, err := query.Index(context.Background(), IndexRequest{Location: "/x/y"}); !IsNotFound(err) {
		t.Errorf("Index on a query-only server: err = %v, want 404", err)
	}
	_, admin := newServer(t, &Server{Store: store, Routes: AdminRoutes})
	if _, err := admin.Query(context.Background(), QueryRequest{Repo: "demo", Query: "x"}); !IsNotFound(err) {
		t.Errorf("Query on an admin-only server: err = %v, want 404", err)
	}
	_, health := newServer(t, &Server{Store: store})
	if _, err := health.Status(context.Background(), "default", "demo"); !IsNotFound(err) {
		t.Errorf("Status on a health-only server: err = %v, want 404", err)
	}
	var e *Error
	if _, err := admin.Index(context.Background(), IndexRequest{Location: "/x/y"}); !errors.As(err, &e) || e.Code != 503 {
		t.Errorf("Index with no indexer: err = %v, want 503", err)
	}
}

func TestWaitIndexedReportsFailure(t *testing.T) {
	fake := &fakeIndexer{st: map[string]*RepoStatus{"default/r": {State: StateIdle, Received: 1, Covered: 1, LastError: "snapshot: no such repo"}}}
	_, c := newServer(t, &Server{Store: blob.NewMem(), Indexer: fake, Routes: AllRoutes})
	if _, err := c.WaitIndexed(context.Background(), "default", "r", ""); err == nil || !strings.Contains(err.Error(), "no such repo") {
		t.Errorf("WaitIndexed = %v, want the snapshot error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.WaitIndexed(ctx, "default", "never", ""); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitIndexed with a cancelled context = %v, want context.Canceled", err)
	}
}

// TestIndexMissingPath: with LocalPaths (codectx up), a path that is not a
// directory on the server is refused at once, in one line, and nothing is
// signalled; without it (a gateway whose workers run elsewhere) the
// request goes on to the workflow.
func TestIndexMissingPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		localPaths bool
		loc        string
		code       int
	}{
		{"missing", true, filepath.Join(dir, "nope"), 400},
		{"a file", true, file, 400},
		{"a directory", true, dir, 202},
		{"elsewhere", false, filepath.Join(dir, "nope"), 202},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeIndexer{}
			ts, _ := newServer(t, &Server{Store: blob.NewMem(), Indexer: fake, Routes: AllRoutes, LocalPaths: tc.localPaths})
			code, m := post(t, ts.URL+"/v1/index", `{"location":`+strconv.Quote(tc.loc)+`}`)
			if code != tc.code {
				t.Fatalf("POST /v1/index %s: %d %v, want %d", tc.loc, code, m, tc.code)
			}
			if code == 400 {
				msg, _ := m["error"].(string)
				if !strings.Contains(msg, "not a directory on the server") || strings.Contains(msg, "\n") {
					t.Errorf("error %q, want one line saying the path is not a directory on the server", msg)
				}
				if len(fake.reqs) != 0 {
					t.Errorf("indexer signalled for a refused path: %+v", fake.reqs)
				}
			}
		})
	}
}

// Anyone may ask /readyz: the requests of one second share one round of
// the dependency checks, and those that come while it runs wait for it,
// so a flood of them does not fan out onto the store, Temporal and NATS.
func TestReadyzShared(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	s := &Server{Store: blob.NewMem(), Checks: []Check{{Name: "temporal", Fn: func(context.Context) error {
		calls.Add(1)
		<-release
		return nil
	}}}}
	ts, _ := newServer(t, s)
	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		wg.Go(func() {
			resp, err := http.Get(ts.URL + "/readyz")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	time.Sleep(100 * time.Millisecond) // the first round has begun, the others wait
	close(release)
	wg.Wait()
	for range 20 {
		resp, err := http.Get(ts.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("40 requests of /readyz within a second ran the temporal check %d times, want 1", n)
	}
	for _, c := range codes {
		if c != 200 {
			t.Fatalf("/readyz codes %v, want 200", codes)
		}
	}
}

// With keys, /readyz says which check fails to anyone (probes need the
// status alone) but why only to an operator's key: a dependency's error
// can name internal addresses.
func TestReadyzDetailForOperators(t *testing.T) {
	const why = "dial tcp 10.0.3.5:7233: connect: connection refused"
	s := &Server{
		Store:  blob.NewMem(),
		Keys:   Keys{HashKey("tenant-key"): "acme", HashKey("operator-key"): AllTenants},
		Checks: []Check{{Name: "temporal", Fn: func(context.Context) error { return errors.New(why) }}},
	}
	ts, _ := newServer(t, s)
	for _, c := range []struct {
		key    string
		detail bool
	}{{"", false}, {"wrong-key", false}, {"tenant-key", false}, {"operator-key", true}} {
		hdr := map[string]string{}
		if c.key != "" {
			hdr["Authorization"] = "Bearer " + c.key
		}
		code, _, body := do(t, "GET", ts.URL+"/readyz", "", "", hdr)
		var r Readiness
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		if code != 503 || r.Ready || r.Checks["temporal"] == "" || r.Checks["temporal"] == "ok" {
			t.Errorf("key %q: /readyz = %d %s, want 503 with temporal failing", c.key, code, body)
		}
		if got := strings.Contains(body, "10.0.3.5"); got != c.detail {
			t.Errorf("key %q: /readyz shows the error = %v, want %v: %s", c.key, got, c.detail, body)
		}
	}
}
