package api

import (
	"strings"
	"testing"
)

// TestTenantDefaultsToKey: a request that names no tenant acts for its
// key's tenant (a tenant's key), else for the default tenant (an
// operator's key). With a tenant's key, leaving the tenant out was a 403
// for tenant "default" on every REST route, while /v1/mcp acted for the
// key's tenant.
func TestTenantDefaultsToKey(t *testing.T) {
	store := manyRepos(t, "acme", 1, "package a\n\n// ParseToken parses.\nfunc ParseToken() {}\n\nfunc use() { ParseToken() }\n")
	fake := &fakeIndexer{}
	keys := Keys{HashKey("acme-key"): "acme", HashKey("op-key"): AllTenants}
	ts, _ := newServer(t, &Server{Store: store, Indexer: fake, Routes: AllRoutes, Keys: keys})
	for _, c := range []struct {
		name, key, method, path, body string
		code                          int
		want                          string
	}{
		{"query", "acme-key", "POST", "/v1/query", `{"repo":"r00","query":"ParseToken"}`, 200, `"repo":"r00"`},
		{"listing", "acme-key", "GET", "/v1/repos", ``, 200, `"tenant":"acme","repos":[{"repo":"r00"`},
		{"impact", "acme-key", "POST", "/v1/impact", `{"name":"ParseToken"}`, 200, `"targets":["r00@`},
		{"references", "acme-key", "POST", "/v1/references", `{"name":"ParseToken"}`, 200, `"via":"call"`},
		{"index", "acme-key", "POST", "/v1/index", `{"repo":"r01","location":"https://git.example/acme/r01.git"}`, 202, `"tenant":"acme"`},
		// Naming another tenant is still refused; an operator's key
		// acts for the default tenant.
		{"another tenant", "acme-key", "POST", "/v1/query", `{"tenant":"beta","repo":"r00","query":"ParseToken"}`, 403, `not valid for tenant \"beta\"`},
		{"operator's listing", "op-key", "GET", "/v1/repos", ``, 200, `"tenant":"default","repos":[]`},
		{"operator's query", "op-key", "POST", "/v1/query", `{"repo":"r00","query":"ParseToken"}`, 404, `default/r00`},
	} {
		code, _, body := do(t, c.method, ts.URL+c.path, "application/json", c.body, map[string]string{"Authorization": "Bearer " + c.key})
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %.300s, want %d with %s", c.name, code, body, c.code, c.want)
		}
	}
	if len(fake.reqs) != 1 || fake.reqs[0].Tenant != "acme" {
		t.Errorf("index signals %+v, want one for acme", fake.reqs)
	}
}
