package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/index"
)

// do sends one request and returns its status and headers.
func do(t *testing.T, method, url, ctype, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestGuard(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "")
	fake := &fakeIndexer{}
	ts, _ := newServer(t, &Server{Store: store, Indexer: fake, Routes: AllRoutes, LoopbackOnly: true,
		Limits: Limits{Query: 100, QueryBody: 300, IndexBody: 200}})
	host := strings.TrimPrefix(ts.URL, "http://")
	_, port, _ := strings.Cut(host, ":")
	q := `{"repo":"demo","query":"ParseToken"}`
	idx := `{"location":"/tmp/x"}`
	json := "application/json"
	tests := []struct {
		name, path, ctype, body string
		hdr                     map[string]string
		want                    int
	}{
		{"query", "/v1/query", json, q, nil, 200},
		{"query with charset", "/v1/query", "application/json; charset=utf-8", q, nil, 200},
		{"text/plain query", "/v1/query", "text/plain", q, nil, 415},
		{"form index", "/v1/index", "application/x-www-form-urlencoded", idx, nil, 415},
		{"no content type", "/v1/index", "", idx, nil, 415},
		{"trailing garbage", "/v1/query", json, q + `{"x":1}`, nil, 400},
		{"trailing text", "/v1/index", json, idx + "x", nil, 400},
		{"trailing space", "/v1/query", json, q + " \n", nil, 200},
		{"two values", "/v1/query", json, q + q, nil, 400},
		{"malformed", "/v1/query", json, `{"repo":`, nil, 400},
		{"unknown field", "/v1/query", json, `{"repo":"demo","query":"ParseToken","repoz":["*"]}`, nil, 400},
		{"unknown field on index", "/v1/index", json, `{"location":"/tmp/x","force":true}`, nil, 400},
		{"field of another route", "/v1/references", json, `{"repos":["demo"],"name":"ParseToken","budget":100}`, nil, 400},
		{"query body too large", "/v1/query", json, `{"repo":"demo","query":"` + strings.Repeat("a", 400) + `"}`, nil, 413},
		{"index body too large", "/v1/index", json, `{"location":"/` + strings.Repeat("a", 300) + `"}`, nil, 413},
		{"query too long", "/v1/query", json, `{"repo":"demo","query":"` + strings.Repeat("a ", 60) + `"}`, nil, 400},
		{"localhost", "/v1/query", json, q, map[string]string{"Host": "localhost:" + port}, 200},
		{"[::1]", "/v1/query", json, q, map[string]string{"Host": "[::1]:" + port}, 200},
		{"rebound name", "/v1/query", json, q, map[string]string{"Host": "evil.example:" + port}, 421},
		{"rebound name on GET", "/healthz", "", "", map[string]string{"Host": "evil.example"}, 421},
		{"port not a number", "/v1/query", json, q, map[string]string{"Host": "localhost:evil.example"}, 421},
		{"port out of range", "/v1/query", json, q, map[string]string{"Host": "127.0.0.1:70000"}, 421},
		{"127.0.0.1.evil", "/v1/query", json, q, map[string]string{"Host": "127.0.0.1.evil.example"}, 421},
		{"foreign origin", "/v1/index", json, idx, map[string]string{"Origin": "https://evil.example"}, 403},
		{"null origin", "/v1/index", json, idx, map[string]string{"Origin": "null"}, 403},
		{"origin on another port", "/v1/query", json, q, map[string]string{"Origin": "http://127.0.0.1:1"}, 403},
		{"cross-site fetch", "/v1/query", json, q, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"same origin", "/v1/query", json, q, map[string]string{"Origin": ts.URL}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(fake.reqs)
			method := "POST"
			if tt.path == "/healthz" {
				method = "GET"
			}
			code, _, body := do(t, method, ts.URL+tt.path, tt.ctype, tt.body, tt.hdr)
			if code != tt.want {
				t.Errorf("status = %d (%s), want %d", code, body, tt.want)
			}
			if tt.want != 200 && len(fake.reqs) != before {
				t.Errorf("a refused request reached the orchestrator: %+v", fake.reqs[before:])
			}
		})
	}
}

// With keys configured the Origin is not checked: the key is the proof.
func TestGuardOriginWithKeys(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "")
	ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes, Keys: Keys{HashKey("k"): "default"}})
	code, _, body := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"repo":"demo","query":"ParseToken"}`,
		map[string]string{"Origin": "https://tool.example", "Authorization": "Bearer k"})
	if code != 200 {
		t.Errorf("keyed query with an Origin = %d %s", code, body)
	}
}

func TestRateLimit(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "")
	ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes, Limits: Limits{Rate: 0.05, Burst: 2}})
	q := `{"repo":"demo","query":"ParseToken"}`
	for i := range 2 {
		if code, _, body := do(t, "POST", ts.URL+"/v1/query", "application/json", q, nil); code != 200 {
			t.Fatalf("request %d within the burst = %d %s", i, code, body)
		}
	}
	code, hdr, _ := do(t, "POST", ts.URL+"/v1/query", "application/json", q, nil)
	if code != http.StatusTooManyRequests {
		t.Fatalf("request over the rate = %d, want 429", code)
	}
	// One token per 20 s (slow beside a loaded machine's requests, so none
	// refills within the test): the wait left is 1-20 s.
	if s, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || s < 1 || s > 20 {
		t.Errorf("Retry-After = %q, want 1 to 20 seconds", hdr.Get("Retry-After"))
	}
	// Another tenant has its own budget (404: nothing indexed there).
	if code, _, _ := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"tenant":"other","repo":"demo","query":"x"}`, nil); code != http.StatusNotFound {
		t.Errorf("another tenant's request = %d, want 404", code)
	}
	code, _, _ = do(t, "GET", ts.URL+"/v1/repos/default/demo/status", "", "", nil)
	if code != http.StatusTooManyRequests {
		t.Errorf("status over the rate = %d, want 429", code)
	}
}

// A query over many repositories spends its tenant's rate as the
// single queries it stands for would (one request per reposPerToken
// repositories past the first): "*" cannot search the whole tenant at
// the price of one request.
func TestRateCountsRepositories(t *testing.T) {
	const repos = 1 + 3*reposPerToken
	store := manyRepos(t, "", repos, "package a\n\n// ParseToken parses.\nfunc ParseToken() {}\n")
	// One token per 20 s: none refills within the test. The burst of 4
	// is one request and the 3 its repositories past the first cost.
	ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes, Limits: Limits{Rate: 0.05, Burst: 4}})
	if code, _, body := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"repos":["*"],"query":"ParseToken"}`, nil); code != 200 {
		t.Fatalf("query over all %d repositories = %d %s", repos, code, body)
	}
	code, hdr, _ := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"repo":"r00","query":"ParseToken"}`, nil)
	if code != http.StatusTooManyRequests {
		t.Fatalf("a query after one over %d repositories within a burst of 4 = %d, want 429", repos, code)
	}
	if s, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After = %q", hdr.Get("Retry-After"))
	}

	// Two repositories named cost a quarter more: four such queries (5
	// tokens) and a single one fit in a burst of 6, the next does not.
	ts, _ = newServer(t, &Server{Store: store, Routes: AllRoutes, Limits: Limits{Rate: 0.05, Burst: 6}})
	for i := range 4 {
		if code, _, body := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"repos":["r00","r01"],"query":"ParseToken"}`, nil); code != 200 {
			t.Fatalf("query %d over two repositories = %d %s", i, code, body)
		}
	}
	if code, _, _ := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"repo":"r00","query":"ParseToken"}`, nil); code != 200 {
		t.Errorf("fifth request = %d, want 200 (one token left)", code)
	}
	if code, _, _ := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"repo":"r00","query":"ParseToken"}`, nil); code != http.StatusTooManyRequests {
		t.Errorf("sixth request = %d, want 429 (none left)", code)
	}
}

// The graph routes and tools over several repositories (references,
// impact, symbol; by default all of the tenant's) pay what a query over
// them does: TestRateCountsRepositories for /v1/query.
func TestRateCountsRepositoriesGraphRoutes(t *testing.T) {
	const repos = 1 + 3*reposPerToken
	store := manyRepos(t, "", repos, "package a\n\n// ParseToken parses.\nfunc ParseToken() {}\n\nfunc Use() { ParseToken() }\n")
	for _, c := range []struct{ route, body string }{
		{"/v1/references", `{"name":"ParseToken"}`},
		{"/v1/references", `{"name":"ParseToken","repos":["*"]}`},
		{"/v1/impact", `{"name":"ParseToken","repo":"r00"}`},
	} {
		ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes, Limits: Limits{Rate: 0.05, Burst: 4}})
		if code, _, body := do(t, "POST", ts.URL+c.route, "application/json", c.body, nil); code != 200 {
			t.Fatalf("%s %s over all %d repositories = %d %s", c.route, c.body, repos, code, body)
		}
		if code, _, _ := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"repo":"r00","query":"ParseToken"}`, nil); code != http.StatusTooManyRequests {
			t.Errorf("a query after %s %s over %d repositories within a burst of 4 = %d, want 429", c.route, c.body, repos, code)
		}
	}
}

// manyRepos indexes n repositories r00, r01, ... of tenant, each one file
// a.go holding src, into a new store.
func manyRepos(t *testing.T, tenant string, n int, src string) *blob.Bucket {
	t.Helper()
	store := blob.NewMem()
	dir := filepath.Join(t.TempDir(), "demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := index.Build(context.Background(), store, dir, index.Options{Tenant: tenant, Name: fmt.Sprintf("r%02d", i), Workers: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

func TestRateLimiterRefills(t *testing.T) {
	now := time.Unix(0, 0)
	l := newRateLimiter(2, 1)
	l.now = func() time.Time { return now }
	if ok, _ := l.take("a"); !ok {
		t.Fatal("first request refused")
	}
	ok, wait := l.take("a")
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("second = %v %v, want refused for 500ms", ok, wait)
	}
	now = now.Add(500 * time.Millisecond)
	if ok, _ := l.take("a"); !ok {
		t.Fatal("refused after the refill")
	}
	for i := range maxBuckets + 10 {
		l.take(strconv.Itoa(i))
	}
	if n := len(l.buckets); n > maxBuckets {
		t.Errorf("%d buckets, want at most %d", n, maxBuckets)
	}
}

// Keys listed in upper-case hex match; the lookup does not depend on case.
func TestKeysUpperCase(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "")
	ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes, Keys: Keys{strings.ToUpper(HashKey("k")): "default"}})
	code, _, body := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"repo":"demo","query":"ParseToken"}`, map[string]string{"Authorization": "Bearer k"})
	if code != 200 {
		t.Errorf("key listed in upper case = %d %s, want 200", code, body)
	}
}

func TestMemDeliveries(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(0, 0)
	m := NewMemDeliveries(time.Hour, 3)
	m.now = func() time.Time { return now }
	remember := func(k string) bool {
		fresh, err := m.Remember(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return fresh
	}
	if !remember("a") || remember("a") {
		t.Fatal("a key is new once")
	}
	m.Forget(ctx, "a")
	if !remember("a") {
		t.Fatal("a forgotten key is new again")
	}
	now = now.Add(time.Hour)
	if !remember("a") {
		t.Fatal("a key is new again after the window")
	}
	for _, k := range []string{"b", "c", "d"} {
		remember(k)
	}
	if len(m.keys) > 3 || m.ll.Len() > 3 {
		t.Errorf("%d keys kept, want at most 3", len(m.keys))
	}
}

// The webhook route reads at most Limits.WebhookBytes of bodies at once
// and refuses one over its body limit before reading it.
func TestWebhookLimits(t *testing.T) {
	srv := &Server{Store: blob.NewMem(), Indexer: &fakeIndexer{}, Routes: AllRoutes,
		// A grace longer than the test: the first deliveries hold their
		// chunks. The budget is its least, 64 KiB: 16 first chunks.
		Limits:   Limits{WebhookBytes: 1, WebhookBody: 1000, WebhookGrace: time.Minute},
		Webhooks: WebhookConfig{Secrets: map[string]string{"acme": "a-secret"}}}
	ts, _ := newServer(t, srv)
	url := ts.URL + "/v1/webhooks/github/acme"
	var pws []*io.PipeWriter
	held := make(chan int, 16)
	for range 16 {
		pr, pw := io.Pipe()
		defer pw.Close()
		pws = append(pws, pw)
		go func() {
			req, _ := http.NewRequest("POST", url, pr)
			req.Header.Set("X-Hub-Signature-256", signed("a-secret", "x"))
			req.Header.Set("X-GitHub-Event", "push")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				held <- 0
				return
			}
			resp.Body.Close()
			held <- resp.StatusCode
		}()
		pw.Write([]byte("{")) // the delivery is being read: it holds 4 KiB
	}
	for deadline := time.Now().Add(5 * time.Second); lent(srv) < srv.webhooks.size && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	code, hdr, _ := do(t, "POST", url, "application/json", "{}", map[string]string{"X-Hub-Signature-256": signed("a-secret", "{}"), "X-GitHub-Event": "push"})
	if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Errorf("a delivery while %d bytes of bodies are read = %d (Retry-After %q), want 503 with Retry-After", lent(srv), code, hdr.Get("Retry-After"))
	}
	for _, pw := range pws {
		pw.CloseWithError(io.ErrUnexpectedEOF)
		<-held
	}
	big := strings.Repeat("x", 2000)
	if code, _, _ := do(t, "POST", url, "application/json", big, map[string]string{"X-Hub-Signature-256": signed("a-secret", big), "X-GitHub-Event": "push"}); code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized delivery = %d, want 413", code)
	}
	if code, _, _ := do(t, "POST", url, "application/json", "{}", map[string]string{"X-GitHub-Event": "push"}); code != http.StatusUnauthorized {
		t.Errorf("unsigned delivery = %d, want 401", code)
	}
	for _, h := range []string{"gitlab", "gitea"} {
		if code, _, _ := do(t, "POST", ts.URL+"/v1/webhooks/"+h+"/acme", "application/json", "{}", nil); code != http.StatusUnauthorized {
			t.Errorf("%s delivery without token or signature = %d, want 401", h, code)
		}
	}
}

// lent is the webhook budget s has lent out.
func lent(s *Server) int64 {
	s.webhooks.mu.Lock()
	defer s.webhooks.mu.Unlock()
	return s.webhooks.held
}
