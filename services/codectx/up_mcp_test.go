package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"codectx/pkg/api"
)

// TestUpMCP drives `codectx up` with keys on as an agent would: the SDK
// client over Streamable HTTP at /v1/mcp with the tenant's key, a session
// kept in up's embedded NATS KV, and a wrong key refused.
func TestUpMCP(t *testing.T) {
	repoDir, commit := gitFixture(t)
	data := t.TempDir()
	keys := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keys, []byte(`{"`+api.HashKey("agent-key")+`": "default"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	up := startUp(t, "--data", data, "--listen", addr, "--api-keys", keys, "--index", repoDir)
	up.waitFor(t, "indexed line", 3*time.Minute, func() bool { return strings.Contains(up.out.String(), "indexed shop@") })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	connect := func(key string) (*mcp.ClientSession, error) {
		tr := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/v1/mcp", HTTPClient: &http.Client{Transport: bearerTransport{key}}, MaxRetries: -1}
		return mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, tr, nil)
	}
	if cs, err := connect("wrong"); err == nil {
		cs.Close()
		t.Fatal("a wrong key connected")
	}
	cs, err := connect("agent-key")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var so api.SearchOutput
	callTool(ctx, t, cs, "search", map[string]any{"query": "how are refunds issued to the customer", "budget": 1500, "session": "chat-1"}, &so)
	if len(so.Chunks) == 0 || so.Chunks[0].Path != "payment/refund.go" || !strings.HasPrefix(so.Chunks[0].Provenance, "shop@"+commit[:12]+":payment/refund.go#L") {
		t.Fatalf("search = %+v", so.Chunks)
	}
	var again api.SearchOutput
	callTool(ctx, t, cs, "search", map[string]any{"query": "IssueRefund refund window", "budget": 1500, "session": "chat-1"}, &again)
	for _, c := range again.Chunks {
		for _, f := range so.Chunks {
			if c.Path == f.Path && c.StartLine <= f.EndLine && f.StartLine <= c.EndLine {
				t.Errorf("second search of the session resent %s", c.Provenance)
			}
		}
	}
	if again.TokensSaved == 0 || len(again.AlreadySent) == 0 {
		t.Errorf("second search: saved %d tokens, named %v; want the first's chunks named", again.TokensSaved, again.AlreadySent)
	}
	var rd api.ReadOutput
	callTool(ctx, t, cs, "read", map[string]any{"repo": "shop", "path": "README.md"}, &rd)
	if !strings.HasPrefix(rd.Text, "# shop") {
		t.Errorf("read README.md = %q", rd.Text)
	}
}
