package api

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/testrepo"
)

// Helpers of the MCP tests, exported for the api_test package too.

// InMemoryTools connects a client to srv over the SDK's in-memory
// transport, as `codectx mcp --data` serves it; both ends close with t.
func InMemoryTools(ctx context.Context, t testing.TB, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// ToolText is the text content of a tool's answer.
func ToolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// serveRepo commits files to a new repository, indexes it as tenant
// acme's repository name, and returns a server of the store.
func serveRepo(t *testing.T, name string, files map[string]string) *Server {
	t.Helper()
	repo := testrepo.New(t)
	repo.Commit("initial", files)
	store := blob.NewMem()
	if _, err := index.Build(context.Background(), store, repo.Dir, index.Options{Tenant: "acme", Name: name, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	s := &Server{Store: store}
	s.init()
	return s
}
