package main

import (
	"context"
	"strings"
	"testing"

	"codectx/pkg/api"
)

// reposCLI runs `codectx repos ARGS --server` with tenant's key and returns
// what it printed (stdout and stderr) and its error.
func (s *secureStack) reposCLI(t *testing.T, tenant string, args ...string) (string, error) {
	t.Helper()
	t.Setenv(envAPIKey, s.keys[tenant])
	var out, errs syncBuffer
	err := run(context.Background(), append(append([]string{"repos"}, args...), "--server", s.base), &out, &errs)
	return out.String() + errs.String(), err
}

// TestSecurityReposCLI: `codectx repos` on a running up with keys on.
// acme's key lists, shows, reindexes its own repository with no
// --tenant; asked for beta's (by --tenant, by name, by path tricks) it
// fails and prints nothing of beta's: not its repository's name as
// listed, its commit or its secret; its delete of beta's is refused and
// beta's index stays.
func TestSecurityReposCLI(t *testing.T) {
	s := startSecureUp(t)
	betaCommit := s.commit[tenantB+"/vault"]
	leaks := func(what, out string) {
		t.Helper()
		for _, bad := range []string{betaSecret, betaCommit[:12], s.vault, s.data} {
			if strings.Contains(out, bad) {
				t.Errorf("%s printed %q:\n%s", what, bad, out)
			}
		}
	}

	out, err := s.reposCLI(t, tenantA)
	if err != nil || !strings.Contains(out, "shop") || strings.Contains(out, "vault") {
		t.Fatalf("acme's repos = %v\n%s\nwant shop alone", err, out)
	}
	out, err = s.reposCLI(t, tenantA, "status", "shop")
	if err != nil || !strings.Contains(out, "acme/shop: idle") || !strings.Contains(out, "files     4 in the index") {
		t.Errorf("acme's repos status shop = %v\n%s\nwant idle with 4 files in the index", err, out)
	}
	out, err = s.reposCLI(t, tenantA, "reindex", "shop")
	if err != nil || !strings.Contains(out, "indexed shop@") {
		t.Errorf("acme's repos reindex shop = %v\n%s\nwant it indexed", err, out)
	}

	for _, args := range [][]string{
		{"--tenant", tenantB},
		{"list", "--tenant", tenantB, "--json"},
		{"status", "vault"},
		{"status", "--tenant", tenantB, "vault"},
		{"status", "../beta/vault"},
		{"status", "beta/vault"},
		{"status", "--tenant", "*", "vault"},
		{"reindex", "vault"},
		{"reindex", "--tenant", tenantB, "--no-wait", "vault"},
		{"delete", "vault"},
		{"delete", "--tenant", tenantB, "vault"},
		{"delete", "--tenant", tenantB, "--json", "vault"},
	} {
		out, err := s.reposCLI(t, tenantA, args...)
		if err == nil {
			t.Errorf("acme's repos %q succeeded:\n%s", args, out)
		}
		leaks("acme's repos "+strings.Join(args, " "), out)
	}

	// beta's index is whole: the operator lists it at its commit.
	out, err = s.reposCLI(t, api.AllTenants, "--tenant", tenantB)
	if err != nil || !strings.Contains(out, "vault") || !strings.Contains(out, betaCommit[:12]) {
		t.Errorf("operator's repos --tenant beta = %v\n%s\nwant vault at %s", err, out, betaCommit[:12])
	}
	// Without a key: the advice, nothing listed.
	out, err = s.reposCLI(t, "nobody")
	if err == nil || !strings.Contains(err.Error(), envAPIKey) || strings.Contains(out, "shop") {
		t.Errorf("repos without a key = %v\n%s\nwant the key advice", err, out)
	}
}
