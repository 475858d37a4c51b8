package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// Sessions attacked on a running up: acme reuses the session id beta's
// agent chose, on a repository of the same name and file layout as beta's.
// Nothing of beta's may come back: not its text (acme's "what we looked at
// before" recall reads acme's own segment), not its commits, and acme's
// first query is not told that chunks were "already sent". Two defences
// stand behind that: session ids are namespaced by tenant, and a sent
// chunk is matched by repository, path and commit; the test fails when
// both are broken. beta's own session keeps its chunks.
func TestSecuritySessionReuse(t *testing.T) {
	s := startSecureUp(t)
	// acme also has a "vault", with beta's file layout and other content,
	// so that a session shared across tenants would match its chunks.
	s.index(t, tenantA, "vault", commitTree(t, filepath.Join(t.TempDir(), "acme-vault"), map[string]string{
		"vault/keys.go": "package vault\n\n// MasterToken unlocks the vault.\nconst MasterToken = \"acme-public-value\"\n",
	}))
	const id = "chat-shared-1"
	ask := func(tenant, repo, q string) (int, string, map[string]any) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"tenant": tenant, "repo": repo, "query": q, "budget": 2000, "session": id})
		code, out := s.do(t, "POST", "/v1/query", tenant, string(body))
		var m map[string]any
		_ = json.Unmarshal([]byte(out), &m)
		return code, out, m
	}

	// beta's agent reads its vault in session id.
	code, out, _ := ask(tenantB, "vault", "MasterToken vault keys")
	if code != http.StatusOK || !strings.Contains(out, betaSecret) {
		t.Fatalf("beta's own query = %d %.300s, want its secret", code, out)
	}

	// acme, same session id: history recall and a repeat of beta's query.
	var bodies []string
	for i, q := range []string{"MasterToken vault keys", "the function we looked at before", "what did we look at earlier in the vault"} {
		code, out, m := ask(tenantA, "vault", q)
		if code != http.StatusOK {
			t.Fatalf("acme %q = %d %.300s", q, code, out)
		}
		// acme's first query in the session: nothing of its own was sent yet.
		if sent, _ := m["already_sent"].([]any); i == 0 && len(sent) > 0 {
			t.Errorf("acme %q: already_sent %v from a session of another tenant", q, sent)
		}
		bodies = append(bodies, out)
	}
	// Another tenant's session id, named with the tenant's prefix, is no way in either.
	for _, bad := range []string{tenantB + "/" + id, tenantB + ":" + id, "../" + tenantB + "/" + id} {
		body, _ := json.Marshal(map[string]any{"tenant": tenantA, "repo": "vault", "query": "the function we looked at before", "budget": 2000, "session": bad})
		_, out := s.do(t, "POST", "/v1/query", tenantA, string(body))
		bodies = append(bodies, out)
	}
	for _, b := range bodies {
		if strings.Contains(b, s.commit[tenantB+"/vault"][:12]) { // provenance names 12 hex digits
			t.Errorf("acme's answer names beta's commit: %.300s", b)
		}
	}
	s.assertClean(t, bodies...)

	// beta's session still holds its chunks: a repeat leaves them out as sent.
	_, out, m := ask(tenantB, "vault", "MasterToken vault keys")
	if sent, _ := m["already_sent"].([]any); len(sent) == 0 {
		t.Errorf("beta's session lost its chunks after acme used the same id: %.300s", out)
	}
}
