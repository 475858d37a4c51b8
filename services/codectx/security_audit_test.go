package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue/natsq"
	"codectx/pkg/testrepo"
)

// githubPushFrom is githubPush with a chosen "before", so that pushes of
// one commit are distinct deliveries (the replay log keys the body too).
func githubPushFrom(repo, cloneURL, commit, before string) string {
	b, _ := json.Marshal(map[string]any{
		"ref": "refs/heads/master", "before": before, "after": commit,
		"repository": map[string]string{"full_name": repo, "clone_url": cloneURL, "default_branch": "master"},
	})
	return string(b)
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// A DELETE of a repository and pushes of the same repository sent at
// the same time: a push that found the registration before the DELETE
// removed it, and signals after the DELETE terminated the workflow,
// starts the workflow again. The repository is then indexed again after
// the DELETE answered 200, with no registration: its HEAD is back, and a
// tenant doing this in turn holds workflows (and, until they publish,
// repositories) the bound does not count. After a DELETE has answered
// and its racing pushes have answered, the repository must stay deleted.
func TestAuditDeleteRacePushResurrects(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	root := t.TempDir()
	lib := commitTree(t, filepath.Join(root, "lib"), map[string]string{
		"ledger/ledger.go": "package ledger\n\n// SumLedger adds the rows.\nfunc SumLedger(rows []int) int { return len(rows) }\n",
	})
	commit := gitRun(t, lib, "rev-parse", "HEAD")
	base := testrepo.SmartHTTP(t, root)
	loc := base + "/lib/.git"
	s := startSecureUp(t, "--allow-hosts", strings.TrimPrefix(base, "http://"), "--tenant-repos", "3",
		"--tenant-concurrency", "8") // as on a machine of 16 cores: with 2, one request of beta at a time
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st, err := openStore(s.data)
	if err != nil {
		t.Fatal(err)
	}
	const repo = "racer"
	exists := func(key string) bool {
		ok, err := st.Exists(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	const rounds = 8
	for round := range rounds {
		if reg := exists("repos/beta/" + repo + "/@/REPO"); reg {
			// A push after the DELETE registered it again (rightly): delete it.
			if code, body := s.do(t, "DELETE", "/v1/repos/beta/"+repo, api.AllTenants, ""); code != http.StatusOK {
				t.Fatalf("round %d: cleaning DELETE: %d %s", round, code, body)
			}
		}
		if code, body := tryIndex(ctx, s, tenantB, repo, loc); code != http.StatusAccepted {
			t.Fatalf("round %d: index %s: %d %s", round, repo, code, body)
		}
		if _, err := s.client(tenantB).WaitIndexed(ctx, tenantB, repo, ""); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// One push per round, sent a little later each round: several
		// pushes would hide the race, as a push whose check comes after
		// the registration is gone rightly registers the repository again.
		var wg sync.WaitGroup
		var pushCode int
		var delCode int
		var delBody string
		// The DELETE starts from 0.4 ms before the push to 0.8 ms after it.
		offset := time.Duration(round%4)*400*time.Microsecond - 400*time.Microsecond
		wg.Go(func() {
			if offset < 0 {
				time.Sleep(-offset)
			}
			if round >= 4 {
				pushCode, _ = tryIndex(ctx, s, tenantB, repo, loc)
				return
			}
			pushCode, _ = tryWebhook(ctx, s, tenantB, githubPushFrom(repo, loc, commit, randHex(20)))
		})
		wg.Go(func() {
			time.Sleep(max(offset, 0))
			t0 := time.Now()
			delCode, delBody = s.do(t, "DELETE", "/v1/repos/beta/"+repo, api.AllTenants, "")
			t.Logf("round %d: DELETE took %v", round, time.Since(t0))
		})
		wg.Wait()
		codes := pushCode
		if delCode != http.StatusOK {
			t.Fatalf("round %d: DELETE: %d %s", round, delCode, delBody)
		}
		// The DELETE and every push have answered: give a resurrected
		// workflow time to publish.
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && !exists(index.HeadKey(tenantB, repo)) && !exists("repos/beta/"+repo+"/@/REPO") {
			time.Sleep(100 * time.Millisecond)
		}
		if exists("repos/beta/" + repo + "/@/REPO") {
			time.Sleep(2 * time.Second) // a snapshot of one file publishes well within this
		}
		head, reg := exists(index.HeadKey(tenantB, repo)), exists("repos/beta/"+repo+"/@/REPO")
		t.Logf("round %d: pushes %v; after DELETE 200: HEAD %v, registration %v", round, codes, head, reg)
		if head && !reg {
			t.Fatalf("round %d: %s/%s is published again after its DELETE answered 200 (registration: %v; held now %v): a push racing the DELETE started its workflow again",
				round, tenantB, repo, reg, s.held(t, tenantB))
		}
	}
}

// A DELETE while a snapshot runs: the workflow is terminated, but the
// queue's workers (parse, embed, graph) and an activity already running
// finish what they were given. Anything they store under the repository
// after the DELETE answered is left behind: no HEAD points at it, so no
// per-repository GC removes it, and the tenant's count no longer holds
// it. After the DELETE, nothing of the repository may remain.
//
// A DELETE during the snapshot stage (listing, or a clone that may take
// minutes) left the manifest and the plan the running activity wrote
// after it (1 or 2 objects in each round). The activity now removes them
// when it finds its RepoWorkflow ended.
func TestAuditDeleteMidSnapshotLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	files := map[string]string{}
	for i := range 3000 {
		files[fmt.Sprintf("pkg%02d/f%03d.go", i%20, i)] = fmt.Sprintf("package pkg%02d\n\n// Func%d does step %d of the job.\nfunc Func%d(a, b int) int {\n\tif a > b {\n\t\treturn a - b + %d\n\t}\n\treturn b - a + %d\n}\n", i%20, i, i, i, i, i)
	}
	dir := commitTree(t, filepath.Join(t.TempDir(), "big"), files)
	s := startSecureUp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st, err := openStore(s.data)
	if err != nil {
		t.Fatal(err)
	}
	op := s.client(api.AllTenants)
	for round, delay := range []time.Duration{60, 100, 150} {
		delay *= time.Millisecond
		repo := fmt.Sprintf("big%d", round)
		t0 := time.Now()
		if _, err := op.Index(ctx, api.IndexRequest{Tenant: tenantB, Repo: repo, Location: dir}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay - time.Since(t0))
		seen := "?"
		if rs, err := op.Status(ctx, tenantB, repo); err == nil {
			seen = rs.State
			if rs.Progress != nil {
				seen += "/" + rs.Progress.Stage
			}
			if rs.Head != nil {
				seen += "/published"
			}
		}
		if code, body := s.do(t, "DELETE", "/v1/repos/beta/"+repo, api.AllTenants, ""); code != http.StatusOK {
			t.Fatalf("DELETE %s: %d %s", repo, code, body)
		}
		time.Sleep(4 * time.Second) // the queue's workers finish what they hold
		left := objectsOf(ctx, t, st, tenantB, repo)
		t.Logf("DELETE %v after the index request (%s): %d objects left %v", delay, seen, len(left), left)
		if len(left) > 0 {
			t.Errorf("DELETE of %s (%s) answered 200, and %d objects of it remain: %v", repo, seen, len(left), left)
		}
	}
}

// objectsOf lists every stored object of tenant/repo.
func objectsOf(ctx context.Context, t *testing.T, st *blob.Bucket, tenant, repo string) []string {
	t.Helper()
	var left []string
	for _, root := range []string{"heads/", "segments/", "manifests/", "plans/", "shards/", "vectors/", "vectorsets/", "embedplans/", "repos/"} {
		keys, err := st.List(ctx, index.RepoPrefix(root, tenant, repo))
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, keys...)
	}
	return left
}

// TestAuditDeleteMidGraphLeavesNothing: a DELETE that answers while the
// graph worker builds the repository's segment leaves nothing of it. The
// graph worker is a queue consumer, not an activity: the workflow's end
// does not stop it, and its shards and segment were written after the
// DELETE's sweep and kept for good.
func TestAuditDeleteMidGraphLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	files := map[string]string{}
	for i := range 400 {
		files[fmt.Sprintf("pkg%02d/f%03d.go", i%8, i)] = fmt.Sprintf("package pkg%02d\n\n// Step%d does step %d of the job.\nfunc Step%d(a int) int { return a + %d }\n", i%8, i, i, i, i)
	}
	dir := commitTree(t, filepath.Join(t.TempDir(), "mid"), files)
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	upGraphHook = func(j pipeline.GraphJob) {
		if j.Repo == "mid" {
			once.Do(func() { close(reached) })
			<-release
		}
	}
	var queue atomic.Pointer[natsq.Queue]
	upQueueHook = func(q *natsq.Queue) { queue.Store(q) }
	t.Cleanup(func() { upGraphHook, upQueueHook = nil, nil })
	s := startSecureUp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := openStore(s.data)
	if err != nil {
		t.Fatal(err)
	}
	op := s.client(api.AllTenants)
	if _, err := op.Index(ctx, api.IndexRequest{Tenant: tenantB, Repo: "mid", Location: dir}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	case <-ctx.Done():
		close(release)
		t.Fatal("the graph job never started")
	}
	code, body := s.do(t, "DELETE", "/v1/repos/beta/mid", api.AllTenants, "")
	close(release)
	if code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	// The graph job finishes after the DELETE; wait until its queue is
	// empty, then a little for its last writes.
	for {
		n, err := queue.Load().Pending(ctx, pipeline.StageGraph)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the graph queue never emptied")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if left := objectsOf(ctx, t, st, tenantB, "mid"); len(left) > 0 {
		t.Errorf("DELETE answered 200 while the graph job built, and %d objects of the repository remain: %v", len(left), left)
	}
}
