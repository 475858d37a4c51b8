package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/testrepo"
)

// shopStore indexes testrepo.Small as acme/shop and a second repository,
// acme/billing, whose invoice code calls its own helpers.
func shopStore(t testing.TB) *blob.Bucket {
	t.Helper()
	ctx := context.Background()
	store := blob.NewMem()
	shop := testrepo.New(t)
	shop.Commit("initial", testrepo.Small)
	if _, err := index.Build(ctx, store, shop.Dir, index.Options{Tenant: "acme", Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	billing := testrepo.New(t)
	billing.Commit("initial", map[string]string{
		"go.mod": "module example.com/billing\n\ngo 1.22\n",
		"invoice/invoice.go": `// Package invoice renders invoices.
package invoice

import "example.com/billing/tax"

// RenderInvoice formats an invoice with its VAT line.
func RenderInvoice(net int) string {
	return "total " + tax.VATLine(net)
}
`,
		"tax/tax.go": `// Package tax computes value added tax.
package tax

import "strconv"

// VATLine returns the VAT line of a net amount in cents.
func VATLine(net int) string {
	return strconv.Itoa(net * 19 / 100)
}
`,
	})
	if _, err := index.Build(ctx, store, billing.Dir, index.Options{Tenant: "acme", Name: "billing"}); err != nil {
		t.Fatal(err)
	}
	return store
}

// bearer adds an API key to every request.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

func connectHTTP(ctx context.Context, t *testing.T, url, key string) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url + "/v1/mcp", HTTPClient: &http.Client{Transport: bearer{key, http.DefaultTransport}}, MaxRetries: -1}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	return cl.Connect(ctx, tr, nil)
}

func call(ctx context.Context, t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if out != nil && !res.IsError {
		data, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s: structured content: %v", tool, err)
		}
	}
	return res
}

var text = api.ToolText

// CheckTools calls every tool once against acme's two repositories and
// checks what a model would rely on. Both transports' tests run it.
func CheckTools(ctx context.Context, t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
		if len(tool.Description) < 60 {
			t.Errorf("tool %s: description %q too thin for a model", tool.Name, tool.Description)
		}
		schema, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(string(schema), `"properties"`) {
			t.Errorf("tool %s: input schema %s has no properties", tool.Name, schema)
		}
	}
	slices.Sort(names)
	if want := []string{"impact", "read", "references", "repos", "search", "symbol"}; !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}

	var repos api.ReposOutput
	call(ctx, t, cs, "repos", nil, &repos)
	if repos.Tenant != "acme" || len(repos.Repos) != 2 || repos.Repos[0].Repo != "billing" || repos.Repos[1].Repo != "shop" || repos.Repos[1].Files == 0 || len(repos.Repos[1].Commit) != 40 {
		t.Fatalf("repos = %+v", repos)
	}

	// Org-wide search: one ranking over both repositories.
	var so api.SearchOutput
	res := call(ctx, t, cs, "search", map[string]any{"query": "VAT line of an invoice total and the cart total", "budget": 3000}, &so)
	if res.IsError {
		t.Fatalf("search: %s", text(res))
	}
	inRepo := map[string]bool{}
	for _, c := range so.Chunks {
		inRepo[c.Repo] = true
		if !strings.HasPrefix(c.Provenance, c.Repo+"@") || !strings.Contains(c.Provenance, ":"+c.Path+"#L") {
			t.Errorf("chunk provenance %q does not name %s:%s", c.Provenance, c.Repo, c.Path)
		}
	}
	if !inRepo["shop"] || !inRepo["billing"] || so.Tokens > 3000 || !strings.Contains(text(res), "billing@") {
		t.Fatalf("search over * gave repos %v, %d tokens; want chunks of both within 3000", inRepo, so.Tokens)
	}

	// A history question gets the commits of the files it answers with,
	// at the head of the context; over several repositories each names
	// its repository.
	for _, repos := range [][]string{{"shop"}, {"*"}} {
		call(ctx, t, cs, "search", map[string]any{"query": "what changed recently in the price table", "repos": repos, "budget": 3000}, &so)
		head := "// history of shop@"
		if repos[0] == "*" {
			head = "// history of 2 repositories"
		}
		if so.Trigger != "TEMPORAL_HISTORY" || len(so.Commits) == 0 || so.Commits[0].Subject != "initial" || !strings.HasPrefix(so.Context, head) {
			t.Fatalf("history question over %v: trigger %s, commits %+v, context %.120q", repos, so.Trigger, so.Commits, so.Context)
		}
		if wantRepo := map[string]string{"shop": "", "*": "shop"}[repos[0]]; so.Commits[0].Repo != wantRepo || !slices.Contains(so.Commits[0].Files, "price/price.go") {
			t.Errorf("history question over %v: first commit %+v, want repo %q and price/price.go", repos, so.Commits[0], wantRepo)
		}
	}

	// A budget left out is the default; 0 or a negative one is an error,
	// not a silent default: the input schema's range refuses it, naming
	// the argument.
	call(ctx, t, cs, "search", map[string]any{"query": "cart total"}, &so)
	if so.Budget != 6000 {
		t.Errorf("search without a budget packed to %d, want the default 6000", so.Budget)
	}
	for _, b := range []int{0, -5, 100_001} {
		res := call(ctx, t, cs, "search", map[string]any{"query": "cart total", "budget": b}, nil)
		if !res.IsError || !strings.HasPrefix(text(res), "invalid arguments: argument budget: ") {
			t.Errorf("search with budget %d: want a tool error naming the budget, got %q", b, text(res))
		}
	}

	var sym api.SymbolOutput
	call(ctx, t, cs, "symbol", map[string]any{"name": "Lookup"}, &sym)
	if len(sym.Definitions) != 1 || sym.Definitions[0].Path != "price/price.go" || !strings.Contains(sym.Definitions[0].Body, "return table[sku]") || !strings.HasPrefix(sym.Definitions[0].Provenance, "shop@") {
		t.Fatalf("symbol Lookup = %+v", sym)
	}

	var refs api.ReferencesOutput
	call(ctx, t, cs, "references", map[string]any{"name": "Lookup", "repos": []string{"shop"}}, &refs)
	if len(refs.References) == 0 || refs.References[0].Path != "cart/cart.go" || refs.References[0].Via != "call" {
		t.Fatalf("references Lookup = %+v, want the call from cart/cart.go", refs)
	}
	call(ctx, t, cs, "references", map[string]any{"path": "tax/tax.go"}, &refs)
	if len(refs.References) == 0 || refs.References[0].Path != "invoice/invoice.go" {
		t.Fatalf("references tax/tax.go = %+v, want invoice/invoice.go", refs)
	}

	var imp api.ImpactOutput
	call(ctx, t, cs, "impact", map[string]any{"path": "price/price.go"}, &imp)
	if len(imp.Targets) != 1 || len(imp.Files) != 1 || imp.Files[0].Path != "cart/cart.go" || imp.Files[0].Depth != 1 {
		t.Fatalf("impact price/price.go = %+v, want cart/cart.go at depth 1", imp)
	}

	var rd api.ReadOutput
	call(ctx, t, cs, "read", map[string]any{"repo": "shop", "path": "price/price.go", "start_line": 7, "end_line": 9}, &rd)
	if rd.Text != "func Lookup(sku string) int {\n\treturn table[sku]\n}\n" || rd.TotalLines != 9 || !strings.HasSuffix(rd.Provenance, ":price/price.go#L7-9") {
		t.Fatalf("read = %+v", rd)
	}
	for _, p := range []string{"../../../etc/passwd", "/etc/passwd", "price/../../x", "cart/../../../etc/hosts", "nope.go"} {
		res := call(ctx, t, cs, "read", map[string]any{"repo": "shop", "path": p}, nil)
		if !res.IsError || strings.Contains(text(res), "root:") {
			t.Errorf("read %q: want a tool error, got %q", p, text(res))
		}
	}
	// A path that cleans to an indexed file is that file, still inside the repository.
	call(ctx, t, cs, "read", map[string]any{"repo": "shop", "path": "cart/../price/price.go"}, &rd)
	if !strings.Contains(rd.Text, "package price") {
		t.Errorf("read cart/../price/price.go = %q", rd.Text)
	}
}

func TestMCPStreamableHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := shopStore(t)
	keys := api.Keys{api.HashKey("acme-key"): "acme", api.HashKey("other-key"): "other"}
	srv := httptest.NewServer((&api.Server{Store: store, Routes: api.QueryRoutes, Keys: keys}).Handler())
	defer srv.Close()

	cs, err := connectHTTP(ctx, t, srv.URL, "acme-key")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := cs.InitializeResult(); got == nil || got.ServerInfo.Name != "codectx" {
		t.Fatalf("initialize = %+v", got)
	}
	CheckTools(ctx, t, cs)

	// Another tenant's key sees none of acme's code and may not name acme.
	other, err := connectHTTP(ctx, t, srv.URL, "other-key")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	res := call(ctx, t, other, "search", map[string]any{"query": "cart total", "tenant": "acme"}, nil)
	if !res.IsError || !strings.Contains(text(res), "not valid for tenant") {
		t.Fatalf("other tenant naming acme: %q", text(res))
	}
	res = call(ctx, t, other, "read", map[string]any{"repo": "shop", "path": "price/price.go"}, nil)
	if !res.IsError || strings.Contains(text(res), "table[sku]") {
		t.Fatalf("other tenant read acme's file: %q", text(res))
	}
	var repos api.ReposOutput
	call(ctx, t, other, "repos", nil, &repos)
	if repos.Tenant != "other" || len(repos.Repos) != 0 {
		t.Fatalf("other tenant's repos = %+v", repos)
	}

	// A wrong key or none does not get past the transport.
	for _, key := range []string{"wrong-key", ""} {
		if cs, err := connectHTTP(ctx, t, srv.URL, key); err == nil {
			cs.Close()
			t.Errorf("key %q: connected", key)
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("key %q: HTTP %d, want 401", key, resp.StatusCode)
		}
	}
}

// TestMCPInProcess runs the same tools over the SDK's in-memory transport:
// what `codectx mcp --data` serves over stdio.
func TestMCPInProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := (&api.Server{Store: shopStore(t)}).MCPServer(api.Principal{Tenant: "acme"})
	CheckTools(ctx, t, api.InMemoryTools(ctx, t, srv))
}

// TestMCPServersPerCaller: /v1/mcp keeps one MCP server per caller; two
// tenants' clients calling at once, over fresh sessions each time, each
// get only their own tenant's code (run under -race in make race).
func TestMCPServersPerCaller(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := shopStore(t)
	beta := testrepo.New(t)
	beta.Commit("initial", map[string]string{"cart.go": "// " + betaSecret + "\npackage ledger\n\n// CartTotal is beta's cart total: " + betaSecret + ".\nfunc CartTotal() string { return \"" + betaSecret + "\" }\n"})
	if _, err := index.Build(ctx, store, beta.Dir, index.Options{Tenant: "beta", Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	keys := api.Keys{api.HashKey("acme-key"): "acme", api.HashKey("beta-key"): "beta"}
	srv := httptest.NewServer((&api.Server{Store: store, Routes: api.QueryRoutes, Keys: keys, Limits: api.Limits{Rate: -1, TenantConcurrency: -1}}).Handler())
	defer srv.Close()
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 8 {
				tenant, own, other := "acme", "shopping cart", betaSecret
				if (g+i)%2 == 1 {
					tenant, own, other = "beta", betaSecret, "shopping cart"
				}
				cs, err := connectHTTP(ctx, t, srv.URL, tenant+"-key")
				if err != nil {
					t.Error(err)
					return
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"query": "cart total", "repos": []string{"shop"}}})
				cs.Close()
				if err != nil || res.IsError {
					t.Errorf("%s: %v %v", tenant, err, res)
					return
				}
				if got := text(res); !strings.Contains(got, own) || strings.Contains(got, other) {
					t.Errorf("%s's search: %.300q, want its own code only", tenant, got)
					return
				}
			}
		})
	}
	wg.Wait()
}
