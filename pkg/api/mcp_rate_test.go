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

// An operator's MCP call is let in on the operators' own rate (its
// principal's payer): the cost of the repositories it reads is charged
// there too, not to the tenant it reads, whose own requests must go on
// being answered.
func TestMCPOperatorChargeNotOnTenant(t *testing.T) {
	store := manyRepos(t, "acme", 1+3*reposPerToken, "package a\n\n// ParseToken parses.\nfunc ParseToken() {}\n")
	for _, tool := range []string{
		`{"name":"search","arguments":{"query":"ParseToken","tenant":"acme","repos":["*"]}}`,
		`{"name":"symbol","arguments":{"name":"ParseToken","tenant":"acme"}}`,
	} {
		ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes, Keys: Keys{HashKey("op-key"): AllTenants, HashKey("acme-key"): "acme"}, Limits: Limits{Rate: 0.05, Burst: 4}})
		op := map[string]string{"Authorization": "Bearer op-key", "Accept": "application/json, text/event-stream"}
		if code, _, body := do(t, "POST", ts.URL+"/v1/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+tool+`}`, op); code != 200 {
			t.Fatalf("operator %s = %d %s", tool, code, body)
		}
		acme := map[string]string{"Authorization": "Bearer acme-key"}
		for i := range 2 {
			if code, _, body := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"tenant":"acme","repo":"r00","query":"ParseToken"}`, acme); code != 200 {
				t.Errorf("acme's request %d (burst 4) after an operator's %s = %d %s, want 200: the operator's call is not acme's", i+1, tool, code, body)
			}
		}
		// The operator paid: its own next call waits.
		if code, _, _ := do(t, "POST", ts.URL+"/v1/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, op); code != http.StatusTooManyRequests {
			t.Errorf("operator's call after %s over 13 repositories within a burst of 4 = %d, want 429", tool, code)
		}
	}
}

// An operator's REST request for a tenant is let in on the operator's
// rate and charged there for the repositories it reads, as its MCP calls
// are: the tenant's own requests go on being answered.
func TestRESTOperatorChargeNotOnTenant(t *testing.T) {
	store := manyRepos(t, "acme", 1+3*reposPerToken, "package a\n\n// ParseToken parses.\nfunc ParseToken() {}\n")
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/query", `{"tenant":"acme","repos":["*"],"query":"ParseToken"}`},
		{"GET", "/v1/repos?tenant=acme&limit=500", ""},
		{"POST", "/v1/references", `{"tenant":"acme","name":"ParseToken"}`},
	} {
		ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes, Keys: Keys{HashKey("op-key"): AllTenants, HashKey("acme-key"): "acme"}, Limits: Limits{Rate: 0.05, Burst: 4}})
		op := map[string]string{"Authorization": "Bearer op-key"}
		if code, _, body := do(t, c.method, ts.URL+c.path, "application/json", c.body, op); code != 200 {
			t.Fatalf("operator's %s %s = %d %s", c.method, c.path, code, body)
		}
		acme := map[string]string{"Authorization": "Bearer acme-key"}
		for i := range 2 {
			if code, _, body := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"tenant":"acme","repo":"r00","query":"ParseToken"}`, acme); code != 200 {
				t.Errorf("acme's request %d (burst 4) after an operator's %s %s = %d %s, want 200: the operator's request is not acme's", i+1, c.method, c.path, code, body)
			}
		}
		if code, _, _ := do(t, c.method, ts.URL+c.path, "application/json", c.body, op); code != http.StatusTooManyRequests {
			t.Errorf("operator's second %s %s over 13 repositories within a burst of 4 = %d, want 429", c.method, c.path, code)
		}
	}
}
