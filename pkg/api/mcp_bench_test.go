package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPCall times one tools/call of the repos tool, whose own work
// is small, two ways side by side: over /v1/mcp (HTTP, the key checked,
// a stateless session per request on the caller's server), and over one
// in-memory session of one server, the peer without those costs.
func BenchmarkMCPCall(b *testing.B) {
	ctx := context.Background()
	store := manyRepos(&testing.T{}, "acme", 1, "package a\n\n// ParseToken parses.\nfunc ParseToken() {}\n")
	keys := Keys{HashKey("acme-key"): "acme"}
	s := &Server{Store: store, Routes: QueryRoutes, Keys: keys, Limits: Limits{Rate: -1}}
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repos","arguments":{}}}`
	b.Run("over /v1/mcp", func(b *testing.B) {
		ts := httptest.NewServer(s.Handler())
		defer ts.Close()
		for b.Loop() {
			req, _ := http.NewRequest("POST", ts.URL+"/v1/mcp", strings.NewReader(call))
			req.Header.Set("Authorization", "Bearer acme-key")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
	b.Run("in-memory, one server", func(b *testing.B) {
		cs := InMemoryTools(ctx, b, s.MCPServer(Principal{Tenant: "acme"}))
		for b.Loop() {
			if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "repos", Arguments: map[string]any{}}); err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
	})
}
