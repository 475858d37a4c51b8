package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSecurityNameOracle: no answer to acme tells whether beta holds a
// repository of a name. Acme's key asks every REST route about "vault"
// (beta's) and "vaulx" (no tenant's), in acme's namespace and in beta's;
// the two answers of each request must be the same, word for word once
// the name is swapped.
func TestSecurityNameOracle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	s := startSecureUp(t)
	type req struct{ method, path, body string }
	reqs := func(name string) []req {
		q := func(tenant string) string {
			b, _ := json.Marshal(map[string]any{"tenant": tenant, "repos": []string{name}, "query": "MasterToken", "budget": 500})
			return string(b)
		}
		g := func(tenant string) string {
			b, _ := json.Marshal(map[string]any{"tenant": tenant, "repos": []string{name}, "name": "MasterToken"})
			return string(b)
		}
		ix := func(tenant string) string {
			b, _ := json.Marshal(map[string]any{"tenant": tenant, "repo": name, "location": "https://git.example.com/x/" + name + ".git"})
			return string(b)
		}
		var out []req
		for _, tenant := range []string{tenantA, tenantB} {
			out = append(out,
				req{"GET", "/v1/repos/" + tenant + "/" + name + "/status", ""},
				req{"POST", "/v1/repos/" + tenant + "/" + name + "/reindex", ""},
				req{"POST", "/v1/query", q(tenant)},
				req{"POST", "/v1/references", g(tenant)},
				req{"POST", "/v1/impact", g(tenant)},
				req{"GET", "/v1/repos?tenant=" + tenant + "&cursor=" + name, ""},
			)
			if tenant == tenantB {
				out = append(out, req{"POST", "/v1/index", ix(tenant)}, req{"DELETE", "/v1/repos/" + tenant + "/" + name, ""})
			}
		}
		return out
	}
	held, none := reqs("vault"), reqs("vaulx")
	for i := range held {
		c1, b1 := s.do(t, held[i].method, held[i].path, tenantA, held[i].body)
		c2, b2 := s.do(t, none[i].method, none[i].path, tenantA, none[i].body)
		if c1 != c2 || strings.ReplaceAll(b1, "vault", "vaulx") != b2 {
			t.Errorf("%s %s %s: %d %s\nfor a name no tenant holds: %d %s", held[i].method, held[i].path, held[i].body, c1, b1, c2, b2)
		}
	}
	if st := s.waitSettled(t, tenantB, "vault"); st == nil || st.Head == nil {
		t.Errorf("beta's vault after acme's requests: %+v", st)
	}
}
