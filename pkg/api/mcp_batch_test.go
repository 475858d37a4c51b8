package api

import (
	"net/http"
	"strings"
	"testing"

	"codectx/pkg/blob"
)

// A JSON-RPC batch is refused on /v1/mcp: one HTTP request, one token of
// the tenant's rate, ran every call of the batch at once (audit 5: a 14 KB
// batch of 100 read calls grew the heap by 1 GB). A single call answers.
func TestMCPBatchRefused(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "")
	key := "mcp-batch-key"
	ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes, Keys: Keys{HashKey(key): "default"}})
	hdr := map[string]string{"Authorization": "Bearer " + key, "Accept": "application/json, text/event-stream"}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repos","arguments":{}}}`
	batch := " \n[" + call + "," + strings.Replace(call, `"id":1`, `"id":2`, 1) + "]"
	code, _, body := do(t, "POST", ts.URL+"/v1/mcp", "application/json", batch, hdr)
	if code != http.StatusBadRequest || strings.Contains(body, `"result"`) {
		t.Errorf("a batch of 2 tool calls = %d %.300s, want 400 and no result", code, body)
	}
	if code, _, body := do(t, "POST", ts.URL+"/v1/mcp", "application/json", call, hdr); code != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Errorf("a single tool call = %d %.300s, want 200 with a result", code, body)
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"query":"` + strings.Repeat("a", DefaultMCPBody) + `"}}}`
	if code, _, _ := do(t, "POST", ts.URL+"/v1/mcp", "application/json", big, hdr); code != http.StatusRequestEntityTooLarge {
		t.Errorf("an MCP body over the limit = %d, want 413", code)
	}
}
