package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"codectx/pkg/api"
	"codectx/pkg/keys"
)

// TestOpenAPIAgreesWithServer: every route the server registers is in the
// document and every documented route is registered; real calls of every
// route, successes and errors, answer with a documented status and a body
// valid against the document's schema for it.
func TestOpenAPIAgreesWithServer(t *testing.T) {
	srv, hs, doc, admin, operator := docServer(t)
	if doc.OpenAPI != "3.1.0" || len(doc.Components.Schemas) == 0 {
		t.Fatalf("document: openapi %q, %d schemas", doc.OpenAPI, len(doc.Components.Schemas))
	}

	// The validator refuses what a wrong server would send.
	if rs, err := doc.Components.Schemas["api_RepoPage"].Resolve(nil); err != nil {
		t.Fatal(err)
	} else if rs.Validate(map[string]any{"tenant": 5, "repos": []any{}}) == nil || rs.Validate(map[string]any{"tenant": "a"}) == nil {
		t.Fatal("the RepoPage schema accepts a wrong tenant type or no repos")
	}

	registered, documented := srv.Patterns()
	seen := map[string]bool{}
	for _, p := range registered {
		seen[p] = true
		docPath, ok := documented[p]
		if !ok {
			t.Errorf("route %q is not documented", p)
			continue
		}
		method := "post"
		if f := strings.Fields(p); len(f) == 2 {
			method = strings.ToLower(f[0])
		}
		if doc.Paths[docPath][method] == nil {
			t.Errorf("route %q: the document has no %s %s", p, method, docPath)
		}
	}
	for p := range documented {
		if !seen[p] {
			t.Errorf("documented route %q is not registered", p)
		}
	}

	type call struct {
		method, path, docPath, key, body string
		want                             int
	}
	calls := []call{
		{"GET", "/healthz", "/healthz", "", "", 200},
		{"GET", "/readyz", "/readyz", "", "", 200},
		{"GET", "/metrics", "/metrics", operator, "", 200},
		{"GET", "/metrics", "/metrics", "", "", 401},
		{"GET", "/metrics", "/metrics", admin, "", 403}, // a tenant's key, even of scope admin
		{"POST", "/v1/query", "/v1/query", admin, `{"tenant":"acme","repos":["*"],"query":"cart total","budget":1500}`, 200},
		{"POST", "/v1/query", "/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"cart total","session":"s-1"}`, 200},
		{"POST", "/v1/query", "/v1/query", admin, `{"tenant":"acme","repo":"shop","query":""}`, 400},
		{"POST", "/v1/query", "/v1/query", admin, `{"tenant":"acme","repo":"nope","query":"x"}`, 404},
		{"POST", "/v1/query", "/v1/query", "", `{"tenant":"acme","repo":"shop","query":"x"}`, 401},
		{"POST", "/v1/query", "/v1/query", admin, `{"tenant":"other","repo":"shop","query":"x"}`, 403},
		{"POST", "/v1/impact", "/v1/impact", admin, `{"tenant":"acme","path":"tax/tax.go"}`, 200},
		{"POST", "/v1/impact", "/v1/impact", admin, `{"tenant":"acme","name":"VATLine","repo":"billing","depth":2}`, 200},
		{"POST", "/v1/impact", "/v1/impact", admin, `{"tenant":"acme"}`, 400},
		{"POST", "/v1/impact", "/v1/impact", admin, `{"tenant":"acme","path":"x.go","repos":["nope"]}`, 404},
		{"POST", "/v1/impact", "/v1/impact", "", `{"tenant":"acme","path":"x.go"}`, 401},
		{"POST", "/v1/impact", "/v1/impact", admin, `{"tenant":"other","path":"x.go"}`, 403},
		{"POST", "/v1/references", "/v1/references", admin, `{"tenant":"acme","name":"VATLine"}`, 200},
		{"POST", "/v1/references", "/v1/references", admin, `{"tenant":"acme","path":"../x"}`, 400},
		{"POST", "/v1/index", "/v1/index", admin, `{"tenant":"acme","location":"https://example.com/acme/shop.git"}`, 202},
		{"POST", "/v1/index", "/v1/index", admin, `{"tenant":"acme"}`, 400},
		{"POST", "/v1/webhooks/github/acme", "/v1/webhooks/{host}/{tenant}", "", `{}`, 401},
		{"GET", "/v1/repos?tenant=acme&limit=1", "/v1/repos", admin, "", 200},
		{"GET", "/v1/repos?tenant=acme&limit=x", "/v1/repos", admin, "", 400},
		{"GET", "/v1/repos/acme/shop/status", "/v1/repos/{tenant}/{repo}/status", admin, "", 200},
		{"GET", "/v1/repos/acme/nope/status", "/v1/repos/{tenant}/{repo}/status", admin, "", 404},
		{"POST", "/v1/repos/acme/shop/reindex", "/v1/repos/{tenant}/{repo}/reindex", admin, "", 202},
		{"POST", "/v1/repos/acme/billing/reindex", "/v1/repos/{tenant}/{repo}/reindex", admin, "", 409},
		{"POST", "/v1/repos/acme/nope/reindex", "/v1/repos/{tenant}/{repo}/reindex", admin, "", 404},
		{"POST", "/v1/mcp", "/v1/mcp", admin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, 200},
		{"POST", "/v1/mcp", "/v1/mcp", "", `{}`, 401},
		{"DELETE", "/v1/repos/acme/billing", "/v1/repos/{tenant}/{repo}", admin, "", 200},
		{"DELETE", "/v1/repos/acme/billing", "/v1/repos/{tenant}/{repo}", admin, "", 404},
		{"GET", "/v1/openapi.json", "/v1/openapi.json", "", "", 200},
	}
	covered := map[string]bool{}
	for _, c := range calls {
		req, _ := http.NewRequest(c.method, hs.URL+c.path, strings.NewReader(c.body))
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.path == "/v1/mcp" {
			req.Header.Set("Accept", "application/json, text/event-stream")
		}
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		name := c.method + " " + c.path
		if resp.StatusCode != c.want {
			t.Errorf("%s: HTTP %d, want %d: %s", name, resp.StatusCode, c.want, body)
			continue
		}
		op := doc.Paths[c.docPath][strings.ToLower(c.method)]
		covered[strings.ToLower(c.method)+" "+c.docPath] = true
		var responses map[string]struct {
			Content map[string]struct {
				Schema *jsonschema.Schema `json:"schema"`
			} `json:"content"`
		}
		if err := json.Unmarshal(op["responses"], &responses); err != nil {
			t.Fatalf("%s: responses: %v", name, err)
		}
		r, ok := responses[itoa(resp.StatusCode)]
		if !ok {
			t.Errorf("%s: status %d is not documented", name, resp.StatusCode)
			continue
		}
		ct := resp.Header.Get("Content-Type")
		if c.path == "/metrics" && resp.StatusCode == 200 {
			if _, ok := r.Content["text/plain"]; !ok || !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("%s: content type %q not documented", name, ct)
			}
			continue
		}
		media, ok := r.Content["application/json"]
		if !ok || !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: answered %q, documented %v", name, ct, r.Content)
			continue
		}
		schema := media.Schema
		if schema.Ref != "" {
			schema = doc.Components.Schemas[strings.TrimPrefix(schema.Ref, "#/components/schemas/")]
		}
		if schema == nil {
			t.Errorf("%s: no schema", name)
			continue
		}
		rs, err := schema.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: resolve schema: %v", name, err)
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Errorf("%s: body is not JSON: %v", name, err)
			continue
		}
		if err := rs.Validate(v); err != nil {
			t.Errorf("%s: answer does not validate: %v\n%s", name, err, body)
		}
	}
	for p, item := range doc.Paths {
		for m := range item {
			if !covered[m+" "+p] {
				t.Errorf("documented %s %s has no real call in this test", m, p)
			}
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// apiDoc is the part of the OpenAPI document the tests read.
type apiDoc struct {
	OpenAPI    string                                           `json:"openapi"`
	Paths      map[string]map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]*jsonschema.Schema `json:"schemas"`
	} `json:"components"`
}

// docServer serves the API over acme's shop and billing repositories,
// with keys (acme's admin key, an operator's query key) and an indexer,
// and returns the document it serves.
func docServer(t *testing.T) (srv *api.Server, hs *httptest.Server, doc apiDoc, admin, operator string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.json")
	admin, _, err := keys.Create(path, "acme", keys.Admin)
	if err != nil {
		t.Fatal(err)
	}
	operator, _, err = keys.Create(path, api.AllTenants, keys.Query)
	if err != nil {
		t.Fatal(err)
	}
	ks, _ := keys.Open(path)
	ix := &locIndexer{loc: map[string]string{"acme/shop": "https://example.com/acme/shop.git"}}
	srv = &api.Server{Store: shopStore(t), Routes: api.AllRoutes, KeyStore: ks, Indexer: ix,
		Webhooks: api.WebhookConfig{Secrets: map[string]string{"acme": "s3cret"}}}
	hs = httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	resp, err := http.Get(hs.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return srv, hs, doc, admin, operator
}
