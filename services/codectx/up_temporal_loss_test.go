package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob/local"
	"codectx/pkg/index"
	"codectx/pkg/temporalserver"
	"codectx/pkg/testrepo"
)

// Losing Temporal's state (its SQLite files under the data dir) loses
// every workflow history: each repository's RepoWorkflow, with its
// location and status. What is published is in the blob store and keeps
// serving; what an operator does to get the workflows back is shown here
// (deploy/README.md, "Losing a store").
func TestUpLosesTemporalState(t *testing.T) {
	shopDir, shopCommit := gitFixture(t)
	lib := testrepo.New(t)
	libCommit := lib.Commit("initial", testrepo.Small)
	data := t.TempDir()
	addr := freeAddr(t)
	base := "http://" + addr
	cl := &api.Client{BaseURL: base}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	up := startUp(t, "--data", data, "--listen", addr)
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	index1 := func(when, repo, loc, commit string) {
		t.Helper()
		if _, err := cl.Index(ctx, api.IndexRequest{Repo: repo, Location: loc}); err != nil {
			t.Fatalf("%s: index %s: %v", when, repo, err)
		}
		st, err := cl.WaitIndexed(ctx, "", repo, commit)
		if err != nil {
			t.Fatalf("%s: wait for %s: %v", when, repo, err)
		}
		if st.Head == nil || st.Head.Commit != commit {
			t.Fatalf("%s: %s status %+v, want HEAD at %s", when, repo, st, commit)
		}
	}
	index1("first run", "shop", shopDir, shopCommit)
	index1("first run", "lib", lib.Dir, libCommit)

	check := func(when, repo, question, commit string) {
		t.Helper()
		answersAt(ctx, t, cl, when, repo, question, commit)
	}
	check("first run", "shop", "how are refunds issued", shopCommit)
	check("first run", "lib", "price lookup", libCommit)
	up.stop(t)

	same := loseTemporal(t, data)
	up = startUp(t, "--data", same, "--listen", addr)
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	checkNewTemporal(t, data)

	// 1. Queries answer from the published HEADs.
	check("after losing Temporal", "shop", "how are refunds issued", shopCommit)
	check("after losing Temporal", "lib", "price lookup", libCommit)

	// 2. The repository list is the HEADs in the blob store.
	var page api.RepoPage
	getJSON(t, ctx, base+"/v1/repos", &page)
	listed := map[string]string{}
	for _, r := range page.Repos {
		listed[r.Repo] = r.Commit
	}
	if listed["shop"] != shopCommit || listed["lib"] != libCommit {
		t.Errorf("GET /v1/repos after losing Temporal = %+v, want shop at %s and lib at %s", page.Repos, shopCommit, libCommit)
	}

	// 3. Status answers from the HEAD: no workflow, so the state is
	// unknown and no push is counted.
	for repo, commit := range map[string]string{"shop": shopCommit, "lib": libCommit} {
		st, err := cl.Status(ctx, "", repo)
		if err != nil {
			t.Fatalf("status of %s after losing Temporal: %v", repo, err)
		}
		if st.Head == nil || st.Head.Commit != commit || st.State != api.StateUnknown || st.Received != 0 {
			t.Errorf("status of %s after losing Temporal = %+v, want HEAD at %s, state unknown, no push", repo, st, commit)
		}
	}

	// 4a. The reindex of a repository whose workflow was lost takes the
	// location recorded with the repository in the blob store when it was
	// indexed: the workflow starts again, and its snapshot finds HEAD
	// complete at the commit and skips it.
	store, err := local.Open(filepath.Join(data, "store"))
	if err != nil {
		t.Fatal(err)
	}
	code, body := do(t, ctx, http.MethodPost, base+"/v1/repos/default/lib/reindex")
	if code != http.StatusAccepted {
		t.Fatalf("reindex of lib without its workflow: HTTP %d %s, want 202 (its location recorded in the store)", code, body)
	}
	st, err := cl.WaitIndexed(ctx, "", "lib", libCommit)
	if err != nil {
		t.Fatalf("wait for lib: %v", err)
	}
	if !st.Already || st.Head == nil || st.Head.Commit != libCommit {
		t.Errorf("lib reindexed = %+v, want already indexed at %s", st, libCommit)
	}
	// Then a second reindex goes through the workflow's location.
	code, body = do(t, ctx, http.MethodPost, base+"/v1/repos/default/lib/reindex")
	if code != http.StatusAccepted {
		t.Fatalf("second reindex of lib: HTTP %d %s, want 202", code, body)
	}
	if st, err = cl.WaitIndexed(ctx, "", "lib", ""); err != nil || st.Received != 2 || st.Head == nil || st.Head.Commit != libCommit {
		t.Fatalf("lib after the second reindex: %+v, %v; want 2 pushes received, HEAD at %s", st, err, libCommit)
	}

	// 4b. A repository indexed by the previous version has an empty
	// registration and no recorded location: with its workflow lost, its
	// reindex is refused with 409, saying to index it again with its
	// location (POST /v1/index). Shop is made so by hand.
	shopKeys, err := store.List(ctx, "repos/"+index.DefaultTenant+"/shop/")
	if err != nil {
		t.Fatal(err)
	}
	if len(shopKeys) == 0 {
		t.Fatalf("no record of shop under repos/ in the store: its location was not recorded")
	}
	for _, k := range shopKeys {
		if err := store.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Put(ctx, "repos/"+index.DefaultTenant+"/shop/@/REPO", []byte{}); err != nil {
		t.Fatal(err)
	}
	code, body = do(t, ctx, http.MethodPost, base+"/v1/repos/default/shop/reindex")
	if code != http.StatusConflict || !strings.Contains(body, "POST /v1/index with its location") {
		t.Errorf("reindex of shop without its workflow or a recorded location: HTTP %d %s, want 409 naming POST /v1/index", code, body)
	}

	// 4c. A new commit, indexed through `codectx index --server`, is served.
	libCommit2 := lib.Commit("second", map[string]string{"price/discount.go": "package price\n\n// Discount takes a coupon off a price in cents.\nfunc Discount(cents, coupon int) int { return cents - coupon }\n"})
	var out syncBuffer
	if err := run(ctx, []string{"index", "--server", base, "--name", "lib", "--timeout", "2m", lib.Dir}, &out, &syncBuffer{}); err != nil {
		t.Fatalf("index --server of lib's new commit: %v\n%s", err, out.String())
	}
	check("new commit", "lib", "discount coupon", libCommit2)

	// 5. DELETE of shop, whose workflow was lost and never started again:
	// its HEAD and objects go, queries of it answer 404.
	if _, err := cl.Delete(ctx, "", "shop"); err != nil {
		t.Fatalf("delete shop without its workflow: %v", err)
	}
	_, err = cl.Query(ctx, api.QueryRequest{Repo: "shop", Query: "how are refunds issued", Budget: 1000})
	if e := (*api.Error)(nil); !errors.As(err, &e) || e.Code != http.StatusNotFound {
		t.Errorf("query of deleted shop: %v, want HTTP 404", err)
	}
	keys, err := store.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	libKeys := 0
	for _, k := range keys {
		switch {
		case strings.Contains(k, "/"+index.DefaultTenant+"/shop/"):
			t.Errorf("after the delete of shop the store still holds %s", k)
		case strings.Contains(k, "/"+index.DefaultTenant+"/lib/"):
			libKeys++
		}
	}
	if libKeys == 0 {
		t.Errorf("no object of lib under the store (keys %v): the check above looks in the wrong place", keys)
	}
	check("after deleting shop", "lib", "discount coupon", libCommit2)
	t.Logf("stdout of the restarted up:\n%s\nstderr:\n%s", up.out.String(), up.errs.String())
}

// loseTemporal deletes Temporal's state under the data dir of a stopped
// `up`, and only it: the SQLite file and its WAL and shared-memory files.
// The lock and the log stay, as does everything else under the data dir.
// It returns the path to restart `up` with: the same data dir, through a
// symlink. Temporal's SQLite plugin keeps its connection to a database for
// the life of the process, keyed by the file's path, so a second `up` in
// this process reaching the data dir by the same path would go on using
// the deleted file. A new process (what an operator restarts) opens the
// path afresh; a new path does here.
func loseTemporal(t *testing.T, data string) string {
	t.Helper()
	tdir := filepath.Join(data, "temporal")
	removed := 0
	for _, name := range []string{temporalserver.DBFile, temporalserver.DBFile + "-wal", temporalserver.DBFile + "-shm"} {
		err := os.Remove(filepath.Join(tdir, name))
		switch {
		case err == nil:
			removed++
		case !errors.Is(err, os.ErrNotExist):
			t.Fatal(err)
		}
	}
	if removed == 0 {
		t.Fatalf("no Temporal state file under the temporal directory of the data dir")
	}
	same := filepath.Join(t.TempDir(), "same")
	if err := os.Symlink(data, same); err != nil {
		t.Fatal(err)
	}
	return same
}

// checkNewTemporal fails the test unless a restarted `up` made a new
// Temporal database in the data dir (not in the path's old connection).
func checkNewTemporal(t *testing.T, data string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(data, "temporal", temporalserver.DBFile)); err != nil {
		t.Fatalf("the restarted up made no new Temporal database in the data dir: %v", err)
	}
}

// getJSON GETs url into out, failing the test on any error or non-200.
func getJSON(t *testing.T, ctx context.Context, url string, out any) {
	t.Helper()
	code, body := do(t, ctx, http.MethodGet, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d", url, code)
	}
	if err := json.Unmarshal([]byte(body), out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// do sends a body-less request and returns its status code and body.
func do(t *testing.T, ctx context.Context, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// answersAt fails the test unless a query of repo answers chunks from its
// HEAD at commit.
func answersAt(ctx context.Context, t *testing.T, cl *api.Client, when, repo, question, commit string) {
	t.Helper()
	resp, err := cl.Query(ctx, api.QueryRequest{Repo: repo, Query: question, Budget: 1000})
	if err != nil {
		t.Fatalf("%s: query %s: %v", when, repo, err)
	}
	if resp.Commit != commit || len(resp.Chunks) == 0 {
		t.Fatalf("%s: query %s answered commit %s with %d chunks, want %s", when, repo, resp.Commit, len(resp.Chunks), commit)
	}
}
