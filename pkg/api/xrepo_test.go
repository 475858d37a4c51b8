package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/testrepo"
)

// moneyFiles is a library repository: a Go module and an npm package.
var moneyFiles = map[string]string{
	"go.mod": "module github.com/acme/money\n\ngo 1.22\n",
	"round/round.go": `// Package round rounds amounts.
package round

// HalfEven rounds to the nearest even integer.
func HalfEven(x float64) int64 { return int64(x) }
`,
	"package.json": `{"name": "@acme/money-js", "main": "dist/index.js", "types": "dist/index.d.ts"}`,
	"src/index.ts": `// Amount formatting.
export function formatAmount(cents: number): string {
  return (cents / 100).toFixed(2)
}
`,
}

// shopFiles is an application repository that uses money through both.
var shopFiles = map[string]string{
	"go.mod": "module github.com/acme/shop\n\ngo 1.22\n",
	"checkout/checkout.go": `// Package checkout charges customers.
package checkout

import "github.com/acme/money/round"

// ChargeCustomer charges a customer for a basket.
func ChargeCustomer(basket float64) int64 {
	return round.HalfEven(basket * 1.19)
}
`,
	"cmd/shop/main.go": `package main

import "github.com/acme/shop/checkout"

func main() { checkout.ChargeCustomer(10) }
`,
	"package.json": `{"name": "shop-web", "dependencies": {"@acme/money-js": "^1.0.0"}}`,
	"web/basket.ts": `import { formatAmount } from '@acme/money-js'

export function basketLabel(cents: number): string {
  return 'Total ' + formatAmount(cents)
}
`,
}

// evilFiles is another tenant's repository that claims the same module
// path and npm name as acme's money.
var evilFiles = map[string]string{
	"go.mod":         "module github.com/acme/money\n",
	"round/round.go": "package round\n\n// HalfEven is beta's.\nfunc HalfEven(x float64) int64 { return 0 }\n",
	"package.json":   `{"name": "@acme/money-js", "main": "src/index.ts"}`,
	"src/index.ts":   "export function formatAmount(c: number): string { return '' }\n",
}

func indexRepo(t *testing.T, store *blob.Bucket, tenant, name string, files map[string]string) {
	t.Helper()
	r := testrepo.New(t)
	r.Commit("initial", files)
	if _, err := index.Build(context.Background(), store, r.Dir, index.Options{Tenant: tenant, Name: name}); err != nil {
		t.Fatal(err)
	}
}

// crossStore holds acme's money and shop and beta's evil twin of money.
func crossStore(t *testing.T) *blob.Bucket {
	t.Helper()
	store := blob.NewMem()
	indexRepo(t, store, "acme", "money", moneyFiles)
	indexRepo(t, store, "acme", "shop", shopFiles)
	indexRepo(t, store, "beta", "money", evilFiles)
	return store
}

// postRaw posts a JSON body to url, with key when not empty, and returns the
// status and the answer.
func postRaw(t *testing.T, url, key, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// postJSON posts body and decodes a 200's answer into out.
func postJSON(t *testing.T, url, key, body string, out any) int {
	t.Helper()
	code, data := postRaw(t, url, key, body)
	if out != nil && code == http.StatusOK {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s: %v: %s", url, err, data)
		}
	}
	return code
}

func impacted(out api.ImpactOutput) []string {
	var s []string
	for _, f := range out.Files {
		s = append(s, f.Repo+":"+f.Path)
	}
	return s
}

// TestCrossRepoImpact: shop imports money's Go package and npm package;
// impact of money's files lists shop's importing files (and what depends
// on them in shop), over HTTP and over MCP; references of a money symbol
// find shop's caller; an org-wide search from shop's side pulls in
// money's file. beta's repository claiming the same module path and
// package name is never linked, in either direction.
func TestCrossRepoImpact(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys := api.Keys{api.HashKey("acme-key"): "acme", api.HashKey("beta-key"): "beta"}
	srv := httptest.NewServer((&api.Server{Store: crossStore(t), Routes: api.QueryRoutes, Keys: keys}).Handler())
	defer srv.Close()

	var out api.ImpactOutput
	if code := postJSON(t, srv.URL+"/v1/impact", "acme-key", `{"tenant":"acme","repo":"money","path":"round/round.go"}`, &out); code != 200 {
		t.Fatalf("impact: HTTP %d", code)
	}
	if got, want := impacted(out), []string{"shop:checkout/checkout.go", "shop:cmd/shop/main.go"}; !slices.Equal(got, want) {
		t.Fatalf("impact of money:round/round.go = %v, want %v (%+v)", got, want, out)
	}
	if f := out.Files[0]; f.Depth != 1 || f.Via != "import" || f.From != "round/round.go" || f.FromRepo != "money" || !strings.HasPrefix(f.Provenance, "shop@") {
		t.Errorf("first impacted = %+v, want shop's checkout at depth 1 via an import of money's round/round.go", f)
	}
	if f := out.Files[1]; f.Depth != 2 || f.FromRepo != "" || f.From != "checkout/checkout.go" {
		t.Errorf("second impacted = %+v, want shop's main at depth 2 through checkout", f)
	}
	if len(out.Targets) != 1 || !strings.HasPrefix(out.Targets[0], "money@") {
		t.Errorf("targets = %v, want money's file only", out.Targets)
	}
	// The npm package: main names dist/index.js, read back to src/index.ts.
	postJSON(t, srv.URL+"/v1/impact", "acme-key", `{"tenant":"acme","repo":"money","path":"src/index.ts","depth":1}`, &out)
	if got := impacted(out); !slices.Equal(got, []string{"shop:web/basket.ts"}) {
		t.Errorf("impact of money:src/index.ts = %v, want shop:web/basket.ts", got)
	}
	// A symbol: the importers of its file in other repositories are at depth 1.
	postJSON(t, srv.URL+"/v1/impact", "acme-key", `{"tenant":"acme","name":"HalfEven","depth":1}`, &out)
	if got := impacted(out); !slices.Equal(got, []string{"shop:checkout/checkout.go"}) {
		t.Errorf("impact of HalfEven = %v", got)
	}
	// Limited to money, nothing in shop is searched.
	postJSON(t, srv.URL+"/v1/impact", "acme-key", `{"tenant":"acme","repos":["money"],"path":"round/round.go"}`, &out)
	if len(out.Files) != 0 || len(out.Targets) != 1 {
		t.Errorf("impact within money only = %+v, want the target and no files", out)
	}

	var refs api.ReferencesOutput
	postJSON(t, srv.URL+"/v1/references", "acme-key", `{"tenant":"acme","name":"HalfEven"}`, &refs)
	if len(refs.References) != 1 || refs.References[0].Repo != "shop" || refs.References[0].Symbol != "ChargeCustomer" || refs.References[0].Via != "call" || refs.References[0].Target != "money:HalfEven" {
		t.Errorf("references of HalfEven = %+v, want shop's ChargeCustomer calling it", refs)
	}
	postJSON(t, srv.URL+"/v1/references", "acme-key", `{"tenant":"acme","path":"round/round.go"}`, &refs)
	if len(refs.References) != 1 || refs.References[0].Repo != "shop" || refs.References[0].Path != "checkout/checkout.go" || refs.References[0].Via != "import" {
		t.Errorf("references of round/round.go = %+v, want shop's checkout importing it", refs)
	}

	// Org-wide search: shop's checkout matches, and the graph arm walks
	// into money's package, which shares no word with the query.
	var resp struct {
		Chunks []struct {
			Repo, Path string
			Signals    []string
		}
	}
	search := func(body string) map[string][]string {
		t.Helper()
		resp.Chunks = nil
		if code := postJSON(t, srv.URL+"/v1/query", "acme-key", body, &resp); code != 200 {
			t.Fatalf("query %s: HTTP %d", body, code)
		}
		got := map[string][]string{}
		for _, c := range resp.Chunks {
			got[c.Repo+":"+c.Path] = c.Signals
		}
		return got
	}
	got := search(`{"tenant":"acme","repos":["*"],"query":"charge customer for a basket","budget":4000}`)
	if _, ok := got["shop:checkout/checkout.go"]; !ok {
		t.Fatalf("org-wide search: no shop checkout in %v", got)
	}
	if sig, ok := got["money:round/round.go"]; !ok || !slices.Contains(sig, "graph") {
		t.Errorf("org-wide search did not expand into money's round/round.go: %v", got)
	}
	// Without the graph arm, or searching shop alone, money's file is not there.
	got = search(`{"tenant":"acme","repos":["*"],"query":"charge customer for a basket","budget":4000,"arms":["symbol","bm25"]}`)
	if _, ok := got["money:round/round.go"]; ok {
		t.Errorf("search without the graph arm has money's round/round.go: %v", got)
	}

	// beta claims github.com/acme/money and @acme/money-js too: its impact
	// and references never reach acme's shop, and acme's never reach beta.
	postJSON(t, srv.URL+"/v1/impact", "beta-key", `{"tenant":"beta","path":"round/round.go"}`, &out)
	if len(out.Files) != 0 || len(out.Targets) != 1 || !strings.HasPrefix(out.Targets[0], "money@") {
		t.Errorf("beta's impact of its round/round.go = %+v, want only its own target", out)
	}
	postJSON(t, srv.URL+"/v1/references", "beta-key", `{"tenant":"beta","name":"HalfEven"}`, &refs)
	if len(refs.References) != 0 {
		t.Errorf("beta's references of HalfEven = %+v, want none", refs)
	}
	if code := postJSON(t, srv.URL+"/v1/impact", "beta-key", `{"tenant":"acme","path":"round/round.go"}`, nil); code != http.StatusForbidden {
		t.Errorf("beta's key on acme's impact: HTTP %d, want 403", code)
	}
	postJSON(t, srv.URL+"/v1/impact", "acme-key", `{"tenant":"acme","repo":"shop","path":"checkout/checkout.go"}`, &out)
	for _, f := range out.Files {
		if f.Repo != "shop" {
			t.Errorf("acme's impact reached %+v", f)
		}
	}

	// The MCP tools answer the same.
	cs, err := connectHTTP(ctx, t, srv.URL, "acme-key")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var ro api.ReposOutput
	call(ctx, t, cs, "repos", nil, &ro)
	if len(ro.Repos) != 2 || ro.Repos[0].Repo != "money" || len(ro.Repos[0].Provides) != 2 ||
		ro.Repos[0].Provides[0].Name != "github.com/acme/money" || ro.Repos[0].Provides[1].Name != "@acme/money-js" {
		t.Errorf("repos = %+v, want money providing its Go module and npm package", ro)
	}
	var mo api.ImpactOutput
	res := call(ctx, t, cs, "impact", map[string]any{"repo": "money", "path": "round/round.go"}, &mo)
	if res.IsError || !slices.Equal(impacted(mo), []string{"shop:checkout/checkout.go", "shop:cmd/shop/main.go"}) || !strings.Contains(text(res), "shop@") {
		t.Errorf("MCP impact = %+v: %s", mo, text(res))
	}
	beta, err := connectHTTP(ctx, t, srv.URL, "beta-key")
	if err != nil {
		t.Fatal(err)
	}
	defer beta.Close()
	res = call(ctx, t, beta, "impact", map[string]any{"path": "src/index.ts"}, &mo)
	if res.IsError || len(mo.Files) != 0 || strings.Contains(text(res), "shop") {
		t.Errorf("beta's MCP impact of src/index.ts = %+v: %s", mo, text(res))
	}
	var so api.SearchOutput
	call(ctx, t, beta, "search", map[string]any{"query": "charge customer for a basket round half even"}, &so)
	for _, c := range so.Chunks {
		if c.Repo != "money" || strings.Contains(c.Path, "checkout") {
			t.Errorf("beta's search returned %+v", c)
		}
	}
}

// TestCrossRepoReindex: the graph follows a repository's HEAD; a new
// commit of shop that stops importing money drops the link.
func TestCrossRepoReindex(t *testing.T) {
	store := blob.NewMem()
	indexRepo(t, store, "acme", "money", moneyFiles)
	shop := testrepo.New(t)
	shop.Commit("initial", shopFiles)
	if _, err := index.Build(context.Background(), store, shop.Dir, index.Options{Tenant: "acme", Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&api.Server{Store: store, Routes: api.QueryRoutes}).Handler())
	defer srv.Close()
	var out api.ImpactOutput
	postJSON(t, srv.URL+"/v1/impact", "", `{"tenant":"acme","repo":"money","path":"round/round.go","depth":1}`, &out)
	if !slices.Equal(impacted(out), []string{"shop:checkout/checkout.go"}) {
		t.Fatalf("before: %v", impacted(out))
	}
	shop.Commit("own rounding", map[string]string{"checkout/checkout.go": "package checkout\n\nfunc ChargeCustomer(b float64) int64 { return int64(b) }\n"})
	if _, err := index.Build(context.Background(), store, shop.Dir, index.Options{Tenant: "acme", Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	postJSON(t, srv.URL+"/v1/impact", "", `{"tenant":"acme","repo":"money","path":"round/round.go","depth":1}`, &out)
	if len(out.Files) != 0 {
		t.Fatalf("after shop stopped importing money: %v", impacted(out))
	}
}

// TestCrossRepoConcurrent: impact and org-wide queries of two tenants run
// concurrently with a reindex; every answer is whole (for the race
// detector: the per-tenant graph cache).
func TestCrossRepoConcurrent(t *testing.T) {
	store := crossStore(t)
	srv := httptest.NewServer((&api.Server{Store: store, Routes: api.QueryRoutes}).Handler())
	defer srv.Close()
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			for i := 0; i < 5; i++ {
				tenant := []string{"acme", "beta"}[(w+i)%2]
				var out api.ImpactOutput
				if code := postJSON(t, srv.URL+"/v1/impact", "", `{"tenant":"`+tenant+`","repo":"money","path":"round/round.go","depth":1}`, &out); code != 200 {
					errs <- "impact: HTTP " + strconv.Itoa(code)
				}
				for _, f := range out.Files {
					if tenant == "beta" || f.Repo != "shop" {
						errs <- tenant + " impact reached " + f.Repo + ":" + f.Path
					}
				}
				if code := postJSON(t, srv.URL+"/v1/query", "", `{"tenant":"`+tenant+`","repos":["*"],"query":"charge customer","budget":2000}`, nil); code != 200 {
					errs <- "query: HTTP " + strconv.Itoa(code)
				}
			}
		})
	}
	wg.Go(func() { indexRepo(t, store, "acme", "shop", shopFiles) })
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
