package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/keys"
)

// locIndexer is an orchestrator fake that remembers each repository's
// location, as the RepoWorkflow does.
type locIndexer struct {
	mu   sync.Mutex
	loc  map[string]string
	reqs []api.IndexRequest
}

func (f *locIndexer) Index(_ context.Context, req api.IndexRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	f.loc[req.Tenant+"/"+req.Repo] = req.Location
	return "run-1", nil
}

func (f *locIndexer) Status(_ context.Context, tenant, repo string) (api.RepoStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	loc, ok := f.loc[tenant+"/"+repo]
	if !ok {
		return api.RepoStatus{}, api.ErrUnknownRepo
	}
	return api.RepoStatus{State: api.StateIdle, Location: loc, Failed: 1, LastError: ""}, nil
}

func do(t *testing.T, method, url, key string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

func TestRepoAdmin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	query, _, err := keys.Create(path, "acme", keys.Query)
	if err != nil {
		t.Fatal(err)
	}
	admin, _, _ := keys.Create(path, "acme", keys.Admin)
	other, _, _ := keys.Create(path, "other", keys.Admin)
	ks, err := keys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ix := &locIndexer{loc: map[string]string{"acme/shop": "https://example.com/acme/shop.git"}}
	srv := httptest.NewServer((&api.Server{Store: shopStore(t), Routes: api.AllRoutes, KeyStore: ks, Indexer: ix}).Handler())
	defer srv.Close()

	var page api.RepoPage
	if code := do(t, "GET", srv.URL+"/v1/repos?tenant=acme&limit=1", query, &page); code != 200 {
		t.Fatalf("list: HTTP %d", code)
	}
	if len(page.Repos) != 1 || page.Repos[0].Repo != "billing" || page.Next != "billing" || page.Repos[0].Files != 3 || len(page.Repos[0].Commit) != 40 || page.Repos[0].IndexedAt == "" {
		t.Fatalf("page 1 = %+v", page)
	}
	cursor := page.Next
	page = api.RepoPage{}
	if code := do(t, "GET", srv.URL+"/v1/repos?tenant=acme&limit=1&cursor="+cursor, query, &page); code != 200 || len(page.Repos) != 1 || page.Repos[0].Repo != "shop" || page.Next != "" || page.Repos[0].Failed != 1 || page.Repos[0].State != "idle" {
		t.Fatalf("page 2 = %d %+v", code, page)
	}
	for _, c := range []struct {
		key  string
		want int
	}{{"", 401}, {"wrong", 401}, {other, 403}} {
		if code := do(t, "GET", srv.URL+"/v1/repos?tenant=acme", c.key, nil); code != c.want {
			t.Errorf("list with key %q: HTTP %d, want %d", c.key, code, c.want)
		}
	}
	if code := do(t, "GET", srv.URL+"/v1/repos?tenant=acme&limit=0", query, nil); code != 400 {
		t.Errorf("limit=0: HTTP %d", code)
	}

	// Reindex needs scope index; it sends the recorded location again.
	if code := do(t, "POST", srv.URL+"/v1/repos/acme/shop/reindex", query, nil); code != 403 {
		t.Errorf("reindex with a query key: HTTP %d, want 403", code)
	}
	var ir api.IndexResponse
	if code := do(t, "POST", srv.URL+"/v1/repos/acme/shop/reindex", admin, &ir); code != 202 || ir.Repo != "shop" {
		t.Fatalf("reindex: HTTP %d %+v", code, ir)
	}
	if len(ix.reqs) != 1 || ix.reqs[0].Location != "https://example.com/acme/shop.git" {
		t.Errorf("reindex sent %+v", ix.reqs)
	}
	// billing is published but the orchestrator has no record of it (its
	// state lost): no location is known, and the answer says what to do.
	if code := do(t, "POST", srv.URL+"/v1/repos/acme/billing/reindex", admin, nil); code != 409 {
		t.Errorf("reindex of a published repository the orchestrator does not know: HTTP %d, want 409", code)
	}
	if code := do(t, "POST", srv.URL+"/v1/repos/acme/nope/reindex", admin, nil); code != 404 {
		t.Errorf("reindex of a repository nobody holds: HTTP %d, want 404", code)
	}

	// Delete needs scope admin; afterwards queries and the list lose it.
	if code := do(t, "DELETE", srv.URL+"/v1/repos/acme/shop", query, nil); code != 403 {
		t.Errorf("delete with a query key: HTTP %d, want 403", code)
	}
	var del api.DeleteResponse
	if code := do(t, "DELETE", srv.URL+"/v1/repos/acme/shop", admin, &del); code != 200 || del.Deleted < 2 {
		t.Fatalf("delete: HTTP %d %+v", code, del)
	}
	if code := do(t, "DELETE", srv.URL+"/v1/repos/acme/shop", admin, nil); code != 404 {
		t.Errorf("second delete: HTTP %d, want 404", code)
	}
	page = api.RepoPage{}
	do(t, "GET", srv.URL+"/v1/repos?tenant=acme", query, &page)
	if len(page.Repos) != 1 || page.Repos[0].Repo != "billing" {
		t.Errorf("after delete: %+v", page)
	}
	cl := &api.Client{BaseURL: srv.URL, Key: query}
	if _, err := cl.Query(context.Background(), api.QueryRequest{Tenant: "acme", Repo: "shop", Query: "cart"}); !api.IsNotFound(err) {
		t.Errorf("query of the deleted repository: %v, want 404", err)
	}

	// A revoked key stops working without a restart; a new one starts.
	ids, _ := keys.List(path)
	for _, k := range ids {
		if k.Scope == keys.Query {
			if err := keys.Revoke(path, k.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if code := do(t, "GET", srv.URL+"/v1/repos?tenant=acme", query, nil); code != 401 {
		t.Errorf("revoked key: HTTP %d, want 401", code)
	}
	fresh, _, _ := keys.Create(path, "acme", keys.Query)
	if code := do(t, "GET", srv.URL+"/v1/repos?tenant=acme", fresh, nil); code != 200 {
		t.Errorf("new key: HTTP %d, want 200", code)
	}
	if !strings.HasPrefix(fresh, "cctx_") {
		t.Errorf("key %q", fresh)
	}
}

// lateIndexer is a locIndexer whose workflow, as it is ended, has just
// published: its CloseRepo writes the repository's HEAD again first (a
// publish activity that moved HEAD after the DELETE removed it, before
// the workflow ended).
type lateIndexer struct {
	locIndexer
	store *blob.Bucket
	head  []byte
}

func (f *lateIndexer) CloseRepo(ctx context.Context, tenant, repo string) (bool, error) {
	if err := f.store.Put(ctx, index.HeadKey(tenant, repo), f.head); err != nil {
		return false, err
	}
	return true, nil
}

// TestDeleteRemovesHeadPublishedBeforeTheEnd: a HEAD moved between the
// DELETE's first removal and the workflow's end is removed too. Kept, it
// brought the repository back after the DELETE answered: listed,
// counted, and naming a segment the DELETE removed.
func TestDeleteRemovesHeadPublishedBeforeTheEnd(t *testing.T) {
	ctx := context.Background()
	store := shopStore(t)
	head, err := store.Get(ctx, index.HeadKey("acme", "shop"))
	if err != nil {
		t.Fatal(err)
	}
	ix := &lateIndexer{locIndexer: locIndexer{loc: map[string]string{}}, store: store, head: head}
	srv := httptest.NewServer((&api.Server{Store: store, Routes: api.AllRoutes, Indexer: ix}).Handler())
	defer srv.Close()
	var del api.DeleteResponse
	if code := do(t, "DELETE", srv.URL+"/v1/repos/acme/shop", "", &del); code != 200 {
		t.Fatalf("delete: HTTP %d", code)
	}
	if ok, err := store.Exists(ctx, index.HeadKey("acme", "shop")); err != nil || ok {
		t.Errorf("after DELETE the HEAD published before the workflow ended is there: %v %v", ok, err)
	}
	var page api.RepoPage
	do(t, "GET", srv.URL+"/v1/repos?tenant=acme", "", &page)
	for _, r := range page.Repos {
		if r.Repo == "shop" {
			t.Errorf("after DELETE the repository is listed again: %+v", page.Repos)
		}
	}
}
