package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"codectx/pkg/api"
)

// betaInjected marks the code of beta's repository that claims the module
// path and package name of acme's library.
const betaInjected = "BetaInjectedRounding9c1e"

// The cross-repository graph, attacked on a running up: beta indexes a
// repository that claims acme's library module (github.com/acme/money)
// and one that imports acme's modules (example.com/shop/cart and the
// library). No import ever resolves across tenants: beta's impact,
// references and org-wide searches reach none of acme's files, and acme's
// org-wide search and impact reach acme's library, never beta's twin.
func TestSecurityCrossRepo(t *testing.T) {
	s := startSecureUp(t)
	tmp := t.TempDir()
	money := map[string]string{
		"go.mod":         "module github.com/acme/money\n\ngo 1.22\n",
		"round/round.go": "// Package round rounds amounts.\npackage round\n\n// HalfEven rounds to the nearest even integer.\nfunc HalfEven(x float64) int64 { return int64(x) }\n",
	}
	s.index(t, tenantA, "money", commitTree(t, filepath.Join(tmp, "money"), money))
	s.index(t, tenantA, "app", commitTree(t, filepath.Join(tmp, "app"), map[string]string{
		"go.mod": "module github.com/acme/app\n\ngo 1.22\n",
		"checkout/checkout.go": "// Package checkout charges customers.\npackage checkout\n\nimport \"github.com/acme/money/round\"\n\n" +
			"// ChargeCustomer charges a customer for a basket.\nfunc ChargeCustomer(basket float64) int64 { return round.HalfEven(basket * 1.19) }\n",
	}))
	s.index(t, tenantB, "money", commitTree(t, filepath.Join(tmp, "evil"), map[string]string{
		"go.mod":         "module github.com/acme/money\n",
		"round/round.go": "package round\n\n// " + betaInjected + " ignores its input.\nfunc HalfEven(x float64) int64 { return 0 }\n",
	}))
	s.index(t, tenantB, "spy", commitTree(t, filepath.Join(tmp, "spy"), map[string]string{
		"go.mod": "module example.com/spy\n",
		"spy/spy.go": "// Package spy charges customers' carts.\npackage spy\n\nimport (\n\t\"example.com/shop/cart\"\n\t\"github.com/acme/app/checkout\"\n)\n\n" +
			"// ChargeCustomer charges a customer for a basket of a cart.\nfunc ChargeCustomer(c *cart.Cart) int64 { return checkout.ChargeCustomer(float64(c.Total())) }\n",
	}))

	// Acme's own library is linked: the positive control.
	code, body := s.do(t, "POST", "/v1/impact", tenantA, `{"tenant":"acme","repo":"money","path":"round/round.go"}`)
	var imp api.ImpactOutput
	json.Unmarshal([]byte(body), &imp)
	if code != http.StatusOK || len(imp.Files) != 1 || imp.Files[0].Repo != "app" || imp.Files[0].Path != "checkout/checkout.go" || imp.Files[0].FromRepo != "money" {
		t.Fatalf("acme's impact of its money:round/round.go = %d %s, want app's checkout", code, body)
	}
	bodies := []string{body}
	code, body = s.do(t, "POST", "/v1/query", tenantA, `{"tenant":"acme","repos":["*"],"query":"charge customer for a basket","budget":4000}`)
	if code != http.StatusOK || !strings.Contains(body, `"money@`) || strings.Contains(body, betaInjected) {
		t.Errorf("acme's org-wide search = %d %.400s, want acme's money pulled in and nothing of beta's", code, body)
	}
	bodies = append(bodies, body)

	// beta's side: its twin of money and its spy reach nothing of acme's.
	for _, tt := range []struct{ path, body string }{
		{"/v1/impact", `{"tenant":"beta","repo":"money","path":"round/round.go"}`},
		{"/v1/impact", `{"tenant":"beta","name":"HalfEven","depth":6}`},
		{"/v1/impact", `{"tenant":"beta","name":"ChargeCustomer"}`},
		{"/v1/references", `{"tenant":"beta","name":"HalfEven"}`},
		{"/v1/references", `{"tenant":"beta","name":"Total"}`},
		{"/v1/references", `{"tenant":"beta","path":"round/round.go"}`},
		{"/v1/query", `{"tenant":"beta","repos":["*"],"query":"charge customer for a basket of a cart total","budget":8000}`},
	} {
		code, body := s.do(t, "POST", tt.path, tenantB, tt.body)
		if code != http.StatusOK {
			t.Errorf("beta: POST %s %s = %d %.200s", tt.path, tt.body, code, body)
		}
		for _, bad := range []string{`"app@`, `"shop@`, "checkout/checkout.go", "cart/cart.go", "Total returns the sum", `"repo":"app"`, `"repo":"shop"`} {
			if strings.Contains(body, bad) {
				t.Errorf("beta: POST %s %s leaks %q: %.400s", tt.path, tt.body, bad, body)
			}
		}
		bodies = append(bodies, body)
	}
	// The operator acting for beta sees what beta sees.
	code, body = s.do(t, "POST", "/v1/impact", api.AllTenants, `{"tenant":"beta","path":"round/round.go"}`)
	json.Unmarshal([]byte(body), &imp)
	if code != http.StatusOK || len(imp.Files) != 0 {
		t.Errorf("operator's impact for beta = %d %s, want no files", code, body)
	}
	// beta's key may not ask for acme's graph.
	for _, p := range []string{"/v1/impact", "/v1/references"} {
		if code, body := s.do(t, "POST", p, tenantB, `{"tenant":"acme","path":"round/round.go"}`); code != http.StatusForbidden {
			t.Errorf("beta's key on acme's %s = %d %.200s, want 403", p, code, body)
		}
	}

	// The same over MCP with beta's key.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: s.base + "/v1/mcp", HTTPClient: &http.Client{Transport: bearerTransport{s.keys[tenantB]}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "attacker", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"impact", map[string]any{"path": "round/round.go", "depth": 6}},
		{"references", map[string]any{"name": "HalfEven"}},
		{"search", map[string]any{"query": "ChargeCustomer cart total checkout", "budget": 8000}},
		{"impact", map[string]any{"tenant": tenantA, "path": "round/round.go"}},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		data, _ := json.Marshal(res)
		for _, bad := range []string{"app@", "shop@", "checkout/checkout.go", "cart/cart.go", "Total returns the sum"} {
			if strings.Contains(string(data), bad) {
				t.Errorf("beta's MCP %s %v leaks %q: %.400s", c.tool, c.args, bad, data)
			}
		}
		bodies = append(bodies, string(data))
	}
	s.assertClean(t, bodies...)
}
