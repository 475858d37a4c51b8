package api

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
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
	q := QueryRequest{Repo: "demo", Query: "ParseToken", Budget: 500}
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
	// Health and metrics stay open for probes.
	for _, p := range []string{"/healthz", "/metrics"} {
		resp, err := http.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d without a key, want 200", p, resp.StatusCode)
		}
	}
}
