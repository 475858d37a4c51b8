package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/index"
)

// TestIndexOneStopped: up stopping (Ctrl-C) while an --index snapshot
// runs says it is not finished and goes on at the next start (it said
// nothing); stopping before the request was taken says not started; a
// refusal says failed, in the API's words.
func TestIndexOneStopped(t *testing.T) {
	statuses := make(chan struct{}, 100)
	var refuse atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/index":
			if refuse.Load() {
				w.WriteHeader(http.StatusConflict)
				json.NewEncoder(w).Encode(map[string]string{"error": "repository shop is indexed from another location"})
				return
			}
			w.WriteHeader(http.StatusAccepted)
			json.NewEncoder(w).Encode(api.IndexResponse{Tenant: "default", Repo: "shop", RunID: "run-1"})
		default: // status: indexing, for ever
			statuses <- struct{}{}
			json.NewEncoder(w).Encode(api.RepoStatus{Tenant: "default", Repo: "shop", State: api.StateIndexing, Received: 1})
		}
	}))
	defer srv.Close()
	cl := &api.Client{BaseURL: srv.URL}
	loc := t.TempDir()

	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan struct{})
	go func() { indexOne(ctx, cl, "default", loc, &out); close(done) }()
	select {
	case <-statuses:
	case <-time.After(10 * time.Second):
		t.Fatal("no status asked for")
	}
	cancel()
	<-done
	if got := out.String(); !strings.Contains(got, "indexing default/shop") || !strings.Contains(got, "not finished: up is stopping; its snapshot goes on when up starts again") {
		t.Errorf("stopped while indexing: %q", got)
	}

	var before syncBuffer
	indexOne(ctx, cl, "default", loc, &before) // ctx already ended
	if got := before.String(); !strings.Contains(got, "not started: up is stopping") {
		t.Errorf("stopped before the request: %q", got)
	}

	refuse.Store(true)
	var failed syncBuffer
	indexOne(context.Background(), cl, "default", loc, &failed)
	if got := failed.String(); !strings.Contains(got, "failed: repository shop is indexed from another location") {
		t.Errorf("refused: %q", got)
	}
}

// TestSplitIndexArg: up --index takes LOCATION or NAME=LOCATION; a value
// that is an existing path, or whose left side is no repository name (a
// URL's query), is a location.
func TestSplitIndexArg(t *testing.T) {
	dir := t.TempDir()
	odd := filepath.Join(dir, "a=b")
	if err := os.Mkdir(odd, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, name, loc string }{
		{"../shop", "", "../shop"},
		{"shop-y=../y/shop", "shop-y", "../y/shop"},
		{"acme/shop=https://example.com/acme/shop.git", "acme/shop", "https://example.com/acme/shop.git"},
		{"https://example.com/x/y?ref=main", "", "https://example.com/x/y?ref=main"},
		{odd, "", odd},
		{"shop=", "", "shop="},
		{"../x=y", "", "../x=y"},
	} {
		if name, loc := splitIndexArg(c.in); name != c.name || loc != c.loc {
			t.Errorf("splitIndexArg(%q) = %q, %q; want %q, %q", c.in, name, loc, c.name, c.loc)
		}
	}
	// The name reaches the index request.
	got := make(chan api.IndexRequest, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			var req api.IndexRequest
			json.NewDecoder(r.Body).Decode(&req)
			got <- req
			w.WriteHeader(http.StatusAccepted)
			json.NewEncoder(w).Encode(api.IndexResponse{Tenant: "default", Repo: req.Repo, RunID: "run-1"})
			return
		}
		json.NewEncoder(w).Encode(api.RepoStatus{Tenant: "default", Repo: "shop-y", State: api.StateIdle, Received: 1, Covered: 1, Head: &index.Head{Commit: "abc"}})
	}))
	defer srv.Close()
	var out syncBuffer
	indexOne(context.Background(), &api.Client{BaseURL: srv.URL}, "default", "shop-y="+dir, &out)
	if r := <-got; r.Repo != "shop-y" || r.Location != dir {
		t.Errorf("index request %+v, want repo shop-y at %s", r, dir)
	}
}
