package main

// The security suite: attacks on a real `codectx up` started with API keys
// and webhook secrets, over real HTTP, with git repositories made by the
// test. Each attack checks the status code, that nothing was indexed, that
// nothing leaked (the other tenant's secret is in no answer and in no
// segment of the attacker's tenant), that local listeners saw no request,
// and that the server still answers a valid query afterwards.
//
// The harness (startSecureUp, secureStack and its methods, newTrap) is
// shared by every attack class; docs/security.md lists the tests.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/index"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Tenants of the secure stack and the secret only beta's repository holds.
const (
	tenantA    = "acme"
	tenantB    = "beta"
	betaSecret = "BetaVaultSecretMarker7f3a"
)

// secureStack is a running `codectx up --api-keys --webhook-secrets` with
// two tenants (acme owns repository "shop", beta owns "vault", which holds
// betaSecret) and an operator key.
type secureStack struct {
	up      *upProc
	base    string
	data    string
	keys    map[string]string   // tenant -> API key; api.AllTenants -> the operator's
	secrets map[string]string   // tenant -> webhook secret
	commit  map[string]string   // tenant/repo -> indexed commit
	repos   map[string][]string // tenant -> the repositories it should have published
	shopDir string              // acme/shop's repository
	vault   string              // beta/vault's repository
	args    []string            // up's arguments (a test restarts it with others)
}

// startSecureUp starts the stack, with extra flags for up, and indexes the
// two tenants' repositories with the operator key.
func startSecureUp(t *testing.T, extra ...string) *secureStack {
	t.Helper()
	s := &secureStack{
		data: t.TempDir(),
		keys: map[string]string{
			tenantA: "acme-key-0123456789", tenantB: "beta-key-0123456789", api.AllTenants: "operator-key-0123456789",
		},
		secrets: map[string]string{tenantA: "acme-webhook-secret-0123", tenantB: "beta-webhook-secret-0123"},
		commit:  map[string]string{},
		repos:   map[string][]string{},
	}
	cfg := t.TempDir()
	hashed := map[string]string{}
	for tenant, key := range s.keys {
		hashed[api.HashKey(key)] = tenant
	}
	keysFile := writeJSON(t, filepath.Join(cfg, "keys.json"), hashed)
	secretsFile := writeJSON(t, filepath.Join(cfg, "secrets.json"), s.secrets)
	addr := freeAddr(t)
	s.base = "http://" + addr
	args := append([]string{"--data", s.data, "--listen", addr, "--api-keys", keysFile, "--webhook-secrets", secretsFile,
		"--rate-limit", "-1"}, extra...) // the rate limit has its own test (security_http_test.go)
	s.args = args
	s.up = startUp(t, args...)
	s.up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(s.up.out.String(), "serving on") })

	s.shopDir, _ = gitFixture(t)
	s.vault = commitTree(t, filepath.Join(t.TempDir(), "vault"), map[string]string{
		"vault/keys.go": "package vault\n\n// MasterToken unlocks the vault.\nconst MasterToken = \"" + betaSecret + "\"\n",
	})
	s.index(t, tenantA, "shop", s.shopDir)
	s.index(t, tenantB, "vault", s.vault)
	return s
}

func writeJSON(t *testing.T, path string, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// commitTree commits files to a new repository in dir and returns dir.
func commitTree(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Commit("initial", &git.CommitOptions{Author: &object.Signature{Name: "A", Email: "a@example.com", When: time.Unix(1700000000, 0)}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// client is an API client with the key of tenant (api.AllTenants: the
// operator's; "" no key).
func (s *secureStack) client(tenant string) *api.Client {
	return &api.Client{BaseURL: s.base, Key: s.keys[tenant], PollInterval: 100 * time.Millisecond}
}

// index indexes dir into tenant/repo with the operator key and waits.
func (s *secureStack) index(t *testing.T, tenant, repo, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := s.client(api.AllTenants)
	if _, err := cl.Index(ctx, api.IndexRequest{Tenant: tenant, Repo: repo, Location: dir}); err != nil {
		t.Fatalf("index %s/%s: %v", tenant, repo, err)
	}
	st, err := cl.WaitIndexed(ctx, tenant, repo, "")
	if err != nil {
		t.Fatalf("index %s/%s: %v", tenant, repo, err)
	}
	s.commit[tenant+"/"+repo] = st.LastCommit
	s.repos[tenant] = append(s.repos[tenant], repo)
	sort.Strings(s.repos[tenant])
}

// do sends one raw request with the key of tenant ("" none) and returns
// the status code and body.
func (s *secureStack) do(t *testing.T, method, path, tenant, body string) (int, string) {
	t.Helper()
	return s.doKey(t, method, path, s.keys[tenant], body)
}

func (s *secureStack) doKey(t *testing.T, method, path, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return send(t, req)
}

func send(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// githubPush is a GitHub push delivery of repo at commit from cloneURL.
func githubPush(repo, cloneURL, commit string) string {
	b, _ := json.Marshal(map[string]any{
		"ref": "refs/heads/master", "before": strings.Repeat("0", 40), "after": commit,
		"repository": map[string]string{"full_name": repo, "clone_url": cloneURL, "default_branch": "master"},
	})
	return string(b)
}

// webhook posts a GitHub push delivery for tenant, signed with the
// tenant's secret (sign false: with a wrong one).
func (s *secureStack) webhook(t *testing.T, tenant, body string, sign bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", s.base+"/v1/webhooks/github/"+tenant, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	secret := s.secrets[tenant]
	if !sign {
		secret = "not-the-secret-of-anyone"
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	return send(t, req)
}

// heads lists the repositories of tenant that have a published HEAD, read
// from the store itself.
func (s *secureStack) heads(t *testing.T, tenant string) []string {
	t.Helper()
	st, err := openStore(s.data)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := st.List(context.Background(), "heads/"+tenant+"/")
	if err != nil {
		t.Fatal(err)
	}
	var repos []string
	for _, k := range keys {
		repos = append(repos, strings.TrimSuffix(strings.TrimPrefix(k, "heads/"+tenant+"/"), "/@/HEAD"))
	}
	return repos
}

// assertClean checks the aftermath of an attack: every tenant has exactly
// its own repositories published, no segment of acme holds beta's secret,
// a query of each repository answers from its own commit, and no answer
// body seen by the attack (bodies) names a server path, a blob key or
// beta's secret.
func (s *secureStack) assertClean(t *testing.T, bodies ...string) {
	t.Helper()
	for _, tenant := range []string{tenantA, tenantB, index.DefaultTenant} {
		if got := s.heads(t, tenant); !slices.Equal(got, s.repos[tenant]) {
			t.Errorf("tenant %s has published %v, want %v", tenant, got, s.repos[tenant])
		}
	}
	st, err := openStore(s.data)
	if err != nil {
		t.Fatal(err)
	}
	segs, err := st.List(context.Background(), "segments/"+tenantA+"/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range segs {
		data, err := st.Get(context.Background(), k)
		if err != nil && !errorsIsNotFound(err) {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte(betaSecret)) {
			t.Errorf("segment %s of tenant %s holds beta's secret", k, tenantA)
		}
	}
	for _, b := range bodies {
		for _, bad := range []string{betaSecret, s.data, s.vault, os.TempDir(), "heads/", "segments/", "no such file"} {
			if strings.Contains(b, bad) {
				t.Errorf("an answer leaks %q: %s", bad, b)
			}
		}
	}
	s.assertServes(t)
}

func errorsIsNotFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), blob.ErrNotFound.Error())
}

// assertServes checks that each tenant's query still answers from its own
// repository, and that acme's answer holds nothing of beta's.
func (s *secureStack) assertServes(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := s.client(tenantA).Query(ctx, api.QueryRequest{Tenant: tenantA, Repo: "shop", Query: "MasterToken vault keys refund", Budget: 2000})
	if err != nil {
		t.Fatalf("acme's query after the attack: %v", err)
	}
	if resp.Commit != s.commit[tenantA+"/shop"] || len(resp.Chunks) == 0 {
		t.Fatalf("acme's query after the attack answered commit %s with %d chunks", resp.Commit, len(resp.Chunks))
	}
	b, _ := json.Marshal(resp.Chunks)
	if bytes.Contains(b, []byte(betaSecret)) || bytes.Contains(b, []byte("MasterToken")) {
		t.Errorf("acme's answer holds beta's code: %s", b)
	}
	resp, err = s.client(tenantB).Query(ctx, api.QueryRequest{Tenant: tenantB, Repo: "vault", Query: "MasterToken", Budget: 2000})
	if err != nil || len(resp.Chunks) == 0 {
		t.Fatalf("beta's query after the attack: %v, %+v", err, resp)
	}
}

// waitSettled waits until tenant/repo's workflow (if any) has finished
// what it received, and returns the status tenant's key sees (nil: unknown).
func (s *secureStack) waitSettled(t *testing.T, tenant, repo string) *api.RepoStatus {
	t.Helper()
	return s.waitSettledAs(t, tenant, tenant, repo)
}

// waitSettledAs is waitSettled with the key of who (api.AllTenants: the
// operator, who sees last_error in full).
func (s *secureStack) waitSettledAs(t *testing.T, who, tenant, repo string) *api.RepoStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		st, err := s.client(who).Status(ctx, tenant, repo)
		if api.IsNotFound(err) {
			return nil
		}
		if err == nil && st.Done() {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("status of %s/%s did not settle: %v %+v", tenant, repo, err, st)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// trap is a local listener that counts the connections it accepts and
// answers HTTP: a target a fetch must never reach.
type trap struct {
	l     net.Listener
	conns atomic.Int64
}

// newTrap listens on addr ("127.0.0.1:0", "[::1]:0"); it skips the test
// when the address family is missing.
func newTrap(t *testing.T, addr string) *trap {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("no listener on %s: %v", addr, err)
	}
	tr := &trap{l: l}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
	}), ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			tr.conns.Add(1)
		}
	}}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return tr
}

// Addr is the trap's host:port.
func (tr *trap) Addr() string { return tr.l.Addr().String() }

// assertUntouched fails if the trap saw a connection.
func (tr *trap) assertUntouched(t *testing.T) {
	t.Helper()
	if n := tr.conns.Load(); n != 0 {
		t.Errorf("the listener on %s received %d connections", tr.Addr(), n)
	}
}

// TestSecurity is the suite on one stack: each attack class is a subtest.
func TestSecurity(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	s := startSecureUp(t)
	t.Run("locations", func(t *testing.T) { testLocations(t, s) })
	t.Run("names", func(t *testing.T) { testNames(t, s) })
	t.Run("ssrf", func(t *testing.T) { testSSRF(t, s) })
	t.Run("nested repositories", func(t *testing.T) { testNested(t, s) })
	t.Run("skipped names and revision", func(t *testing.T) { testSkippedNames(t, s) })
}

// The files a snapshot left out are named in its status and in read's
// errors, and the revision it follows is recorded beside its location:
// beta's generated file, whose name is a secret of its own, and its
// branch reach acme by no route (status, reindex, MCP read, acme's own
// status), and acme's registry records nothing of beta's repository.
func testSkippedNames(t *testing.T, s *secureStack) {
	const name = "ledger/LedgerNameSecret9c1e.pb.go"
	dir := commitTree(t, filepath.Join(t.TempDir(), "ledger"), map[string]string{
		name:             "// Code generated by protoc-gen-go. DO NOT EDIT.\n\npackage ledger\n",
		"ledger/main.go": "package ledger\n\n// Post books an entry.\nfunc Post() {}\n",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	op := s.client(api.AllTenants)
	if _, err := op.Index(ctx, api.IndexRequest{Tenant: tenantB, Repo: "ledger", Location: dir, Commit: "master"}); err != nil {
		t.Fatal(err)
	}
	own, err := op.WaitIndexed(ctx, tenantB, "ledger", "")
	if err != nil {
		t.Fatal(err)
	}
	s.repos[tenantB] = append(s.repos[tenantB], "ledger")
	sort.Strings(s.repos[tenantB])
	// beta sees its file named, and the revision it follows.
	code, body := s.do(t, "GET", "/v1/repos/beta/ledger/status", tenantB, "")
	if code != 200 || !strings.Contains(body, "LedgerNameSecret9c1e") || own.Rev != "master" {
		t.Fatalf("beta's status = %d %.300s (revision %q), want its skipped file named and master followed", code, body, own.Rev)
	}
	var bodies, errs []string // every answer to acme; its refusals
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/repos/beta/ledger/status"}, {"GET", "/v1/repos/acme/ledger/status"}, {"GET", "/v1/repos/acme/shop/status"},
		{"POST", "/v1/repos/beta/ledger/reindex"}, {"POST", "/v1/repos/acme/ledger/reindex"},
	} {
		code, body := s.do(t, c.method, c.path, tenantA, "")
		if c.path != "/v1/repos/acme/shop/status" && code < 400 {
			t.Errorf("acme's %s %s = %d %.200s, want it refused", c.method, c.path, code, body)
		}
		bodies = append(bodies, body)
		if code >= 400 {
			errs = append(errs, body)
		}
	}
	for _, repo := range []string{"ledger", "beta/ledger"} {
		_, body := s.mcpCall(t, tenantA, "read", map[string]any{"repo": repo, "path": name})
		bodies, errs = append(bodies, body), append(errs, body)
	}
	for _, b := range bodies {
		if strings.Contains(b, "LedgerNameSecret9c1e") {
			t.Errorf("an answer to acme names beta's skipped file: %.300s", b)
		}
	}
	st, err := openStore(s.data)
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := st.List(ctx, "repos/"+tenantA+"/ledger"); err != nil || len(keys) != 0 {
		t.Errorf("acme's registry holds %v (%v) after its requests for beta's ledger", keys, err)
	}
	s.assertClean(t, errs...)
}

// Repositories "org" and "org/app" of one tenant both publish (on the local
// store a HEAD object used to sit where the other's keys needed a
// directory), and each answers from its own index.
func testNested(t *testing.T, s *secureStack) {
	vault2 := commitTree(t, filepath.Join(t.TempDir(), "app"), map[string]string{
		"app/main.go": "package app\n\n// LaunchRocket starts the countdown.\nfunc LaunchRocket() {}\n",
	})
	s.index(t, tenantA, "org", s.shopDir)
	s.index(t, tenantA, "org/app", vault2)
	s.index(t, tenantA, "org/app/x", s.shopDir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for repo, want := range map[string]string{"org": "payment/refund.go", "org/app": "app/main.go", "org/app/x": "payment/refund.go"} {
		resp, err := s.client(tenantA).Query(ctx, api.QueryRequest{Tenant: tenantA, Repo: repo, Query: "LaunchRocket IssueRefund", Budget: 500})
		if err != nil || len(resp.Chunks) == 0 || resp.Chunks[0].Path != want {
			t.Errorf("query %s: %v %+v, want first %s", repo, err, resp, want)
		}
	}
	s.assertClean(t)
}

// traversals are locations that name beta's repository (at vault) on the
// server in ways a classifier may mistake for a clone URL.
func traversals(vault string) []string {
	up := strings.Repeat("../", 24)
	return []string{
		"x://" + up + strings.TrimPrefix(vault, "/"),
		"a@b:/" + up + strings.TrimPrefix(vault, "/"),
		"HTTP://" + up + strings.TrimPrefix(vault, "/"),
		"Https://" + up + strings.TrimPrefix(vault, "/"),
		"x://%2e%2e/%2e%2e/" + strings.TrimPrefix(vault, "/"),
		"https://%2e%2e/%2e%2e" + vault,
		"https://..//" + up + strings.TrimPrefix(vault, "/"),
		"ssh://" + up + strings.TrimPrefix(vault, "/"),
		"git@:" + vault,
		"file://" + vault,
		"file://localhost" + vault,
		vault,
		vault + "/.git",
		up + strings.TrimPrefix(vault, "/"),
		"./" + up + strings.TrimPrefix(vault, "/"),
		"C:" + vault,
		" " + vault,
		vault + "\n",
		"x://" + up + "nonexistent-dir-probe",
	}
}

// A tenant key cannot have a path on the server indexed, however the path
// is dressed up, through the index route or a signed webhook.
func testLocations(t *testing.T, s *secureStack) {
	var bodies []string
	for _, loc := range traversals(s.vault) {
		body, _ := json.Marshal(api.IndexRequest{Tenant: tenantA, Repo: "stolen", Location: loc})
		code, resp := s.do(t, "POST", "/v1/index", tenantA, string(body))
		if code != http.StatusBadRequest && code != http.StatusForbidden {
			t.Errorf("index %q as acme = %d %s, want 400 or 403", loc, code, resp)
		}
		bodies = append(bodies, resp)
		code, resp = s.webhook(t, tenantA, githubPush("acme/stolen", loc, strings.Repeat("1", 40)), true)
		if code != http.StatusBadRequest && code != http.StatusForbidden {
			t.Errorf("webhook clone_url %q = %d %s, want 400 or 403", loc, code, resp)
		}
		bodies = append(bodies, resp)
	}
	for _, repo := range []string{"stolen", "acme/stolen"} {
		if st := s.waitSettled(t, tenantA, repo); st != nil {
			t.Errorf("a refused location started indexing %s: %+v", repo, st)
		}
	}
	s.assertClean(t, bodies...)
}

// Names cannot traverse, collide across tenants or leak keys: every name
// field of every route, raw and percent-encoded.
func testNames(t *testing.T, s *secureStack) {
	badTenants := []string{"..", ".", "acme/sub", "acme/..", "beta/../acme", "acme/", "/acme", "a//b", "", "acme\x00"}
	badRepos := []string{"..", ".", "../vault", "./shop", "shop/.", "shop/..", "a/./b", "a//b", "/shop", "shop/", "%2e%2e", "sh op", "vault/@/HEAD", "x\\y"}
	var bodies []string
	check := func(what string, code int, body string, want ...int) {
		t.Helper()
		if !slices.Contains(want, code) {
			t.Errorf("%s = %d %s, want %v", what, code, body, want)
		}
		if code >= 400 {
			bodies = append(bodies, body) // error bodies name no key or path
		}
	}
	for _, key := range []string{tenantA, api.AllTenants} {
		for _, tn := range badTenants {
			if tn == "" {
				continue // the default tenant
			}
			q, _ := json.Marshal(api.QueryRequest{Tenant: tn, Repo: "vault", Query: "MasterToken"})
			code, body := s.do(t, "POST", "/v1/query", key, string(q))
			check("query tenant "+tn, code, body, 400)
			ix, _ := json.Marshal(api.IndexRequest{Tenant: tn, Repo: "x", Location: "https://github.com/a/b"})
			code, body = s.do(t, "POST", "/v1/index", key, string(ix))
			check("index tenant "+tn, code, body, 400)
		}
		for _, rp := range badRepos {
			q, _ := json.Marshal(api.QueryRequest{Tenant: tenantA, Repo: rp, Query: "MasterToken"})
			code, body := s.do(t, "POST", "/v1/query", key, string(q))
			check("query repo "+rp, code, body, 400)
			ix, _ := json.Marshal(api.IndexRequest{Tenant: tenantA, Repo: rp, Location: "https://github.com/a/b"})
			code, body = s.do(t, "POST", "/v1/index", key, string(ix))
			check("index repo "+rp, code, body, 400)
			code, body = s.webhook(t, tenantA, githubPush(rp, "https://github.com/a/b", strings.Repeat("1", 40)), true)
			check("webhook repo "+rp, code, body, 400)
		}
	}
	// Path segments of the status and webhook routes, raw and encoded. The
	// mux answers a raw ".." with a redirect to the cleaned path, which
	// acme's key does not reach.
	for _, path := range []string{
		"/v1/repos/%2e%2e/beta/vault/status", "/v1/repos/acme%2Fsub/vault/status", "/v1/repos/acme/%2e%2e/beta/vault/status",
		"/v1/repos/acme/..%2Fbeta/vault/status", "/v1/repos/acme/.%2Fshop/status", "/v1/repos/acme/shop%2F./status",
		"/v1/repos/acme/../beta/vault/status", "/v1/repos/acme/shop%2F..%2F..%2Fbeta%2Fvault/status", "/v1/repos/beta/vault/status",
		"/v1/repos/acme/shop/@/HEAD/status",
	} {
		code, body := s.do(t, "GET", path, tenantA, "")
		check("GET "+path, code, body, 400, 403, 404)
	}
	for _, tn := range []string{"acme%2Fsub", "%2e%2e", "acme%2F..%2Fbeta", "."} {
		code, body := s.webhook(t, tn, githubPush("acme/shop", "https://github.com/a/b", strings.Repeat("1", 40)), true)
		check("webhook tenant "+tn, code, body, 400, 403, 404)
	}
	s.assertClean(t, bodies...)
}

// ssrfTargets are clone URLs on addresses a tenant must not reach; %s is
// the port of a local listener (open) or of a closed port.
var ssrfTargets = []string{
	"https://127.0.0.1:%s/x.git", "http://127.0.0.1:%s/x.git", "git://127.0.0.1:%s/x.git", "ssh://git@127.0.0.1:%s/x.git",
	"https://localhost:%s/x.git", "https://LOCALHOST.:%s/x.git", "https://a.localhost:%s/x.git",
	"https://0.0.0.0:%s/x.git", "https://[::]:%s/x.git", "https://[::ffff:127.0.0.1]:%s/x.git", "https://[::1]:%s/x.git",
	"https://2130706433:%s/x.git", "https://0x7f000001:%s/x.git", "https://127.1:%s/x.git", "https://vm:%s/x.git",
	"https://u:p@127.0.0.1:%s/x.git", "git@127.0.0.1:x.git#%s",
	"https://10.0.0.1/x.git#%s", "https://172.16.0.1/x.git#%s", "https://192.168.0.1/x.git#%s", "https://[fd00::1]/x.git#%s",
	"https://169.254.169.254/latest/meta-data/#%s", "https://[fe80::1]/x.git#%s", "https://100.64.0.1/x.git#%s",
}

// refusedError is the status' last_error of a snapshot refused by the
// dial-time or resolve-time check.
const refusedError = "location refused"

// A tenant's clone URL (index route or webhook) cannot make the server
// connect to loopback, private, link-local or CGNAT addresses, by address
// or by a name that resolves there; the answers are the same for an open
// and a closed port. An operator's request for a name that resolves to
// loopback passes the API and is refused where the clone dials.
func testSSRF(t *testing.T, s *secureStack) {
	tr := newTrap(t, "127.0.0.1:0")
	_, open, _ := net.SplitHostPort(tr.Addr())
	closed := closedPort(t)
	var bodies []string
	n := 0
	attempt := func(who, how, tmpl string) {
		t.Helper()
		var answers [2]string
		for i, port := range []string{open, closed} {
			loc := fmt.Sprintf(tmpl, port)
			n++
			repo := fmt.Sprintf("ssrf%d", n)
			var code int
			var body string
			if how == "index" {
				b, _ := json.Marshal(api.IndexRequest{Tenant: tenantA, Repo: repo, Location: loc})
				code, body = s.do(t, "POST", "/v1/index", who, string(b))
			} else {
				repo = "acme/" + repo
				code, body = s.webhook(t, tenantA, githubPush(repo, loc, strings.Repeat("1", 40)), true)
			}
			bodies = append(bodies, body)
			switch code {
			case http.StatusBadRequest, http.StatusForbidden:
				answers[i] = fmt.Sprint(code, strings.ReplaceAll(body, port, "PORT"))
			case http.StatusAccepted:
				st := s.waitSettledAs(t, who, tenantA, repo)
				if st == nil || st.Head != nil || !strings.HasPrefix(st.LastError, refusedError) && who != api.AllTenants {
					t.Errorf("%s %s %q: 202, then %+v; want refused and nothing published", who, how, loc, st)
				}
				if who == api.AllTenants && (st == nil || !strings.Contains(st.LastError, "address not allowed")) {
					t.Errorf("operator %q: 202, then %+v; want refused at the dial", loc, st)
				}
				bodies = append(bodies, st.LastError)
				answers[i] = fmt.Sprint(code, strings.ReplaceAll(st.LastError, port, "PORT"))
			default:
				t.Errorf("%s %s %q = %d %s, want 400, 403 or 202 then refused", who, how, loc, code, body)
			}
		}
		if answers[0] != answers[1] {
			t.Errorf("%s %s %q: an open port answers %q, a closed one %q", who, how, tmpl, answers[0], answers[1])
		}
	}
	for _, tmpl := range ssrfTargets {
		attempt(tenantA, "index", tmpl)
		attempt(tenantA, "webhook", tmpl)
	}
	// The operator passes the tenant checks; a name that resolves to
	// loopback is still refused at the dial.
	if host, err := os.Hostname(); err == nil {
		if ips, err := net.LookupIP(host); err == nil && len(ips) > 0 && ips[0].IsLoopback() {
			attempt(api.AllTenants, "index", "https://"+host+":%s/x.git")
			attempt(api.AllTenants, "index", "http://"+host+":%s/x.git")
		}
	}
	attempt(api.AllTenants, "index", "https://127.1:%s/x.git")
	tr.assertUntouched(t)
	t.Logf("%d SSRF requests, the listener saw none", n)
	// Only what the operator asked for may have a (failed) workflow; no
	// repository was published.
	s.assertClean(t, bodies...)
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	return p
}

// A host on the operator's allow-list is the only one tenants may clone
// from, and may be on loopback; its redirects are not followed off the
// list, so it cannot bounce a clone to a local listener.
func TestSecurityRedirect(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	tr := newTrap(t, "127.0.0.1:0")
	var hops atomic.Int64
	mux := http.NewServeMux()
	gitPath, gitErr := exec.LookPath("git")
	root := t.TempDir()
	if gitErr == nil {
		// A real git host for the positive control: smart HTTP by git
		// http-backend over a bare clone of a fixture.
		src, _ := gitFixture(t)
		if _, err := git.PlainClone(filepath.Join(root, "pub.git"), true, &git.CloneOptions{URL: src}); err != nil {
			t.Fatal(err)
		}
		mux.Handle("/ok/", &cgi.Handler{Path: gitPath, Args: []string{"http-backend"}, Root: "/ok",
			Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	}
	mux.HandleFunc("/to-trap/", func(w http.ResponseWriter, r *http.Request) {
		hops.Add(1)
		http.Redirect(w, r, "http://"+tr.Addr()+r.URL.Path, http.StatusFound)
	})
	mux.HandleFunc("/to-localhost/", func(w http.ResponseWriter, r *http.Request) {
		hops.Add(1)
		_, port, _ := net.SplitHostPort(tr.Addr())
		http.Redirect(w, r, "http://localhost:"+port+r.URL.Path, http.StatusMovedPermanently)
	})
	mux.HandleFunc("/to-metadata/", func(w http.ResponseWriter, r *http.Request) {
		hops.Add(1)
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusTemporaryRedirect)
	})
	host := httptest.NewServer(mux)
	defer host.Close()
	allowed := strings.TrimPrefix(host.URL, "http://")
	s := startSecureUp(t, "--allow-hosts", allowed)

	var bodies []string
	for i, path := range []string{"/to-trap/x.git", "/to-localhost/x.git", "/to-metadata/x.git"} {
		repo := fmt.Sprintf("bounce%d", i)
		b, _ := json.Marshal(api.IndexRequest{Tenant: tenantA, Repo: repo, Location: host.URL + path})
		code, body := s.do(t, "POST", "/v1/index", tenantA, string(b))
		if code != http.StatusAccepted {
			t.Fatalf("index %s on the allowed host = %d %s, want 202", path, code, body)
		}
		st := s.waitSettled(t, tenantA, repo)
		if st == nil || st.Head != nil || !strings.HasPrefix(st.LastError, refusedError) {
			t.Errorf("a redirect from %s: %+v, want refused and nothing published", path, st)
		} else {
			bodies = append(bodies, st.LastError)
		}
	}
	if hops.Load() == 0 {
		t.Error("the allowed host saw no request: the redirects were not exercised")
	}
	tr.assertUntouched(t)
	// Off the list: refused before any fetch.
	for _, loc := range []string{"https://github.com/a/b.git", "https://127.0.0.1:1/x.git", "git@github.com:a/b.git"} {
		b, _ := json.Marshal(api.IndexRequest{Tenant: tenantA, Repo: "offlist", Location: loc})
		if code, body := s.do(t, "POST", "/v1/index", tenantA, string(b)); code != http.StatusForbidden {
			t.Errorf("index %s, not on the allow-list = %d %s, want 403", loc, code, body)
		}
	}
	if gitErr == nil {
		// The allowed host itself works: the guard is not a wall.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cl := s.client(tenantA)
		if _, err := cl.Index(ctx, api.IndexRequest{Tenant: tenantA, Repo: "pub", Location: host.URL + "/ok/pub.git"}); err != nil {
			t.Fatal(err)
		}
		st, err := cl.WaitIndexed(ctx, tenantA, "pub", "")
		if err != nil || st.Head == nil || st.Files != 4 {
			t.Fatalf("clone from the allowed host: %v %+v", err, st)
		}
		s.repos[tenantA] = append(s.repos[tenantA], "pub")
		sort.Strings(s.repos[tenantA])
	} else {
		t.Logf("no git binary: the positive control is skipped")
	}
	s.assertClean(t, bodies...)
}
