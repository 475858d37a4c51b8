package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/blob/local"
	"codectx/pkg/index"
	"codectx/pkg/keys"
)

// capIndexer is an Indexer that records the location of each push, so
// that a reindex finds it, and counts the pushes it was sent.
type capIndexer struct {
	mu     sync.Mutex
	pushes map[string]int
	loc    map[string]string
	closed []string
	before func(IndexRequest) // runs once, before the next push is taken
}

func (f *capIndexer) CloseRepo(_ context.Context, tenant, repo string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = append(f.closed, tenant+"/"+repo)
	_, ok := f.loc[tenant+"/"+repo]
	return ok, nil
}

func (f *capIndexer) Index(_ context.Context, req IndexRequest) (string, error) {
	f.mu.Lock()
	before := f.before
	f.before = nil
	f.mu.Unlock()
	if before != nil {
		before(req)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pushes == nil {
		f.pushes, f.loc = map[string]int{}, map[string]string{}
	}
	f.pushes[req.Tenant+"/"+req.Repo]++
	f.loc[req.Tenant+"/"+req.Repo] = req.Location
	return "run", nil
}

func (f *capIndexer) Status(_ context.Context, tenant, repo string) (RepoStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	loc, ok := f.loc[tenant+"/"+repo]
	if !ok {
		return RepoStatus{}, ErrUnknownRepo
	}
	return RepoStatus{Tenant: tenant, Repo: repo, State: StateIdle, Location: loc}, nil
}

func (f *capIndexer) signalled(tenant string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k := range f.pushes {
		if strings.HasPrefix(k, tenant+"/") {
			n++
		}
	}
	return n
}

// capKeys are the keys of the tests: acme and beta (scope index and
// admin), default (index), the operator.
type capKeys map[string]keys.Key

func (k capKeys) Lookup(tok string) (keys.Key, bool) { v, ok := k[tok]; return v, ok }

var testCapKeys = capKeys{
	"acme":        {Tenant: "acme", Scope: keys.Index},
	"acme-admin":  {Tenant: "acme", Scope: keys.Admin},
	"beta":        {Tenant: "beta", Scope: keys.Index},
	"default-key": {Tenant: index.DefaultTenant, Scope: keys.Index},
	"operator":    {Tenant: AllTenants, Scope: keys.Admin},
}

// capCall sends one request with a key and returns the status and the
// decoded error body.
func capCall(t *testing.T, method, url, key, body string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e ErrorBody
	json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error
}

func indexBody(tenant, repo string) string {
	return fmt.Sprintf(`{"tenant":%q,"repo":%q,"location":"https://git.example/%s/%s.git"}`, tenant, repo, tenant, repo)
}

// TestTenantRepos walks one tenant to its bound and back through every
// route that creates a repository: index, webhook, reindex; DELETE frees
// a slot, the operator is not bounded, another tenant is not affected, and
// repositories published before the bound count.
func TestTenantRepos(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "") // default/demo: a HEAD, no registration
	ix := &capIndexer{}
	srv := &Server{Store: store, Indexer: ix, Routes: AllRoutes, KeyStore: testCapKeys, Limits: Limits{TenantRepos: 3},
		Webhooks: WebhookConfig{Secrets: map[string]string{"acme": "acme-secret-0123456789"}}}
	ts, _ := newServer(t, srv)
	hook := func(repo, after string) (int, string) {
		body := `{"ref":"refs/heads/main","before":"1111111111111111111111111111111111111111","after":"` + after +
			`","repository":{"full_name":"` + repo + `","clone_url":"https://git.example/acme/` + repo + `.git","default_branch":"main"}}`
		return capCall(t, "POST", ts.URL+"/v1/webhooks/github/acme", "", body,
			"X-GitHub-Event", "push", "X-Hub-Signature-256", signed("acme-secret-0123456789", body))
	}
	commit := func(i int) string { return strings.Repeat(fmt.Sprint(i%10), 40) }
	steps := []struct {
		name   string
		send   func() (int, string)
		want   int
		errHas string
	}{
		{"acme index r1", func() (int, string) { return capCall(t, "POST", ts.URL+"/v1/index", "acme", indexBody("acme", "r1")) }, 202, ""},
		{"acme webhook r2", func() (int, string) { return hook("r2", commit(2)) }, 202, ""},
		{"acme index r3", func() (int, string) { return capCall(t, "POST", ts.URL+"/v1/index", "acme", indexBody("acme", "r3")) }, 202, ""},
		{"acme index r4 past the bound", func() (int, string) { return capCall(t, "POST", ts.URL+"/v1/index", "acme", indexBody("acme", "r4")) }, 409, "tenant-repos: 3"},
		{"acme webhook r4 past the bound", func() (int, string) { return hook("r4", commit(4)) }, 409, "holds 3 repositories"},
		{"acme index r1 again at the bound", func() (int, string) { return capCall(t, "POST", ts.URL+"/v1/index", "acme", indexBody("acme", "r1")) }, 202, ""},
		{"acme webhook push to r2 at the bound", func() (int, string) { return hook("r2", commit(5)) }, 202, ""},
		{"acme reindex r3 at the bound", func() (int, string) { return capCall(t, "POST", ts.URL+"/v1/repos/acme/r3/reindex", "acme", "") }, 202, ""},
		{"beta is not bounded by acme's count", func() (int, string) { return capCall(t, "POST", ts.URL+"/v1/index", "beta", indexBody("beta", "b1")) }, 202, ""},
		{"operator past acme's bound", func() (int, string) {
			return capCall(t, "POST", ts.URL+"/v1/index", "operator", indexBody("acme", "ops"))
		}, 202, ""},
		{"acme deletes r1", func() (int, string) { return capCall(t, "DELETE", ts.URL+"/v1/repos/acme/r1", "acme-admin", "") }, 200, ""},
		{"acme still over: 4 held", func() (int, string) { return capCall(t, "POST", ts.URL+"/v1/index", "acme", indexBody("acme", "r4")) }, 409, "holds 3 repositories"},
		{"acme deletes ops", func() (int, string) { return capCall(t, "DELETE", ts.URL+"/v1/repos/acme/ops", "acme-admin", "") }, 200, ""},
		{"acme reindex of deleted r1 is new", func() (int, string) { return capCall(t, "POST", ts.URL+"/v1/repos/acme/r1/reindex", "acme", "") }, 202, ""},
		{"acme webhook r4 after r1 took the slot", func() (int, string) { return hook("r4", commit(4)) }, 409, "tenant-repos"},
		{"acme deletes r3", func() (int, string) { return capCall(t, "DELETE", ts.URL+"/v1/repos/acme/r3", "acme-admin", "") }, 200, ""},
		{"acme webhook r4 redelivered once freed", func() (int, string) { return hook("r4", commit(4)) }, 202, ""},
		{"default's published repository counts", func() (int, string) {
			return capCall(t, "POST", ts.URL+"/v1/index", "default-key", indexBody("default", "demo"))
		}, 202, ""},
	}
	for _, st := range steps {
		code, msg := st.send()
		if code != st.want || !strings.Contains(msg, st.errHas) {
			t.Errorf("%s: %d %q, want %d with %q", st.name, code, msg, st.want, st.errHas)
		}
	}
	held, err := srv.heldRepos(context.Background(), "acme")
	if want := []string{"r1", "r2", "r4"}; err != nil || !slices.Equal(held, want) {
		t.Errorf("acme holds %v (%v), want %v", held, err, want)
	}
	if want := []string{"acme/r1", "acme/ops", "acme/r3"}; !slices.Equal(ix.closed, want) {
		t.Errorf("workflows ended by DELETE: %v, want %v", ix.closed, want)
	}
	if n := ix.signalled("acme"); n != 5 { // r1, r2, r3, ops, r4: never a refused one
		t.Errorf("acme's distinct repositories signalled: %d, want 5", n)
	}
	// default holds demo by its HEAD alone; with a bound of 1 a new one is refused.
	srv.limits.TenantRepos = 1
	if code, msg := capCall(t, "POST", ts.URL+"/v1/index", "default-key", indexBody("default", "other")); code != 409 || !strings.Contains(msg, "holds 1 repositories") {
		t.Errorf("default's second repository with a bound of 1: %d %q, want 409", code, msg)
	}
}

func TestTenantReposDefaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		srv   *Server
		limit int
		want  int
	}{
		{"keys, default", &Server{KeyStore: testCapKeys}, 0, DefaultTenantRepos},
		{"keys, set", &Server{KeyStore: testCapKeys}, 7, 7},
		{"keys, off", &Server{KeyStore: testCapKeys}, -1, -1},
		{"no keys (one user)", &Server{}, 0, 0},
		{"no keys, set", &Server{}, 7, 7},
	} {
		tc.srv.Store, tc.srv.Limits.TenantRepos = blob.NewMem(), tc.limit
		tc.srv.init()
		if got := tc.srv.limits.TenantRepos; got != tc.want {
			t.Errorf("%s: TenantRepos = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestTenantReposConcurrent sends a tenant's requests for 48 new
// repositories at once, through one server and through two servers that
// share one store (two gateways): exactly the bound is registered and
// signalled, the rest get 409, and another tenant indexes meanwhile.
func TestTenantReposConcurrent(t *testing.T) {
	const limit, tries = 5, 48
	stores := map[string]func(t *testing.T) *blob.Bucket{
		"mem": func(*testing.T) *blob.Bucket { return blob.NewMem() },
		"local": func(t *testing.T) *blob.Bucket {
			b, err := local.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
	for name, open := range stores {
		for _, servers := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%d servers", name, servers), func(t *testing.T) {
				// Listing and writing take a while, as on an object store,
				// so that two servers' counts overlap.
				store := blob.NewBucket(slowList{open(t)})
				ix := &capIndexer{}
				var urls []string
				var first *Server
				for range servers {
					srv := &Server{Store: store, Indexer: ix, Routes: AllRoutes, KeyStore: testCapKeys, Limits: Limits{TenantRepos: limit, TenantConcurrency: -1}}
					ts, _ := newServer(t, srv)
					urls = append(urls, ts.URL)
					if first == nil {
						first = srv
					}
				}
				codes := make([]int, tries)
				var wg sync.WaitGroup
				for i := range tries {
					wg.Go(func() {
						codes[i], _ = capCall(t, "POST", urls[i%servers]+"/v1/index", "beta", indexBody("beta", fmt.Sprintf("r%02d", i)))
					})
				}
				wg.Go(func() {
					if code, msg := capCall(t, "POST", urls[0]+"/v1/index", "acme", indexBody("acme", "shop")); code != 202 {
						t.Errorf("acme's index during beta's burst: %d %s", code, msg)
					}
				})
				wg.Wait()
				count := map[int]int{}
				for _, c := range codes {
					count[c]++
				}
				if count[202] != limit || count[409] != tries-limit {
					t.Errorf("answers %v, want %d 202 and %d 409", count, limit, tries-limit)
				}
				held, err := first.heldRepos(context.Background(), "beta")
				if err != nil || len(held) != limit {
					t.Errorf("beta holds %v (%v), want %d", held, err, limit)
				}
				if n := ix.signalled("beta"); n != limit {
					t.Errorf("beta's repositories signalled: %d, want %d", n, limit)
				}
			})
		}
	}
}

// A registration that loses its swap is removed: it must not stay behind
// uncounted by the winner.
func TestRegisterLostSwap(t *testing.T) {
	store := blob.NewMem()
	srv := &Server{Store: store, KeyStore: testCapKeys, Limits: Limits{TenantRepos: 2}}
	srv.init()
	ctx := context.Background()
	// Another server moved the generation on after this one read it.
	if err := store.Put(ctx, generationKey("beta"), []byte("7")); err != nil {
		t.Fatal(err)
	}
	lost := &Server{Store: blob.NewBucket(staleGen{store}), KeyStore: testCapKeys, Limits: Limits{TenantRepos: 2}}
	lost.init()
	if _, err := lost.register(ctx, "beta", "x", 2, false); !errors.Is(err, blob.ErrConflict) {
		t.Fatalf("register against a moved generation: %v, want a conflict", err)
	}
	if keys, _ := store.List(ctx, registryRoot+"beta/x/"); len(keys) > 0 {
		t.Errorf("the losing registration was left behind: %v", keys)
	}
	if code, err := srv.holdRepo(ctx, "beta", "x", false); code != 0 || err != nil {
		t.Errorf("holdRepo after the conflict: %d %v", code, err)
	}
}

// slowList is a driver whose listings and writes take 2 ms.
type slowList struct{ blob.Driver }

func (d slowList) List(ctx context.Context, prefix string) ([]string, error) {
	time.Sleep(2 * time.Millisecond)
	return d.Driver.List(ctx, prefix)
}

func (d slowList) Put(ctx context.Context, key string, data []byte) error {
	time.Sleep(2 * time.Millisecond)
	return d.Driver.Put(ctx, key, data)
}

// staleGen is a driver whose reads of a generation answer an old value.
type staleGen struct{ blob.Driver }

func (d staleGen) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.HasSuffix(key, "/"+generationName) {
		return []byte("6"), nil
	}
	return d.Driver.Get(ctx, key)
}

// BenchmarkHoldRepo measures the check of a tenant holding 10,000
// repositories on the local store: a push to one it holds, and a new one
// refused at the bound (two listings of the tenant's keys).
func BenchmarkHoldRepo(b *testing.B) {
	const n = 10000
	store, err := local.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		if err := store.Put(ctx, registryKey("acme", fmt.Sprintf("r%05d", i)), []byte{}); err != nil {
			b.Fatal(err)
		}
	}
	srv := &Server{Store: store, KeyStore: testCapKeys, Limits: Limits{TenantRepos: n}}
	srv.init()
	b.Run("held", func(b *testing.B) {
		for b.Loop() {
			if code, err := srv.holdRepo(ctx, "acme", "r00042", false); code != 0 || err != nil {
				b.Fatal(code, err)
			}
		}
	})
	b.Run("new at the bound", func(b *testing.B) {
		for b.Loop() {
			if code, _ := srv.holdRepo(ctx, "acme", "another", false); code != http.StatusConflict {
				b.Fatal(code)
			}
		}
	})
}

// A server refusing a tenant at its bound takes a DELETE on another
// server (another gateway) into account at once.
func TestTenantReposDeleteElsewhere(t *testing.T) {
	store := blob.NewMem()
	var urls []string
	for range 2 {
		ts, _ := newServer(t, &Server{Store: store, Indexer: &capIndexer{}, Routes: AllRoutes, KeyStore: testCapKeys, Limits: Limits{TenantRepos: 2}})
		urls = append(urls, ts.URL)
	}
	for i, want := range []int{202, 202, 409, 409} {
		if code, msg := capCall(t, "POST", urls[0]+"/v1/index", "acme", indexBody("acme", fmt.Sprint("r", i))); code != want {
			t.Fatalf("acme's repository %d: %d %s, want %d", i, code, msg, want)
		}
	}
	if code, msg := capCall(t, "DELETE", urls[1]+"/v1/repos/acme/r0", "acme-admin", ""); code != 200 {
		t.Fatalf("delete on the other server: %d %s", code, msg)
	}
	if code, msg := capCall(t, "POST", urls[0]+"/v1/index", "acme", indexBody("acme", "r9")); code != 202 {
		t.Errorf("acme's new repository after a delete on the other server: %d %s, want 202", code, msg)
	}
}

// Two servers share a store. A push of beta's vault is taken on server B
// (vault is held), and before B signals it the whole DELETE of vault runs
// on server A. B's signal starts vault's workflow again; B then finds the
// registration gone, ends that workflow and refuses the push (409).
// Before, B answered 202 and the workflow indexed vault after its DELETE,
// with no registration: outside the bound.
func TestTenantReposDeleteRacesPushAcrossServers(t *testing.T) {
	store := blob.NewMem()
	ixA, ixB := &capIndexer{}, &capIndexer{}
	a, _ := newServer(t, &Server{Store: store, Indexer: ixA, Routes: AllRoutes, KeyStore: testCapKeys, Limits: Limits{TenantRepos: 5}})
	b, _ := newServer(t, &Server{Store: store, Indexer: ixB, Routes: AllRoutes, KeyStore: testCapKeys, Limits: Limits{TenantRepos: 5}})
	if code, msg := capCall(t, "POST", b.URL+"/v1/index", "beta", indexBody("beta", "vault")); code != 202 {
		t.Fatalf("index vault: %d %s", code, msg)
	}
	var delCode int
	ixB.mu.Lock()
	ixB.before = func(IndexRequest) {
		delCode, _ = capCall(t, "DELETE", a.URL+"/v1/repos/beta/vault", "operator", "")
	}
	ixB.mu.Unlock()
	code, msg := capCall(t, "POST", b.URL+"/v1/index", "beta", indexBody("beta", "vault"))
	if delCode != 200 {
		t.Fatalf("DELETE on server A: %d", delCode)
	}
	if code != 409 || !strings.Contains(msg, "deleted while this push was taken") {
		t.Errorf("push taken on B across the DELETE on A: %d %q, want 409", code, msg)
	}
	ixB.mu.Lock()
	closed := slices.Clone(ixB.closed)
	ixB.mu.Unlock()
	if !slices.Equal(closed, []string{"beta/vault"}) {
		t.Errorf("workflows ended by server B: %v, want vault's, started again by the push", closed)
	}
	srv := &Server{Store: store, KeyStore: testCapKeys, Limits: Limits{TenantRepos: 5}}
	srv.init()
	if held, err := srv.heldRepos(context.Background(), "beta"); err != nil || len(held) != 0 {
		t.Errorf("beta holds %v (%v) after the DELETE", held, err)
	}
	// Pushed again afterwards, vault is a new repository and is taken.
	if code, msg := capCall(t, "POST", b.URL+"/v1/index", "beta", indexBody("beta", "vault")); code != 202 {
		t.Errorf("index vault after its DELETE: %d %s", code, msg)
	}
}

// With the bound on, GET /v1/repos lists every repository the tenant
// holds, published or not: a registration whose first snapshot never
// published counts, so it is listed (commit "") and can be deleted.
func TestTenantReposListed(t *testing.T) {
	store := blob.NewMem()
	ix := &capIndexer{}
	ts, _ := newServer(t, &Server{Store: store, Indexer: ix, Routes: AllRoutes, KeyStore: testCapKeys, Limits: Limits{TenantRepos: 5}})
	if code, msg := capCall(t, "POST", ts.URL+"/v1/index", "acme", indexBody("acme", "fresh")); code != 202 {
		t.Fatalf("index: %d %s", code, msg)
	}
	list := func() []RepoInfo {
		req, _ := http.NewRequest("GET", ts.URL+"/v1/repos?tenant=acme", nil)
		req.Header.Set("Authorization", "Bearer acme")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var page RepoPage
		if err := json.NewDecoder(resp.Body).Decode(&page); resp.StatusCode != 200 || err != nil {
			t.Fatalf("list: %d %v", resp.StatusCode, err)
		}
		return page.Repos
	}
	if repos := list(); len(repos) != 1 || repos[0].Repo != "fresh" || repos[0].Commit != "" || repos[0].State != StateIdle {
		t.Errorf("acme's repositories: %+v, want fresh, held and not published", repos)
	}
	if code, msg := capCall(t, "DELETE", ts.URL+"/v1/repos/acme/fresh", "acme-admin", ""); code != 200 {
		t.Errorf("DELETE of a listed, unpublished repository: %d %s", code, msg)
	}
	if repos := list(); len(repos) != 0 {
		t.Errorf("after the DELETE: %+v", repos)
	}
}

// BenchmarkRecordLocation is what every push adds for its location's
// record on the local store, beside holdRepo's check of a held repository
// (BenchmarkHoldRepo/held): unchanged, one read; changed, a read and a write.
func BenchmarkRecordLocation(b *testing.B) {
	store, err := local.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	srv := &Server{Store: store}
	srv.init()
	ctx := context.Background()
	req := IndexRequest{Tenant: "acme", Repo: "shop", Location: "https://git.example/acme/shop.git"}
	b.Run("unchanged", func(b *testing.B) {
		srv.recordLocation(ctx, req)
		for b.Loop() {
			srv.recordLocation(ctx, req)
		}
	})
	b.Run("changed", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			srv.recordLocation(ctx, IndexRequest{Tenant: "acme", Repo: "shop", Location: fmt.Sprintf("https://git.example/acme/shop%d.git", i%2)})
		}
	})
}

// closedIndexer answers every status as Temporal answers it of a
// workflow a DELETE terminated: the deleted repository's last figures,
// from an ended run.
type closedIndexer struct{ fakeIndexer }

func (*closedIndexer) Status(_ context.Context, tenant, repo string) (RepoStatus, error) {
	return RepoStatus{Tenant: tenant, Repo: repo, State: StateIdle, Received: 5, Covered: 5, LastCommit: "73be5f4b", Files: 5, Already: true, Closed: true}, nil
}

// TestStatusOfAnEndedRun: the status of a repository whose workflow run
// has ended (a DELETE ended it) is 404, as its queries are, until it is
// registered again or has a HEAD; it was 200 "idle" with the deleted
// repository's counts, commit and already_indexed.
func TestStatusOfAnEndedRun(t *testing.T) {
	ctx := context.Background()
	store := blob.NewMem()
	_, cl := newServer(t, &Server{Store: store, Indexer: &closedIndexer{}, Routes: AllRoutes})
	if st, err := cl.Status(ctx, "acme", "shop"); !IsNotFound(err) {
		t.Errorf("status of a deleted repository = %+v, %v; want 404", st, err)
	}
	if err := store.Put(ctx, registryKey("acme", "shop"), []byte{}); err != nil {
		t.Fatal(err)
	}
	if st, err := cl.Status(ctx, "acme", "shop"); err != nil || st.State != StateIdle || st.LastCommit != "73be5f4b" {
		t.Errorf("status of a registered repository with an ended run = %+v, %v; want its figures", st, err)
	}
}
