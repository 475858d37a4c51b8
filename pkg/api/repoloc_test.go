package api_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/keys"
)

// A reindex of a repository the orchestrator has no record of (its state
// lost) falls back to the location recorded with the repository in the
// store when it was indexed: that tenant's only, checked as a new one.
func TestReindexRecordedLocation(t *testing.T) {
	for _, bound := range []int{0, 100} {
		t.Run(map[int]string{0: "no bound", 100: "bound"}[bound], func(t *testing.T) {
			testReindexRecordedLocation(t, bound)
		})
	}
}

func testReindexRecordedLocation(t *testing.T, bound int) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.json")
	acme, _, err := keys.Create(path, "acme", keys.Admin)
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := keys.Create(path, "other", keys.Admin)
	ks, err := keys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	store := shopStore(t) // acme/shop and acme/billing published
	ix := &locIndexer{loc: map[string]string{}}
	srv := httptest.NewServer((&api.Server{Store: store, Routes: api.AllRoutes, KeyStore: ks, Indexer: ix, Limits: api.Limits{TenantRepos: bound}}).Handler())
	defer srv.Close()
	const shopURL = "https://example.com/acme/shop.git"
	post := func(key, url, body string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	forget := func() { // the orchestrator's state is lost
		ix.mu.Lock()
		clear(ix.loc)
		ix.reqs = nil
		ix.mu.Unlock()
	}
	signalled := func() []api.IndexRequest {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		return append([]api.IndexRequest(nil), ix.reqs...)
	}

	// An index request records its location; the orchestrator then loses
	// its record, and the reindex signals the recorded location.
	if code := post(acme, srv.URL+"/v1/index", `{"tenant":"acme","repo":"shop","location":"`+shopURL+`"}`); code != 202 {
		t.Fatalf("index acme/shop: HTTP %d", code)
	}
	forget()
	if code := post(acme, srv.URL+"/v1/repos/acme/shop/reindex", ""); code != 202 {
		t.Fatalf("reindex of acme/shop after the orchestrator lost it: HTTP %d, want 202", code)
	}
	if r := signalled(); len(r) != 1 || r[0].Tenant != "acme" || r[0].Repo != "shop" || r[0].Location != shopURL {
		t.Fatalf("reindex signalled %+v, want acme/shop at %s", r, shopURL)
	}
	// The revision it follows is recorded too: a repository indexed at a
	// branch or tag is reindexed there, one indexed at a hash at HEAD
	// (it went to HEAD).
	for _, tc := range []struct{ commit, want string }{{"release-2", "release-2"}, {"0123456789abcdef", ""}, {"v1.2.0", "v1.2.0"}, {"", ""}} {
		if code := post(acme, srv.URL+"/v1/index", `{"tenant":"acme","repo":"shop","location":"`+shopURL+`","commit":"`+tc.commit+`"}`); code != 202 {
			t.Fatalf("index acme/shop at %q: HTTP %d", tc.commit, code)
		}
		forget()
		if code := post(acme, srv.URL+"/v1/repos/acme/shop/reindex", ""); code != 202 {
			t.Fatalf("reindex of acme/shop indexed at %q: HTTP %d", tc.commit, code)
		}
		if r := signalled(); len(r) != 1 || r[0].Location != shopURL || r[0].Commit != tc.want {
			t.Fatalf("reindex of acme/shop indexed at %q signalled %+v, want revision %q", tc.commit, r, tc.want)
		}
		forget()
	}
	if err := store.Put(ctx, "repos/acme/shop/@/REVISION", []byte("release-2")); err != nil {
		t.Fatal(err)
	}

	// Another tenant's recorded location is never used: other has a
	// repository named shop with its own location, acme has no lib.
	if code := post(other, srv.URL+"/v1/index", `{"tenant":"other","repo":"lib","location":"https://example.org/other/lib.git"}`); code != 202 {
		t.Fatalf("index other/lib: HTTP %d", code)
	}
	forget()
	if code := post(acme, srv.URL+"/v1/repos/acme/lib/reindex", ""); code != 404 {
		t.Errorf("reindex of acme/lib (only other has a lib): HTTP %d, want 404", code)
	}
	if code := post(acme, srv.URL+"/v1/repos/other/lib/reindex", ""); code != 403 {
		t.Errorf("reindex of other/lib with acme's key: HTTP %d, want 403", code)
	}
	if code := post(other, srv.URL+"/v1/repos/other/shop/reindex", ""); code != 404 {
		t.Errorf("reindex of other/shop (only acme has a shop): HTTP %d, want 404", code)
	}
	if r := signalled(); len(r) != 0 {
		t.Errorf("cross-tenant reindexes signalled %+v", r)
	}
	if code := post(other, srv.URL+"/v1/repos/other/lib/reindex", ""); code != 202 {
		t.Errorf("reindex of other/lib by other: HTTP %d, want 202", code)
	}
	if r := signalled(); len(r) != 1 || r[0].Tenant != "other" || r[0].Location != "https://example.org/other/lib.git" {
		t.Errorf("other's reindex signalled %+v", r)
	}
	forget()

	// An empty registration (an earlier version's) knows no location: the
	// reindex of a published repository still answers 409.
	if err := store.Put(ctx, "repos/acme/billing/@/REPO", []byte{}); err != nil {
		t.Fatal(err)
	}
	if code := post(acme, srv.URL+"/v1/repos/acme/billing/reindex", ""); code != 409 {
		t.Errorf("reindex of acme/billing with an empty registration: HTTP %d, want 409", code)
	}
	// A recorded location is checked as a new one: a path on the server
	// (which only an operator may index) is refused to a tenant's key.
	if err := store.Put(ctx, "repos/acme/billing/@/LOCATION", []byte("/srv/code/billing")); err != nil {
		t.Fatal(err)
	}
	if code := post(acme, srv.URL+"/v1/repos/acme/billing/reindex", ""); code != 403 {
		t.Errorf("reindex of a recorded server path with a tenant's key: HTTP %d, want 403", code)
	}
	if r := signalled(); len(r) != 0 {
		t.Errorf("refused reindexes signalled %+v", r)
	}

	// DELETE removes the recorded location with the registration.
	if code := do(t, http.MethodDelete, srv.URL+"/v1/repos/acme/shop", acme, nil); code != 200 {
		t.Fatalf("delete acme/shop: HTTP %d", code)
	}
	forget()
	if code := post(acme, srv.URL+"/v1/repos/acme/shop/reindex", ""); code != 404 {
		t.Errorf("reindex of deleted acme/shop: HTTP %d, want 404", code)
	}
	keys, err := store.List(ctx, "repos/acme/shop")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("after the delete of acme/shop the store holds %v", keys)
	}
}

// Repositories published by a version that kept their location only in
// the orchestrator get it recorded at start (RecordLocations), so that a
// reindex after the orchestrator's state is lost still finds it; what is
// recorded already, what the orchestrator does not know and a repository
// deleted meanwhile are left alone.
func TestRecordLocations(t *testing.T) {
	ctx := context.Background()
	store := shopStore(t) // acme/shop and acme/billing published
	ix := &locIndexer{loc: map[string]string{
		"acme/shop":    "https://example.com/acme/shop.git",
		"acme/billing": "https://example.com/acme/billing.git",
		"acme/gone":    "https://example.com/acme/gone.git", // not published
	}}
	// billing has a newer location recorded by a push: kept.
	if err := store.Put(ctx, "repos/acme/billing/@/LOCATION", []byte("https://example.com/acme/billing2.git")); err != nil {
		t.Fatal(err)
	}
	// A HEAD of the old layout, which the orchestrator does not know.
	if err := store.Put(ctx, "heads/other/old", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	srv := &api.Server{Store: store, Indexer: ix}
	b, err := srv.RecordLocations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (api.Backfill{Published: 3, Recorded: 1, Unknown: 1}); b != want {
		t.Errorf("backfill %+v, want %+v", b, want)
	}
	for key, want := range map[string]string{
		"repos/acme/shop/@/LOCATION":    "https://example.com/acme/shop.git",
		"repos/acme/billing/@/LOCATION": "https://example.com/acme/billing2.git",
	} {
		got, err := store.Get(ctx, key)
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", key, got, err, want)
		}
	}
	for _, prefix := range []string{"repos/acme/gone", "repos/other"} {
		if keys, _ := store.List(ctx, prefix); len(keys) != 0 {
			t.Errorf("backfill wrote %v", keys)
		}
	}

	// The second pass has nothing to do.
	if b, err := srv.RecordLocations(ctx); err != nil || b != (api.Backfill{Published: 3, Unknown: 1}) {
		t.Errorf("second backfill %+v, %v", b, err)
	}

	// The orchestrator failing leaves the repository for the next pass.
	if err := store.Delete(ctx, "repos/acme/shop/@/LOCATION"); err != nil {
		t.Fatal(err)
	}
	srv = &api.Server{Store: store, Indexer: failIndexer{}}
	if b, err := srv.RecordLocations(ctx); err != nil || b.Left != 2 || b.Recorded != 0 {
		t.Errorf("backfill with a failing orchestrator %+v, %v; want 2 left", b, err)
	}
	if keys, _ := store.List(ctx, "repos/acme/shop"); len(keys) != 0 {
		t.Errorf("failed backfill wrote %v", keys)
	}
}

// failIndexer is an orchestrator that cannot be reached.
type failIndexer struct{}

func (failIndexer) Index(context.Context, api.IndexRequest) (string, error) {
	return "", errors.New("orchestrator down")
}

func (failIndexer) Status(context.Context, string, string) (api.RepoStatus, error) {
	return api.RepoStatus{}, errors.New("orchestrator down")
}

// A DELETE on another server that lands while the backfill asks the
// orchestrator leaves no location behind.
func TestRecordLocationsDeleteRace(t *testing.T) {
	ctx := context.Background()
	store := shopStore(t)
	ix := &deletingIndexer{store: store}
	b, err := (&api.Server{Store: store, Indexer: ix}).RecordLocations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.Recorded != 0 || b.Unknown != 2 {
		t.Errorf("backfill %+v, want both repositories left unknown", b)
	}
	if keys, _ := store.List(ctx, "repos/"); len(keys) != 0 {
		t.Errorf("locations of deleted repositories left: %v", keys)
	}
}

// deletingIndexer answers a location, but the repository's HEAD is
// removed (a DELETE elsewhere) before the answer arrives.
type deletingIndexer struct{ store *blob.Bucket }

func (f *deletingIndexer) Index(context.Context, api.IndexRequest) (string, error) { return "", nil }

func (f *deletingIndexer) Status(ctx context.Context, tenant, repo string) (api.RepoStatus, error) {
	if err := f.store.Delete(ctx, index.HeadKey(tenant, repo)); err != nil {
		return api.RepoStatus{}, err
	}
	return api.RepoStatus{State: api.StateIdle, Location: "https://example.com/" + tenant + "/" + repo + ".git"}, nil
}

// TestIndexNameTakenElsewhere: a repository named after its location
// (directories x/shop and y/shop are both "shop"; clone URLs of two hosts
// with the same owner and name are both "x/shop") is not moved to another location by
// an index request that does not name it: 409, the first one's location
// and index untouched. The same location spelled with a trailing slash
// or ".git", or fetched by another scheme, a request that names the repository, and a new name are
// taken.
func TestIndexNameTakenElsewhere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	acme, _, err := keys.Create(path, "acme", keys.Admin)
	if err != nil {
		t.Fatal(err)
	}
	beta, _, err := keys.Create(path, "beta", keys.Admin)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := keys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	store := blob.NewMem()
	ix := &locIndexer{loc: map[string]string{}}
	srv := httptest.NewServer((&api.Server{Store: store, Routes: api.AllRoutes, KeyStore: ks, Indexer: ix}).Handler())
	defer srv.Close()
	postAs := func(key, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/index", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	post := func(body string) (int, string) { t.Helper(); return postAs(acme, body) }
	const first, second = "https://example.com/x/shop.git", "https://example.org/x/shop"
	for _, c := range []struct {
		body string
		want int
	}{
		{`{"location":"` + first + `"}`, 202},
		{`{"location":"https://example.com/x/shop/"}`, 202}, // the same, spelled otherwise
		{`{"location":"git://example.com/x/shop"}`, 202},    // the same, over git
		{`{"location":"` + second + `"}`, 409},
		{`{"location":"` + second + `","repo":"x/shop-2"}`, 202},
	} {
		code, body := post(c.body)
		if code != c.want {
			t.Errorf("index %s: HTTP %d %s, want %d", c.body, code, body, c.want)
		}
		if code == 409 && (!strings.Contains(body, "another location") || strings.Contains(body, "example.com")) {
			t.Errorf("409 answer %s: want it to say why, without the first location", body)
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, r := range ix.reqs {
		if r.Repo == "x/shop" && r.Location == second {
			t.Errorf("acme/x/shop was signalled at %s", second)
		}
	}
	// Another tenant is no oracle: beta holds no x/shop, so the same
	// request is taken for it, and acme's x/shop stays where it was.
	ix.mu.Unlock()
	if code, body := postAs(beta, `{"location":"`+second+`"}`); code != 202 {
		t.Errorf("beta's index of %s: HTTP %d %s, want 202 (acme's x/shop is acme's)", second, code, body)
	}
	if code, _ := post(`{"location":"` + second + `"}`); code != 409 {
		t.Errorf("acme's index of %s after beta's: HTTP %d, want 409", second, code)
	}
	// Naming it moves it: the operator's choice.
	code, body := post(`{"location":"` + second + `","repo":"x/shop"}`)
	ix.mu.Lock()
	if code != 202 {
		t.Errorf("index naming x/shop at %s: HTTP %d %s, want 202", second, code, body)
	}
}
