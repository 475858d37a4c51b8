package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"codectx/pkg/api"
	"codectx/pkg/testrepo"
)

// stdioSession runs `codectx mcp ARGS` in-process on pipes, as an agent
// would start it, and connects the SDK's client to its stdin and stdout.
func stdioSession(ctx context.Context, t *testing.T, args ...string) *mcp.ClientSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stdin = inR
	t.Cleanup(func() { stdin = nil })
	done := make(chan error, 1)
	go func() {
		var stderr strings.Builder
		err := run(ctx, append([]string{"mcp"}, args...), outW, &stderr)
		outW.Close()
		if err != nil {
			t.Logf("mcp stderr: %s", stderr.String())
		}
		done <- err
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		inW.Close()
		if err := <-done; err != nil {
			t.Errorf("codectx mcp: %v", err)
		}
	})
	return cs
}

func callTool(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) string {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("%s: tool error %s", name, text.String())
	}
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
	return text.String()
}

// checkStdio lists the tools and calls search, symbol and read through a
// stdio session over a data dir or server holding acme/shop.
func checkStdio(ctx context.Context, t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil || len(lt.Tools) != 6 {
		t.Fatalf("tools: %v, %v", lt, err)
	}
	var repos api.ReposOutput
	callTool(ctx, t, cs, "repos", nil, &repos)
	if len(repos.Repos) != 1 || repos.Repos[0].Repo != "shop" {
		t.Fatalf("repos = %+v", repos)
	}
	var so api.SearchOutput
	text := callTool(ctx, t, cs, "search", map[string]any{"query": "how is the cart total computed", "budget": 2000}, &so)
	if len(so.Chunks) == 0 || !strings.Contains(text, "shop@") || !strings.Contains(text, "func (c *Cart) Total") {
		t.Fatalf("search: %+v\n%s", so, text)
	}
	var sym api.SymbolOutput
	callTool(ctx, t, cs, "symbol", map[string]any{"name": "Cart.Total"}, &sym)
	if len(sym.Definitions) != 1 || sym.Definitions[0].Path != "cart/cart.go" {
		t.Fatalf("symbol = %+v", sym)
	}
	var rd api.ReadOutput
	callTool(ctx, t, cs, "read", map[string]any{"repo": "shop", "path": "go.mod"}, &rd)
	if rd.Text != testrepo.Small["go.mod"] {
		t.Fatalf("read go.mod = %q", rd.Text)
	}
}

func TestMCPStdioData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := shopData(t)
	checkStdio(ctx, t, stdioSession(ctx, t, "--data", data, "--tenant", "acme"))
}

// TestMCPStdioServer runs `codectx mcp --server`: stdio in front, the
// server's Streamable HTTP /v1/mcp behind, with the tenant's key.
func TestMCPStdioServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := shopData(t)
	store, err := openStore(data)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&api.Server{Store: store, Routes: api.QueryRoutes, Keys: api.Keys{api.HashKey("acme-key"): "acme"}}).Handler())
	defer srv.Close()

	// A 401 says where the key comes from: not set, or refused.
	for _, c := range []struct{ key, want string }{
		{"", "the server wants an API key (read from $" + envAPIKey + ", which is not set)"},
		{"wrong", "the server refused the API key read from $" + envAPIKey},
	} {
		t.Setenv(envAPIKey, c.key)
		var stderr strings.Builder
		stdin = strings.NewReader("")
		if err := run(ctx, []string{"mcp", "--server", srv.URL}, io.Discard, &stderr); err == nil || !strings.Contains(err.Error(), "connect") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mcp --server with key %q: %v, want %q", c.key, err, c.want)
		}
	}
	// Another failure names no key.
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	stdin = strings.NewReader("")
	if err := run(ctx, []string{"mcp", "--server", down.URL}, io.Discard, io.Discard); err == nil || strings.Contains(err.Error(), envAPIKey) {
		t.Errorf("mcp --server to a closed port: %v, want an error that names no key", err)
	}
	t.Setenv(envAPIKey, "acme-key")
	checkStdio(ctx, t, stdioSession(ctx, t, "--server", srv.URL))
}

// TestMCPStdioServerNoScheme: `codectx mcp --server` takes the server as
// index, query and repos take it, host:port naming http://host:port (the
// README sets $CODECTX_SERVER so), and refuses another scheme with the
// same advice.
func TestMCPStdioServerNoScheme(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := shopData(t)
	store, err := openStore(data)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&api.Server{Store: store, Routes: api.QueryRoutes, Keys: api.Keys{api.HashKey("acme-key"): "acme"}}).Handler())
	defer srv.Close()
	t.Setenv(envAPIKey, "acme-key")
	stdin = strings.NewReader("")
	if err := run(ctx, []string{"mcp", "--server", "ftp://" + strings.TrimPrefix(srv.URL, "http://")}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "want http://HOST:PORT") {
		t.Errorf("mcp --server ftp://...: %v, want the advice of the other commands", err)
	}
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	checkStdio(ctx, t, stdioSession(ctx, t, "--server", hostPort))
	t.Setenv(envServer, hostPort)
	checkStdio(ctx, t, stdioSession(ctx, t))
}

// TestMCPStdioServerKeyRevoked: a key the server stops taking in the
// middle of a session (revoked) fails the agent's calls with the advice
// the start gives for a refused key, not the bare "Unauthorized".
func TestMCPStdioServerKeyRevoked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := openStore(shopData(t))
	if err != nil {
		t.Fatal(err)
	}
	h := (&api.Server{Store: store, Routes: api.QueryRoutes, Keys: api.Keys{api.HashKey("acme-key"): "acme"}}).Handler()
	var revoked atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if revoked.Load() {
			http.Error(w, `{"error":"unknown API key"}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	t.Setenv(envAPIKey, "acme-key")
	cs := stdioSession(ctx, t, "--server", srv.URL)
	var repos api.ReposOutput
	callTool(ctx, t, cs, "repos", nil, &repos)
	revoked.Store(true)
	for range 2 {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "repos", Arguments: map[string]any{}})
		if err == nil || !strings.Contains(err.Error(), "the server refused the API key read from $"+envAPIKey) {
			t.Errorf("a call after the key was revoked: %v, want the advice about $%s", err, envAPIKey)
		}
	}
}

// TestMCPStdioBadLines: a line that is not JSON, or JSON but no JSON-RPC
// message, or longer than the bound, gets a JSON-RPC error and the session
// goes on (the SDK's transport ended it, and the agent's next write broke
// its pipe).
func TestMCPStdioBadLines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := shopData(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stdin = inR
	t.Cleanup(func() { stdin = nil })
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"mcp", "--data", data, "--tenant", "acme"}, outW, io.Discard)
		outW.Close()
		done <- err
	}()
	dec := json.NewDecoder(outR)
	type reply struct {
		ID     any                 `json:"id"`
		Error  *struct{ Code int } `json:"error"`
		Result json.RawMessage     `json:"result"`
	}
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatalf("write %.40q: %v", line, err)
		}
	}
	next := func() reply {
		t.Helper()
		var rp reply
		if err := dec.Decode(&rp); err != nil {
			t.Fatalf("read a reply: %v", err)
		}
		return rp
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"agent","version":"1"}}}`)
	if rp := next(); rp.Error != nil || rp.ID != float64(1) {
		t.Fatalf("initialize: %+v", rp)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, c := range []struct {
		line string
		code int
	}{
		{`{not json`, rpcParseError},
		{`{"a":1} {"b":2}`, rpcParseError},
		{`{"hello":"world"}`, rpcInvalidRequest},
		{`{"jsonrpc":"1.0","id":2,"method":"tools/list"}`, rpcInvalidRequest},
		{`[]`, rpcInvalidRequest},
		{`[1,2]`, rpcInvalidRequest},
		{`"x"`, rpcInvalidRequest},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":"` + strings.Repeat("x", maxStdioLine) + `"}`, rpcInvalidRequest},
	} {
		send(c.line)
		if rp := next(); rp.Error == nil || rp.Error.Code != c.code || rp.ID != nil {
			t.Errorf("%.40q: %+v, want error %d with id null", c.line, rp, c.code)
		}
	}
	// Blank lines are no messages; the session still answers.
	send("")
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"symbol","arguments":{"name":"Cart.Total"}}}`)
	rp := next()
	if rp.Error != nil || rp.ID != float64(4) || !strings.Contains(string(rp.Result), "cart/cart.go") {
		t.Fatalf("symbol after bad lines: %+v %s", rp, rp.Result)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatalf("codectx mcp: %v", err)
	}
}

// TestMCPStdioPipedAnswersAll: requests piped into `codectx mcp` with
// stdin closed after them are all answered before it exits: it ended at
// the end of stdin, and the answers of calls still running were lost.
func TestMCPStdioPipedAnswersAll(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := shopData(t)
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
	for i := range 5 {
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"search","arguments":{"query":"cart total %d","budget":3000}}}`, 10+i, i))
	}
	stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	t.Cleanup(func() { stdin = nil })
	var out strings.Builder
	if err := run(ctx, []string{"mcp", "--data", data, "--tenant", "acme"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	got := map[float64]bool{}
	dec := json.NewDecoder(strings.NewReader(out.String()))
	for {
		var rp struct {
			ID    any             `json:"id"`
			Error json.RawMessage `json:"error"`
		}
		if err := dec.Decode(&rp); err != nil {
			break
		}
		if id, ok := rp.ID.(float64); ok && rp.Error == nil {
			got[id] = true
		}
	}
	for _, id := range []float64{1, 10, 11, 12, 13, 14} {
		if !got[id] {
			t.Errorf("no answer to request %v; answered %v", id, got)
		}
	}
}

// shopData is a data directory holding tenant acme's repository shop
// (testrepo.Small), indexed by the CLI.
func shopData(t *testing.T) string {
	t.Helper()
	r := testrepo.New(t)
	r.Commit("initial", testrepo.Small)
	data := t.TempDir()
	if _, err := runCLI(t, "index", "--data", data, "--tenant", "acme", "--name", "shop", r.Dir); err != nil {
		t.Fatal(err)
	}
	return data
}
