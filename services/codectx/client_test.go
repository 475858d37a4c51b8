package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"codectx/pkg/api"
)

func TestServerClient(t *testing.T) {
	t.Setenv(envAPIKey, "k1")
	for _, c := range []struct{ in, base, err string }{
		{"127.0.0.1:7700", "http://127.0.0.1:7700", ""},
		{"localhost:7700/", "http://localhost:7700", ""},
		{"http://127.0.0.1:7700/", "http://127.0.0.1:7700", ""},
		{"https://codectx.example", "https://codectx.example", ""},
		{"ftp://127.0.0.1:7700", "", "want http://HOST:PORT"},
		{"http://", "", "want http://HOST:PORT"},
		{"http://a b", "", "want http://HOST:PORT"},
	} {
		cl, err := serverClient(c.in)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("serverClient(%q) = %v, want an error with %q", c.in, err, c.err)
			}
		case err != nil || cl.BaseURL != c.base || cl.Key != "k1":
			t.Errorf("serverClient(%q) = %+v, %v; want %s with the key", c.in, cl, err, c.base)
		}
	}
}

func TestKeyHint(t *testing.T) {
	unauthorized := &api.Error{Code: 401, Message: "an API key is required (Authorization: Bearer KEY)"}
	t.Setenv(envAPIKey, "")
	if err := keyHint(unauthorized); !strings.Contains(err.Error(), "set $"+envAPIKey) || !errors.Is(err, unauthorized) {
		t.Errorf("no key: %v", err)
	}
	t.Setenv(envAPIKey, "wrong")
	if err := keyHint(unauthorized); !strings.Contains(err.Error(), "is not one of the server's") {
		t.Errorf("wrong key: %v", err)
	}
	other := &api.Error{Code: 404, Message: "repository default/x is not indexed"}
	if err := keyHint(other); err != error(other) {
		t.Errorf("404: %v, want it unchanged", err)
	}
	if keyHint(nil) != nil {
		t.Error("nil error changed")
	}
}

// TestServerClientRetriesRate: a 429 (the tenant over its rate, or its
// requests at once) is retried after its Retry-After with the same body,
// as the API documents its 429s, so that query, index and repos do not
// fail at the first one; past rateRetries the 429 is the error.
func TestServerClientRetriesRate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := openStore(shopData(t))
	if err != nil {
		t.Fatal(err)
	}
	backend := (&api.Server{Store: store, Routes: api.QueryRoutes, Keys: api.Keys{api.HashKey("acme-key"): "acme"}}).Handler()
	var mu sync.Mutex
	refuse := 0         // 429s still to answer
	var bodies []string // bodies of the query requests, as received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(body))
		no := refuse > 0
		refuse--
		mu.Unlock()
		if no {
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"error":"tenant \"acme\" is over the rate of 50 requests per second"}`, http.StatusTooManyRequests)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		backend.ServeHTTP(w, r)
	}))
	defer srv.Close()
	t.Setenv(envAPIKey, "acme-key")
	query := func() (string, error) {
		var out strings.Builder
		err := run(ctx, []string{"query", "--server", srv.URL, "--tenant", "acme", "--repo", "shop", "--budget", "500", "cart total"}, &out, io.Discard)
		return out.String(), err
	}

	mu.Lock()
	refuse, bodies = 2, nil
	mu.Unlock()
	out, err := query()
	if err != nil || !strings.Contains(out, "shop@") {
		t.Fatalf("query past two 429s: %v\n%s", err, out)
	}
	mu.Lock()
	if len(bodies) != 3 || bodies[0] == "" || bodies[1] != bodies[0] || bodies[2] != bodies[0] {
		t.Errorf("requests of the query: %q, want the same body three times", bodies)
	}
	refuse, bodies = 100, nil
	mu.Unlock()
	_, err = query()
	var e *api.Error
	if !errors.As(err, &e) || e.Code != http.StatusTooManyRequests {
		t.Errorf("query past %d 429s: %v, want the 429", rateRetries, err)
	}
	mu.Lock()
	if len(bodies) != rateRetries+1 {
		t.Errorf("%d requests, want %d (the first and %d retries)", len(bodies), rateRetries+1, rateRetries)
	}
	mu.Unlock()
}

// TestServerTimeout: a server that takes the connection and never
// answers fails query --server and mcp --server after serverTimeout, not
// never.
func TestServerTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hung := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hung:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hung)
	old := serverTimeout
	serverTimeout = 300 * time.Millisecond
	defer func() { serverTimeout = old }()
	for _, args := range [][]string{
		{"query", "--server", srv.URL, "--repo", "shop", "cart total"},
		{"mcp", "--server", srv.URL},
	} {
		stdin = strings.NewReader("")
		start := time.Now()
		err := run(ctx, args, io.Discard, io.Discard)
		if err == nil {
			t.Errorf("%s against a server that never answers: no error", args[0])
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s took %s against a server that never answers", args[0], d)
		}
	}
}
