package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/testrepo"
)

// A tenant may hold at most --tenant-repos repositories. On a running `up`
// with keys and a bound of 6, beta (holding vault) asks for 16 new
// repositories at once, half by index requests and half by signed
// webhooks, while acme indexes one: exactly 5 of beta's are taken, the
// rest get 409 naming the limit, and the store holds 6 of beta's. Past
// the bound beta is refused by the API and the CLI, yet pushes to,
// re-indexes and reindexes the repositories it holds; acme indexes and
// queries as before; a deleted repository frees a slot for one more.
// Clones come from git's smart HTTP on loopback.
func TestSecurityTenantRepos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	const limit, burst = 6, 16
	root := t.TempDir()
	lib := commitTree(t, filepath.Join(root, "lib"), map[string]string{
		"ledger/ledger.go": "package ledger\n\n// SumLedger adds the rows of the ledger.\nfunc SumLedger(rows []int) int {\n\tn := 0\n\tfor _, r := range rows {\n\t\tn += r\n\t}\n\treturn n\n}\n",
	})
	first := gitRun(t, lib, "rev-parse", "HEAD")
	base := testrepo.SmartHTTP(t, root)
	loc := base + "/lib/.git"
	start := time.Now()
	s := startSecureUp(t, "--allow-hosts", strings.TrimPrefix(base, "http://"), "--tenant-repos", fmt.Sprint(limit))
	ready := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The burst: beta holds vault, so 5 more fit.
	type answer struct {
		repo string
		code int
		body string
	}
	answers := make([]answer, burst)
	var acme answer
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() {
			var a answer
			if i%2 == 0 {
				a.repo = fmt.Sprintf("idx%02d", i)
				a.code, a.body = tryIndex(ctx, s, tenantB, a.repo, loc)
			} else {
				a.repo = fmt.Sprintf("hook/n%02d", i)
				a.code, a.body = tryWebhook(ctx, s, tenantB, githubPush(a.repo, loc, first))
			}
			answers[i] = a
		})
	}
	wg.Go(func() {
		acme.repo = "ledger"
		acme.code, acme.body = tryIndex(ctx, s, tenantA, acme.repo, loc)
	})
	wg.Wait()
	burstTook := time.Since(ready)
	var taken []string
	refused := 0
	for _, a := range answers {
		switch a.code {
		case http.StatusAccepted:
			taken = append(taken, a.repo)
		case http.StatusConflict:
			refused++
			if !isLimitError(a.body, tenantB, limit) {
				t.Errorf("beta's %s refused with %s, want a JSON error naming the limit", a.repo, a.body)
			}
		default:
			t.Errorf("beta's %s: %d %s", a.repo, a.code, a.body)
		}
	}
	if len(taken) != limit-1 || refused != burst-(limit-1) {
		t.Fatalf("beta's burst of %d: %d taken %v, %d refused; want %d taken", burst, len(taken), taken, refused, limit-1)
	}
	if acme.code != http.StatusAccepted {
		t.Errorf("acme's index during beta's burst: %d %s", acme.code, acme.body)
	}
	held := s.held(t, tenantB)
	if len(held) != limit || !slices.Contains(held, "vault") {
		t.Errorf("the store holds %v of beta's, want vault and the %d taken", held, limit-1)
	}

	// Past the bound: the API and the CLI say so.
	if code, body := tryIndex(ctx, s, tenantB, "late", loc); code != http.StatusConflict || !isLimitError(body, tenantB, limit) {
		t.Errorf("beta's index past the bound: %d %s, want 409 naming the limit", code, body)
	}
	t.Setenv(envAPIKey, s.keys[tenantB])
	var out, errOut strings.Builder
	err := run(ctx, []string{"index", "--server", s.base, "--tenant", tenantB, "--name", "cli-new", "--timeout", "30s", loc}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "tenant-repos: 6") || !strings.Contains(err.Error(), "HTTP 409") {
		t.Errorf("codectx index --server past the bound: %v, want the limit and HTTP 409", err)
	}

	// What beta holds still moves at the bound: every taken repository is
	// indexed; a push of a new commit to each, an index request for one,
	// and a reindex of vault are taken.
	for _, repo := range taken {
		if st := s.waitSettled(t, tenantB, repo); st == nil || st.LastError != "" || st.Head == nil {
			t.Errorf("beta's %s: %+v", repo, st)
		}
	}
	second := commitFiles(t, lib, map[string]string{"ledger/close.go": "package ledger\n\n// CloseLedger ends the day.\nfunc CloseLedger() {}\n"})
	for _, repo := range taken {
		if code, body := tryWebhook(ctx, s, tenantB, githubPush(repo, loc, second)); code != http.StatusAccepted {
			t.Errorf("beta's push to its own %s at the bound: %d %s", repo, code, body)
		}
	}
	if code, body := tryIndex(ctx, s, tenantB, taken[0], loc); code != http.StatusAccepted {
		t.Errorf("beta's index of its own %s at the bound: %d %s", taken[0], code, body)
	}
	if code, body := s.do(t, "POST", "/v1/repos/beta/vault/reindex", tenantB, ""); code != http.StatusAccepted {
		t.Errorf("beta's reindex of vault at the bound: %d %s", code, body)
	}
	for _, repo := range taken {
		st, err := s.client(tenantB).WaitIndexed(ctx, tenantB, repo, second)
		if err != nil || st.LastCommit != second {
			t.Errorf("beta's %s after its push: %+v %v, want commit %s", repo, st, err, second)
		}
	}

	// Acme is not affected: its repository of the burst answers, and it
	// takes another.
	if _, err := s.client(tenantA).WaitIndexed(ctx, tenantA, "ledger", ""); err != nil {
		t.Fatal(err)
	}
	if code, body := tryIndex(ctx, s, tenantA, "ledger2", loc); code != http.StatusAccepted {
		t.Errorf("acme's second new repository: %d %s", code, body)
	}
	resp, err := s.client(tenantA).Query(ctx, api.QueryRequest{Tenant: tenantA, Repos: []string{"*"}, Query: "SumLedger", Budget: 1000})
	if err != nil || len(resp.Chunks) == 0 || !strings.Contains(resp.Chunks[0].Path, "ledger.go") {
		t.Errorf("acme's query: %v %+v", err, resp)
	}
	s.assertServes(t)

	// A deleted repository frees its slot, for one more only.
	if _, err := s.client(api.AllTenants).Delete(ctx, tenantB, taken[len(taken)-1]); err != nil {
		t.Fatal(err)
	}
	if st, err := s.client(api.AllTenants).Status(ctx, tenantB, taken[len(taken)-1]); err == nil && st.Head != nil {
		t.Errorf("the deleted repository still has a HEAD: %+v", st.Head)
	}
	if code, body := tryIndex(ctx, s, tenantB, "after-delete", loc); code != http.StatusAccepted {
		t.Errorf("beta's new repository after a delete: %d %s", code, body)
	}
	if code, body := tryIndex(ctx, s, tenantB, "after-delete-2", loc); code != http.StatusConflict {
		t.Errorf("beta's second new repository after one delete: %d %s, want 409", code, body)
	}
	if held := s.held(t, tenantB); len(held) != limit {
		t.Errorf("the store holds %v of beta's, want %d", held, limit)
	}
	// Beta's list is what the bound counts, published or not; acme may
	// not read it.
	if code, body := s.do(t, "GET", "/v1/repos?tenant=beta&limit=100", tenantB, ""); code != http.StatusOK {
		t.Errorf("beta's list: %d %s", code, body)
	} else {
		var page api.RepoPage
		if err := json.Unmarshal([]byte(body), &page); err != nil || len(page.Repos) != limit {
			t.Errorf("beta's list holds %d repositories (%v), want the %d it holds", len(page.Repos), err, limit)
		}
	}
	if code, body := s.do(t, "GET", "/v1/repos?tenant=beta", tenantA, ""); code != http.StatusForbidden || strings.Contains(body, "vault") {
		t.Errorf("acme listing beta's repositories: %d %s, want 403 and nothing of beta's", code, body)
	}
	// Nothing left running when up stops.
	for _, r := range []struct{ tenant, repo string }{{tenantB, "vault"}, {tenantB, "after-delete"}, {tenantA, "ledger2"}} {
		if st := s.waitSettled(t, r.tenant, r.repo); st == nil || st.LastError != "" {
			t.Errorf("%s/%s: %+v", r.tenant, r.repo, st)
		}
	}
	t.Logf("up ready in %v; beta's burst of %d answered in %v; whole test %v",
		ready.Sub(start).Round(time.Millisecond), burst, burstTook.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// isLimitError reports whether body is the API's JSON error naming the
// repository limit of tenant.
func isLimitError(body, tenant string, limit int) bool {
	var e api.ErrorBody
	if json.Unmarshal([]byte(body), &e) != nil {
		return false
	}
	return strings.Contains(e.Error, fmt.Sprintf("tenant-repos: %d", limit)) && strings.Contains(e.Error, fmt.Sprintf("%q holds", tenant))
}

// tryIndex asks, with tenant's key, for tenant/repo from loc. Errors of
// the transport come back as code 0: it runs off the test's goroutine.
func tryIndex(ctx context.Context, s *secureStack, tenant, repo, loc string) (int, string) {
	b, _ := json.Marshal(api.IndexRequest{Tenant: tenant, Repo: repo, Location: loc})
	req, err := http.NewRequestWithContext(ctx, "POST", s.base+"/v1/index", strings.NewReader(string(b)))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.keys[tenant])
	return trySend(req)
}

// tryWebhook posts a GitHub push delivery signed with tenant's secret.
func tryWebhook(ctx context.Context, s *secureStack, tenant, body string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, "POST", s.base+"/v1/webhooks/github/"+tenant, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-Hub-Signature-256", signGitHub(s.secrets[tenant], body))
	return trySend(req)
}

func trySend(req *http.Request) (int, string) {
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// held lists the repositories tenant holds, read from the store itself:
// registered or published.
func (s *secureStack) held(t *testing.T, tenant string) []string {
	t.Helper()
	st, err := openStore(s.data)
	if err != nil {
		t.Fatal(err)
	}
	names := s.heads(t, tenant)
	keys, err := st.List(context.Background(), "repos/"+tenant+"/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if name, ok := strings.CutSuffix(strings.TrimPrefix(k, "repos/"+tenant+"/"), "/@/REPO"); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// signGitHub is the X-Hub-Signature-256 of body under secret.
func signGitHub(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func TestTenantReposDefault(t *testing.T) {
	for _, tc := range []struct {
		flag  int
		multi bool
		want  int
	}{
		{0, true, api.DefaultTenantRepos}, // keys on, or the gateway
		{0, false, -1},                    // `up` with one user
		{3, false, 3},
		{3, true, 3},
		{-1, true, -1},
	} {
		if got := tenantRepos(tc.flag, tc.multi); got != tc.want {
			t.Errorf("tenantRepos(%d, %v) = %d, want %d", tc.flag, tc.multi, got, tc.want)
		}
	}
}

// --tenant-repos is taken by the roles that accept new repositories (up,
// gateway), from the flag or CODECTX_TENANT_REPOS, and by no other.
func TestTenantReposFlag(t *testing.T) {
	t.Setenv(envTenantRepos, "7")
	var v int
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	tenantReposFlag(fs, &v, "")
	if err := fs.Parse(nil); err != nil || v != 7 {
		t.Errorf("from %s=7: %d %v", envTenantRepos, v, err)
	}
	if err := fs.Parse([]string{"--tenant-repos", "-1"}); err != nil || v != -1 {
		t.Errorf("--tenant-repos -1: %d %v", v, err)
	}
	for cmd, want := range map[string]bool{"up": true, "gateway": true, "query-service": false, "orchestrator": false} {
		var out, errOut strings.Builder
		if err := run(context.Background(), []string{cmd, "--help"}, &out, &errOut); err != nil {
			t.Fatalf("%s --help: %v", cmd, err)
		}
		if got := strings.Contains(out.String()+errOut.String(), "-tenant-repos"); got != want {
			t.Errorf("%s takes --tenant-repos: %v, want %v", cmd, got, want)
		}
	}
}
