package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/testrepo"
)

// TestSecurityTenantHosts: a git server reserved for acme (--tenant-hosts)
// that lets the server in by its network address serves acme's
// repositories to acme alone. Beta names it directly (index route and
// operator on beta's behalf: 403), and through a host of its own that
// redirects there (the clone is refused where it dials): nothing of
// acme's is published for beta. Through a running `up` with keys, git's
// smart HTTP on loopback, private networks allowed.
func TestSecurityTenantHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	root := t.TempDir()
	commitTree(t, filepath.Join(root, "ledger"), map[string]string{
		"ledger.go": "package ledger\n\n// SecretTotal sums acme's private ledger.\nfunc SecretTotal() int { return 42 }\n",
	})
	base := testrepo.SmartHTTP(t, root)
	addr := strings.TrimPrefix(base, "http://")
	// Beta's host, on another loopback address: a reservation holds on
	// every port of the host.
	redirect := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, base+r.URL.RequestURI(), http.StatusFound)
	}))
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no second loopback address: %v", err)
	}
	redirect.Listener.Close()
	redirect.Listener = ln
	redirect.Start()
	t.Cleanup(redirect.Close)

	// An internal deployment: clones may reach private addresses, and
	// each tenant has its own git server (beta's redirects to acme's).
	s := startSecureUp(t, "--allow-private-networks",
		"--tenant-hosts", tenantA+"="+addr+";"+tenantB+"="+strings.TrimPrefix(redirect.URL, "http://"))
	index := func(who, tenant, repo, location string) (int, string) {
		b, _ := json.Marshal(api.IndexRequest{Tenant: tenant, Repo: repo, Location: location})
		return s.do(t, "POST", "/v1/index", who, string(b))
	}
	if code, body := index(tenantA, tenantA, "ledger", base+"/ledger/.git"); code != http.StatusAccepted {
		t.Fatalf("acme's index from its own host = %d %s, want 202", code, body)
	}
	if st := s.waitSettled(t, tenantA, "ledger"); st == nil || st.Head == nil || st.LastError != "" {
		t.Fatalf("acme's repository from its own host: %+v, want published", st)
	}
	for _, tc := range []struct{ who, what string }{{tenantB, "beta's key"}, {api.AllTenants, "an operator on beta's behalf"}} {
		if code, body := index(tc.who, tenantB, "ledger", base+"/ledger/.git"); code != http.StatusForbidden {
			t.Errorf("%s naming acme's host = %d %s, want 403", tc.what, code, body)
		} else if strings.Contains(body, addr) && tc.who == tenantB {
			// The refusal may name the host the caller gave; nothing more.
			if strings.Contains(body, tenantA) {
				t.Errorf("the refusal names the tenant the host is reserved for: %s", body)
			}
		}
	}
	// A host of beta's own that redirects to acme's.
	if code, body := index(tenantB, tenantB, "stolen", redirect.URL+"/ledger/.git"); code != http.StatusAccepted {
		t.Fatalf("beta's index through its redirect = %d %s, want 202 (refused when cloned)", code, body)
	}
	st := s.waitSettled(t, tenantB, "stolen")
	if st == nil || st.Head != nil || !strings.Contains(st.LastError, "not allowed") {
		t.Errorf("beta's repository redirected to acme's host: %+v, want no HEAD and the refusal", st)
	} else {
		t.Logf("beta's clone through its redirect: %s", st.LastError)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, repo := range []string{"ledger", "stolen"} {
		if r, err := s.client(tenantB).Query(ctx, api.QueryRequest{Tenant: tenantB, Repo: repo, Query: "SecretTotal", Budget: 1000}); err == nil {
			t.Errorf("beta's query of %s answered %d chunks", repo, len(r.Chunks))
		}
	}
	s.assertServes(t)
}

func TestParseTenantHosts(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want map[string][]string
		err  string
	}{
		{"", nil, ""},
		{"acme=git.acme.internal,.acme.corp; beta=git.beta.internal:8443;", map[string][]string{"acme": {"git.acme.internal", ".acme.corp"}, "beta": {"git.beta.internal:8443"}}, ""},
		{"acme=a.example;acme=b.example", map[string][]string{"acme": {"a.example", "b.example"}}, ""},
		{"acme", nil, "want TENANT=HOST"},
		{"acme=", nil, "want TENANT=HOST"},
		{"../x=a.example", nil, "want TENANT=HOST"},
		{"acme=git.shared.example;beta=GIT.shared.example", nil, "reserved for both acme and beta"},
	} {
		got, err := parseTenantHosts(tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("parseTenantHosts(%q) error = %v, want %q", tt.in, err, tt.err)
		case tt.err == "" && err != nil:
			t.Errorf("parseTenantHosts(%q): %v", tt.in, err)
		case tt.err == "" && !reflect.DeepEqual(got, tt.want):
			t.Errorf("parseTenantHosts(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
