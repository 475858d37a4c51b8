package api

import (
	"context"
	"errors"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/segment"
)

// failingDense is a dense arm whose embedder or vector store is down.
type failingDense struct{}

func (failingDense) Search(context.Context, *segment.Segment, string, int) ([]int, error) {
	return nil, errors.New("embed query: server answered 500 Internal Server Error: down")
}

// TestQueryDenseDown: when the dense arm fails (the embedder or the
// vector store is down), a query that did not name its arms is answered
// by the other arms and says the dense arm is missing; one that asked for
// the dense arm fails with 503, a fault of the server, not 400.
func TestQueryDenseDown(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "")
	s := &Server{Store: store, Routes: AllRoutes, Dense: failingDense{}}
	ts, _ := newServer(t, s)

	code, m := post(t, ts.URL+"/v1/query", `{"repo":"demo","query":"where is ParseToken defined"}`)
	if code != 200 {
		t.Fatalf("query with the dense arm down: %d %v, want 200 from the other arms", code, m["error"])
	}
	if chunks, _ := m["chunks"].([]any); len(chunks) == 0 {
		t.Errorf("query with the dense arm down returned no chunks")
	}
	if d, _ := m["degraded"].(string); !strings.Contains(d, "dense") || !strings.Contains(d, "down") {
		t.Errorf("degraded = %q, want the dense arm's failure", d)
	}
	for _, a := range m["arms"].([]any) {
		if a == "dense" {
			t.Errorf("arms %v list the failed dense arm", m["arms"])
		}
	}

	code, m = post(t, ts.URL+"/v1/query", `{"repo":"demo","query":"where is ParseToken defined","arms":["dense"]}`)
	if msg, _ := m["error"].(string); code != 503 || !strings.Contains(msg, "dense") {
		t.Errorf("dense-only query with the dense arm down: %d %q, want 503 naming the dense arm", code, msg)
	}
}
