package api

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"codectx/pkg/blob"
)

func TestAPIKeys(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "") // repository "demo" of tenant "default"
	keys := Keys{HashKey("key-of-default"): "default", HashKey("key-of-acme"): "acme", HashKey("operator"): AllTenants}
	ts, _ := newServer(t, &Server{Store: store, Indexer: &fakeIndexer{}, Routes: AllRoutes, Keys: keys})
	ctx := context.Background()
	client := func(key string) *Client { return &Client{BaseURL: ts.URL, Key: key} }
	code := func(err error) int {
		var e *Error
		if errors.As(err, &e) {
			return e.Code
		}
		if err != nil {
			t.Fatalf("transport error: %v", err)
		}
		return http.StatusOK
	}
	q := QueryRequest{Tenant: "default", Repo: "demo", Query: "ParseToken", Budget: 500}
	tests := []struct {
		key  string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"guess", http.StatusUnauthorized},
		{"key-of-acme", http.StatusForbidden}, // a key of another tenant
		{"key-of-default", http.StatusOK},
		{"operator", http.StatusOK},
	}
	for _, tt := range tests {
		_, err := client(tt.key).Query(ctx, q)
		if got := code(err); got != tt.want {
			t.Errorf("query with key %q: %d (%v), want %d", tt.key, got, err, tt.want)
		}
		_, err = client(tt.key).Status(ctx, "default", "demo")
		if got := code(err); got != tt.want {
			t.Errorf("status with key %q: %d (%v), want %d", tt.key, got, err, tt.want)
		}
	}
	// The acme key reaches acme only: its own (unindexed) repository is a
	// plain 404, default's is 403 whether or not it exists.
	if _, err := client("key-of-acme").Query(ctx, QueryRequest{Tenant: "acme", Repo: "demo", Query: "x"}); code(err) != http.StatusNotFound {
		t.Errorf("acme query of its own tenant: %v, want 404", err)
	}
	if _, err := client("key-of-acme").Status(ctx, "default", "nope"); code(err) != http.StatusForbidden {
		t.Errorf("acme status of default/nope: %v, want 403", err)
	}
	loc := filepath.Join(t.TempDir(), "r")
	if _, err := client("key-of-acme").Index(ctx, IndexRequest{Tenant: "default", Location: loc}); code(err) != http.StatusForbidden {
		t.Errorf("acme indexing into default: %v, want 403", err)
	}
	if _, err := client("key-of-acme").Index(ctx, IndexRequest{Tenant: "acme", Location: loc}); code(err) != http.StatusForbidden {
		t.Errorf("acme indexing a server path: %v, want 403", err)
	}
	if _, err := client("key-of-acme").Index(ctx, IndexRequest{Tenant: "acme", Location: "https://git.example/acme/r.git"}); err != nil {
		t.Errorf("acme indexing a clone URL into acme: %v", err)
	}
	if _, err := client("operator").Index(ctx, IndexRequest{Tenant: "acme", Location: loc}); err != nil {
		t.Errorf("operator indexing a server path: %v", err)
	}
	// Health stays open for probes; metrics, which add up every tenant's
	// activity, need an operator's key, unless served publicly.
	get := func(ts string, path, key string) int {
		req, _ := http.NewRequest("GET", ts+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	public, _ := newServer(t, &Server{Store: store, Routes: AllRoutes, Keys: keys, PublicMetrics: true})
	open, _ := newServer(t, &Server{Store: store, Routes: AllRoutes})
	for _, c := range []struct {
		base, path, key string
		want            int
	}{
		{ts.URL, "/healthz", "", 200},
		{ts.URL, "/metrics", "", 401},
		{ts.URL, "/metrics", "wrong", 401},
		{ts.URL, "/metrics", "key-of-acme", 403},
		{ts.URL, "/metrics", "operator", 200},
		{public.URL, "/metrics", "", 200},
		{open.URL, "/metrics", "", 200},
	} {
		if got := get(c.base, c.path, c.key); got != c.want {
			t.Errorf("GET %s with key %q = %d, want %d", c.path, c.key, got, c.want)
		}
	}
}

// Every guarded route answers a request without a known key the same
// way: 401, the bearer challenge (with error="invalid_token" for a key
// that is not listed) and the same message, so that no route tells a
// stranger more than another.
func TestUnauthorizedAnswersAlike(t *testing.T) {
	store := blob.NewMem()
	keys := Keys{HashKey("key-of-acme"): "acme", HashKey("operator"): AllTenants}
	ts, _ := newServer(t, &Server{Store: store, Indexer: &fakeIndexer{}, Routes: AllRoutes, Keys: keys})
	for _, route := range []struct{ method, path, body string }{
		{"POST", "/v1/query", `{"repo":"demo","query":"x"}`},            // admit, then authorize
		{"GET", "/v1/repos/acme/demo/status", ""},                       // admit (repoRoute)
		{"GET", "/v1/repos?tenant=acme", ""},                            // admit (listing)
		{"POST", "/v1/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`}, // principal
		{"GET", "/metrics", ""},                                         // metricsGuard
	} {
		for _, c := range []struct {
			key, challenge, msg string
		}{
			{"", `Bearer realm="codectx"`, "an API key is required"},
			{"not-a-key", `Bearer realm="codectx", error="invalid_token"`, "unknown API key"},
		} {
			hdr := map[string]string{}
			if c.key != "" {
				hdr["Authorization"] = "Bearer " + c.key
			}
			code, h, body := do(t, route.method, ts.URL+route.path, "application/json", route.body, hdr)
			if code != http.StatusUnauthorized || h.Get("WWW-Authenticate") != c.challenge || !strings.Contains(body, c.msg) {
				t.Errorf("%s %s with key %q: %d, challenge %q, body %s; want 401, %q, %q",
					route.method, route.path, c.key, code, h.Get("WWW-Authenticate"), body, c.challenge, c.msg)
			}
		}
	}
}
