package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/api"
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
