package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// mcpCall sends one MCP tools/call with the key of tenant and returns the
// status code and body.
func (s *secureStack) mcpCall(t *testing.T, tenant, tool string, args map[string]any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	req, err := http.NewRequest("POST", s.base+"/v1/mcp", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.keys[tenant])
	return send(t, req)
}

// Every MCP tool attacked on a running up with acme's key, for beta's
// vault: beta's repository named plainly, with beta's tenant (in the tenant
// argument and in the name), with path tricks and with "*"; read paths
// that leave acme's repository (.., absolute, beta's file path, NUL,
// backslashes) and hostile line ranges; beta's session id. Nothing of
// beta's comes back (its secret, its file's text, its commit), no answer
// names a server path, and an error about beta's repository name reads as
// one about a name no tenant holds (the names' existence is not told).
func TestSecurityMCPTools(t *testing.T) {
	s := startSecureUp(t)
	betaCommit := s.commit[tenantB+"/vault"]
	// beta's agent reads its vault in a session whose id acme will reuse.
	if code, out := s.mcpCall(t, tenantB, "search", map[string]any{"query": "MasterToken vault keys", "session": "shared-id"}); code != http.StatusOK || !strings.Contains(out, betaSecret) {
		t.Fatalf("beta's own MCP search = %d %.300s, want its secret", code, out)
	}
	// The operator reads beta's vault too (its MCP principal is the
	// default tenant): nothing of that is acme's to see either.
	if code, out := s.mcpCall(t, "*", "read", map[string]any{"tenant": tenantB, "repo": "vault", "path": "vault/keys.go"}); code != http.StatusOK || !strings.Contains(out, betaSecret) {
		t.Fatalf("operator's MCP read of beta's vault = %d %.300s, want its secret", code, out)
	}

	type call struct {
		tool string
		args map[string]any
	}
	var calls []call
	for _, repo := range []string{"vault", "beta/vault", "../beta/vault", "./vault", "vault/", "/vault", "*", "beta", "..", "%2e%2e/beta/vault", "VAULT", "vault\x00"} {
		calls = append(calls,
			call{"read", map[string]any{"repo": repo, "path": "vault/keys.go"}},
			call{"search", map[string]any{"query": "MasterToken vault keys", "repos": []string{repo}}},
			call{"search", map[string]any{"query": "MasterToken vault keys", "repos": []string{"*", repo}}},
			call{"symbol", map[string]any{"name": "MasterToken", "repos": []string{repo}}},
			call{"references", map[string]any{"name": "MasterToken", "repos": []string{repo}}},
			call{"impact", map[string]any{"path": "vault/keys.go", "repo": repo}},
			// repo, one repository, which search, symbol and references
			// take too.
			call{"search", map[string]any{"query": "MasterToken vault keys", "repo": repo}},
			call{"symbol", map[string]any{"name": "MasterToken", "repo": repo}},
			// symbol's budget: the largest, the bodies it would let through.
			call{"symbol", map[string]any{"name": "MasterToken", "repo": repo, "budget": 100000}},
			call{"references", map[string]any{"name": "MasterToken", "repo": repo}},
		)
	}
	// The parts of a provenance read takes (repo@commit, path#Lstart-Lend),
	// with beta's commit (a prefix the leak check does not look for), and
	// a package-qualified name.
	for _, repo := range []string{"vault@" + betaCommit[:10], "beta/vault@" + betaCommit[:10], "shop@" + betaCommit[:10], "vault@HEAD"} {
		calls = append(calls,
			call{"read", map[string]any{"repo": repo, "path": "vault/keys.go#L1-40"}},
			call{"read", map[string]any{"tenant": tenantB, "repo": repo, "path": "vault/keys.go"}},
		)
	}
	// A whole provenance of beta's file as the path: its repository is
	// looked up among acme's only.
	for _, prov := range []string{"vault@" + betaCommit[:12] + ":vault/keys.go#L1-40", "beta/vault@" + betaCommit[:12] + ":vault/keys.go", "shop@" + betaCommit[:12] + ":../vault/vault/keys.go"} {
		calls = append(calls,
			call{"read", map[string]any{"repo": "", "path": prov}},
			call{"read", map[string]any{"repo": "vault", "path": prov}},
			call{"references", map[string]any{"path": prov}},
			call{"impact", map[string]any{"path": prov}},
			call{"impact", map[string]any{"path": prov, "tenant": tenantB}},
		)
	}
	calls = append(calls,
		call{"read", map[string]any{"repo": "shop", "path": "../vault/vault/keys.go#L1-40"}},
		call{"symbol", map[string]any{"name": "vault.MasterToken.x"}},
		call{"symbol", map[string]any{"tenant": tenantB, "name": "vault.vault.MasterToken"}},
		// A name qualified by beta's package: symbol, references and
		// impact resolve the qualifier in the repositories of the call
		// only.
		call{"symbol", map[string]any{"name": "vault.MasterToken"}},
		call{"references", map[string]any{"name": "vault.MasterToken"}},
		call{"impact", map[string]any{"name": "vault.MasterToken"}},
		call{"references", map[string]any{"name": "vault.MasterToken", "repos": []string{"*", "vault"}}},
		call{"impact", map[string]any{"name": "vault.MasterToken", "repo": "vault"}},
	)
	for _, tenant := range []string{tenantB, "*", "beta/", "../beta", "BETA", "default", ""} {
		calls = append(calls,
			call{"read", map[string]any{"tenant": tenant, "repo": "vault", "path": "vault/keys.go"}},
			call{"search", map[string]any{"tenant": tenant, "query": "MasterToken vault keys", "repos": []string{"*"}}},
			call{"symbol", map[string]any{"tenant": tenant, "name": "MasterToken"}},
			call{"references", map[string]any{"tenant": tenant, "path": "vault/keys.go"}},
			call{"impact", map[string]any{"tenant": tenant, "name": "MasterToken", "repo": "vault"}},
			call{"repos", map[string]any{"tenant": tenant}},
		)
	}
	for _, path := range []string{"../vault/vault/keys.go", "../../beta/vault/@/HEAD", "/etc/passwd", "vault/keys.go", "a/../../vault/keys.go",
		`..\..\beta\vault\vault\keys.go`, "go.mod\x00../../x", ".git/config", "./../x"} {
		calls = append(calls, call{"read", map[string]any{"repo": "shop", "path": path}})
	}
	for _, r := range [][2]int{{-1, 0}, {0, -5}, {1 << 62, 0}, {1, 1 << 62}, {1 << 62, 1 << 62}, {9223372036854775807, 9223372036854775807}, {5, 2}} {
		calls = append(calls, call{"read", map[string]any{"repo": "shop", "path": "go.mod", "start_line": r[0], "end_line": r[1]}})
	}
	for _, q := range []string{"MasterToken vault keys", "the function we looked at before", "what did we look at earlier in the vault"} {
		calls = append(calls, call{"search", map[string]any{"query": q, "session": "shared-id"}})
	}

	var bodies []string
	for _, c := range calls {
		code, out := s.mcpCall(t, tenantA, c.tool, c.args)
		if code >= 500 {
			t.Errorf("acme's MCP %s %q = %d %.300s", c.tool, c.args, code, out)
		}
		for _, bad := range []string{betaSecret, "MasterToken unlocks", betaCommit, betaCommit[:12], s.vault} {
			if strings.Contains(out, bad) {
				t.Errorf("acme's MCP %s %q leaks %q: %.400s", c.tool, c.args, bad, out)
			}
		}
		if strings.Contains(c.tool, "search") && strings.Contains(out, "already_sent") {
			t.Errorf("acme's MCP %s %q was told of chunks already sent (beta's session): %.400s", c.tool, c.args, out)
		}
		bodies = append(bodies, out)
	}

	// beta's repository name answers as a name no tenant holds, word for
	// word once the name is swapped, on every tool.
	for _, tool := range []call{
		{"read", map[string]any{"path": "vault/keys.go"}},
		{"search", map[string]any{"query": "MasterToken"}},
		{"symbol", map[string]any{"name": "MasterToken"}},
		{"impact", map[string]any{"path": "vault/keys.go"}},
	} {
		answer := func(repo string) string {
			args := map[string]any{}
			for k, v := range tool.args {
				args[k] = v
			}
			switch tool.tool {
			case "read", "impact":
				args["repo"] = repo
			default:
				args["repos"] = []string{repo}
			}
			_, out := s.mcpCall(t, tenantA, tool.tool, args)
			return strings.ReplaceAll(out, repo, "NAME")
		}
		if held, none := answer("vault"), answer("nosuchrepo42"); held != none {
			t.Errorf("acme's MCP %s tells beta's repository from a name no one holds:\n%s\n%s", tool.tool, held, none)
		}
	}
	// Nor does the time it takes (measured in turn, reported; medians of 40).
	var held, none []time.Duration
	for i := range 80 {
		repo, into := "vault", &held
		if i%2 == 1 {
			repo, into = "nosuchrepo42", &none
		}
		start := time.Now()
		s.mcpCall(t, tenantA, "read", map[string]any{"repo": repo, "path": "vault/keys.go"})
		*into = append(*into, time.Since(start))
	}
	med := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	t.Logf("acme's read of beta's repository name: median %v; of a name no one holds: %v", med(held), med(none))

	// The methods an MCP client may try besides POST answer without a
	// result, and the other tools of the protocol list acme's own only.
	for _, m := range []string{"GET", "DELETE", "PUT"} {
		code, out := s.doKey(t, m, "/v1/mcp", s.keys[tenantA], "")
		if code == http.StatusOK && strings.Contains(out, "vault") || code >= 500 {
			t.Errorf("%s /v1/mcp = %d %.200s", m, code, out)
		}
		bodies = append(bodies, out)
	}
	code, out := s.mcpCall(t, tenantA, "repos", map[string]any{})
	var res struct {
		Result struct {
			StructuredContent struct {
				Tenant string `json:"tenant"`
				Repos  []struct {
					Repo string `json:"repo"`
				} `json:"repos"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	_ = json.Unmarshal([]byte(out), &res)
	var names []string
	for _, r := range res.Result.StructuredContent.Repos {
		names = append(names, r.Repo)
	}
	if code != http.StatusOK || res.Result.StructuredContent.Tenant != tenantA || !slices.Equal(names, s.repos[tenantA]) {
		t.Errorf("acme's repos tool = %d tenant %q %v, want %s %v: %.300s", code, res.Result.StructuredContent.Tenant, names, tenantA, s.repos[tenantA], out)
	}
	s.assertClean(t, bodies...)
}
