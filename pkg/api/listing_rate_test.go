package api

import (
	"net/http"
	"testing"
)

// Listing a tenant's repositories reads each one's HEAD and loads its
// segment (and, on a server with an orchestrator, asks Temporal for each
// one's status); the MCP repos tool then builds the cross-repository
// graph over all of them. That is what a query over them costs, so it
// pays what a query over them does (TestRateCountsRepositories): before,
// GET /v1/repos?limit=500 and the repos tool over every repository cost
// one request, whatever their number.
func TestRateCountsRepositoriesListed(t *testing.T) {
	const repos = 1 + 3*reposPerToken
	store := manyRepos(t, "", repos, "package a\n\n// ParseToken parses.\nfunc ParseToken() {}\n")
	mcpHdr := map[string]string{"Accept": "application/json, text/event-stream"}
	for _, c := range []struct {
		name, method, path, ctype, body string
		hdr                             map[string]string
	}{
		{"GET /v1/repos", "GET", "/v1/repos?limit=500", "", "", nil},
		{"MCP repos", "POST", "/v1/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repos","arguments":{}}}`, mcpHdr},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes, Limits: Limits{Rate: 0.05, Burst: 4}})
			code, _, body := do(t, c.method, ts.URL+c.path, c.ctype, c.body, c.hdr)
			if code != http.StatusOK {
				t.Fatalf("%s over %d repositories = %d %.300s", c.name, repos, code, body)
			}
			if code, _, _ := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"repo":"r00","query":"ParseToken"}`, nil); code != http.StatusTooManyRequests {
				t.Errorf("a query after %s over %d repositories within a burst of 4 = %d, want 429", c.name, repos, code)
			}
		})
	}
	// A page of one repository costs one request: a client paging through
	// them one at a time is not charged twice.
	ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes, Limits: Limits{Rate: 0.05, Burst: 2}})
	if code, _, body := do(t, "GET", ts.URL+"/v1/repos?limit=1", "", "", nil); code != http.StatusOK {
		t.Fatalf("a page of one = %d %s", code, body)
	}
	if code, _, body := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"repo":"r00","query":"ParseToken"}`, nil); code != http.StatusOK {
		t.Errorf("a query after a page of one within a burst of 2 = %d %s, want 200", code, body)
	}
}
