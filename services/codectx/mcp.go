package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"codectx/pkg/api"
	"codectx/pkg/index"
)

// stdin is what `codectx mcp` reads its MCP requests from; tests replace it.
var stdin io.Reader = os.Stdin

// runMCP serves the MCP tools over stdio: from the local data directory,
// or, with --server, by forwarding every call to a running server's
// /v1/mcp with the API key of $CODECTX_API_KEY.
func runMCP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", dataDir(), "data directory to read the index from ($"+envData+")")
	tenant := fs.String("tenant", index.DefaultTenant, "tenant whose repositories the tools see (with --data)")
	server := fs.String("server", env(envServer, ""), "forward to the /v1/mcp of a running codectx up or query service at this URL ($"+envServer+"); its key from $"+envAPIKey)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: codectx mcp [--data DIR [--tenant T] | --server URL]

Serves codectx to a coding agent as an MCP server over stdio (newline-
delimited JSON-RPC on stdin and stdout): the tools search, symbol,
references, impact, read and repos. With --data it reads the index in
the data directory; with --server it forwards every call to the server's
/v1/mcp, authenticated with $`+envAPIKey+`. Logs go to stderr.`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if !index.ValidTenant(*tenant) {
		return fmt.Errorf("mcp: invalid tenant %q", *tenant)
	}
	if err := dataOrServer(fs, server); err != nil {
		return err
	}
	if *server != "" {
		// The URL as every other command takes it: 127.0.0.1:7700, as
		// $CODECTX_SERVER is often set, names http://127.0.0.1:7700.
		cl, err := serverClient(*server)
		if err != nil {
			return fmt.Errorf("mcp: %w", err)
		}
		t := stdioTransport(stdin, stdout)
		srv, closeRemote, err := mcpProxy(ctx, cl.BaseURL, cl.Key)
		if err != nil {
			return err
		}
		defer closeRemote()
		return ignoreEOF(srv.Run(ctx, t))
	}
	store, err := openData(*data)
	if err != nil {
		return err
	}
	t := stdioTransport(stdin, stdout)
	srv := (&api.Server{Store: store, Log: newLogger(stderr)}).MCPServer(api.Principal{Tenant: *tenant, Operator: true})
	return ignoreEOF(srv.Run(ctx, t))
}

// ignoreEOF treats the client closing stdin, or the context ending, as a
// normal end of the session.
func ignoreEOF(err error) error {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return fmt.Errorf("mcp: %w", err)
}

// bearerTransport adds the API key to every request.
type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.key != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// deniedTransport notes whether the server answered 401: the MCP client's
// error names only the status text.
type deniedTransport struct {
	next   http.RoundTripper
	denied atomic.Bool
}

func (d *deniedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := d.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		d.denied.Store(true)
	}
	return resp, err
}

// mcpProxy connects to the server's /v1/mcp and returns a local MCP
// server that offers the same tools and forwards each call.
func mcpProxy(ctx context.Context, url, key string) (*mcp.Server, func(), error) {
	endpoint := strings.TrimSuffix(url, "/") + "/v1/mcp"
	cl := mcp.NewClient(&mcp.Implementation{Name: "codectx-mcp", Version: api.Version}, nil)
	// A 429 (the tenant over its rate) is retried after its Retry-After,
	// as the other commands do, rather than failing the agent's call.
	dt := &deniedTransport{next: rateRetry{next: bearerTransport{key}, tries: rateRetries}}
	remote, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: dt, Timeout: serverTimeout}, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	switch {
	case err == nil:
	case dt.denied.Load():
		return nil, nil, fmt.Errorf("mcp: connect to %s: %s: %w", endpoint, keyAdvice(key), err)
	default:
		return nil, nil, fmt.Errorf("mcp: connect to %s: %w", endpoint, err)
	}
	init := remote.InitializeResult()
	srv := mcp.NewServer(&mcp.Implementation{Name: "codectx", Version: api.Version}, &mcp.ServerOptions{Instructions: init.Instructions})
	for tool, err := range remote.Tools(ctx, nil) {
		if err != nil {
			remote.Close()
			return nil, nil, fmt.Errorf("mcp: list tools of %s: %w", endpoint, err)
		}
		srv.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := remote.CallTool(ctx, &mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments})
			if err != nil && dt.denied.Load() {
				// The key was refused after the session began (revoked):
				// the client's error says only "Unauthorized", and every
				// later call "client is closing". Say which key and what
				// to do, as at the start.
				err = fmt.Errorf("%s: %s: %w", endpoint, keyAdvice(key), err)
			}
			return res, err
		})
	}
	return srv, func() { remote.Close() }, nil
}
