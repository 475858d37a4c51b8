package api

import (
	"net/http"
	"testing"

	"codectx/pkg/blob"
)

// An MCP request spends one request of its tenant's rate, as every other
// route does: with a burst of 2, two MCP calls in a row are both answered.
func TestMCPRateOnce(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "")
	key := "mcp-rate-key"
	ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes, Keys: Keys{HashKey(key): "default"}, Limits: Limits{Rate: 0.05, Burst: 2}})
	hdr := map[string]string{"Authorization": "Bearer " + key, "Accept": "application/json, text/event-stream"}
	for i := range 2 {
		code, _, body := do(t, "POST", ts.URL+"/v1/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, hdr)
		if code == http.StatusTooManyRequests {
			t.Fatalf("MCP request %d of a burst of 2 = 429 %s: each MCP request is charged twice", i+1, body)
		}
	}
	if code, _, _ := do(t, "POST", ts.URL+"/v1/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, hdr); code != http.StatusTooManyRequests {
		t.Errorf("third MCP request over a burst of 2 = %d, want 429", code)
	}
}
