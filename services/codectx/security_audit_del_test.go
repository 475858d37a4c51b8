package main

// Audit of the DELETE beside running work (it leaves nothing), on
// a real `codectx up`: DELETEs swept across the stages of a snapshot, a
// DELETE racing a push of a new commit (an incremental build spliced from
// the shards the DELETE removes), DELETE then an immediate re-create, two
// DELETEs at once, and a DELETE with another tenant's key.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/embed/embedtest"
	"codectx/pkg/index"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue/natsq"
	"codectx/pkg/testrepo"
)

// auditFiles is a repository of n Go files; salt changes every file.
func auditFiles(n int, salt string) map[string]string {
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("pkg%02d/f%04d.go", i%20, i)] = fmt.Sprintf("package pkg%02d\n\n// Func%d does step %d of the job %s.\nfunc Func%d(a, b int) int {\n\tif a > b {\n\t\treturn a - b + %d\n\t}\n\treturn b - a + %d\n}\n", i%20, i, i, salt, i, i, i)
	}
	return files
}

// auditStack is an up with an embedder and a handle on its queue.
type auditStack struct {
	*secureStack
	st    *blob.Bucket
	queue *atomic.Pointer[natsq.Queue]
}

func startAuditUp(t *testing.T, extra ...string) *auditStack {
	t.Helper()
	srv := embedtest.NewServer(64, "hash-embed")
	t.Cleanup(srv.Close)
	var q atomic.Pointer[natsq.Queue]
	upQueueHook = func(x *natsq.Queue) { q.Store(x) }
	t.Cleanup(func() { upQueueHook = nil })
	s := startSecureUp(t, append([]string{"--embedder", "openai:" + srv.URL + "#hash-embed", "--shard-bytes", "16KiB"}, extra...)...)
	st, err := openStore(s.data)
	if err != nil {
		t.Fatal(err)
	}
	return &auditStack{secureStack: s, st: st, queue: &q}
}

// quiet waits until the parse, embed and graph queues are empty twice,
// a second apart: the workers have finished what they were given.
func (a *auditStack) quiet(ctx context.Context, t *testing.T) {
	t.Helper()
	for calm := 0; calm < 2; {
		n := 0
		for _, stage := range []string{pipeline.StageParse, pipeline.StageEmbed, pipeline.StageGraph} {
			k, err := a.queue.Load().Pending(ctx, stage)
			if err != nil {
				t.Fatal(err)
			}
			n += k
		}
		if n == 0 {
			calm++
		} else {
			calm = 0
		}
		if ctx.Err() != nil {
			t.Fatal("the queues never emptied")
		}
		time.Sleep(time.Second)
	}
}

// gone checks that nothing of tenant/repo is stored, listed, queryable or
// counted. It returns what it found wrong.
func (a *auditStack) gone(ctx context.Context, t *testing.T, tenant, repo string) []string {
	t.Helper()
	var bad []string
	if left := objectsOf(ctx, t, a.st, tenant, repo); len(left) > 0 {
		bad = append(bad, fmt.Sprintf("%d objects left: %v", len(left), left))
	}
	var page api.RepoPage
	code, body := a.do(t, "GET", "/v1/repos?tenant="+tenant, api.AllTenants, "")
	if code != http.StatusOK {
		bad = append(bad, fmt.Sprintf("list: %d %s", code, body))
	} else if err := json.Unmarshal([]byte(body), &page); err != nil {
		bad = append(bad, "list: "+err.Error())
	} else {
		for _, r := range page.Repos {
			if r.Repo == repo {
				bad = append(bad, fmt.Sprintf("listed: %+v", r))
			}
		}
	}
	if resp, err := a.client(api.AllTenants).Query(ctx, api.QueryRequest{Tenant: tenant, Repo: repo, Query: "Func12 step", Budget: 500}); err == nil {
		bad = append(bad, fmt.Sprintf("queryable: commit %s, %d chunks", resp.Commit, len(resp.Chunks)))
	}
	if slices.Contains(a.held(t, tenant), repo) {
		bad = append(bad, "counted toward --tenant-repos")
	}
	return bad
}

// consistent checks that tenant/repo is published whole: HEAD, its
// segment and every shard the segment names exist, it is listed and a
// query answers from HEAD's commit. It returns what it found wrong.
func (a *auditStack) consistent(ctx context.Context, t *testing.T, tenant, repo string) []string {
	t.Helper()
	var bad []string
	h, err := index.ReadHead(ctx, a.st, tenant, repo)
	if err != nil {
		return []string{"no HEAD: " + err.Error()}
	}
	keys, err := index.ShardKeys(ctx, a.st, h.Segment)
	if err != nil {
		return []string{fmt.Sprintf("HEAD's segment %s: %v", h.Segment, err)}
	}
	for _, k := range keys {
		if ok, err := a.st.Exists(ctx, k); err != nil || !ok {
			bad = append(bad, "HEAD's segment names a missing shard "+k)
		}
	}
	if ok, _ := a.st.Exists(ctx, pipeline.ManifestKey(tenant, repo, h.Commit)); !ok {
		bad = append(bad, "HEAD's manifest missing")
	}
	if !slices.Contains(a.held(t, tenant), repo) {
		bad = append(bad, "not held")
	}
	resp, err := a.client(api.AllTenants).Query(ctx, api.QueryRequest{Tenant: tenant, Repo: repo, Query: "Func12 step", Budget: 500})
	if err != nil || resp.Commit != h.Commit || len(resp.Chunks) == 0 {
		bad = append(bad, fmt.Sprintf("query: %v %+v", err, resp))
	}
	return bad
}

// stageAt is the stage tenant/repo's snapshot is in ("-" none, "pub" published).
func (a *auditStack) stageAt(ctx context.Context, tenant, repo string) string {
	rs, err := a.client(api.AllTenants).Status(ctx, tenant, repo)
	if err != nil {
		return "?"
	}
	s := rs.State
	if rs.Progress != nil {
		s += "/" + rs.Progress.Stage
	}
	if rs.Head != nil {
		s += "/pub"
	}
	return s
}

func (a *auditStack) del(t *testing.T, tenant, repo string) (int, string) {
	t.Helper()
	return a.do(t, "DELETE", "/v1/repos/"+tenant+"/"+repo, api.AllTenants, "")
}

// TestAuditDelSweep: DELETEs at delays swept over the whole indexing of a
// 800-file repository (snapshot, parse, embed, graph, publish, GC), each
// in a tenant of its own so that every round parses and embeds again.
func TestAuditDelSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	dir := commitTree(t, filepath.Join(t.TempDir(), "big"), auditFiles(800, "x"))
	a := startAuditUp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	op := a.client(api.AllTenants)
	// The timeline of a whole index, in a fresh tenant.
	timeline := func(tenant string) time.Duration {
		t0 := time.Now()
		if _, err := op.Index(ctx, api.IndexRequest{Tenant: tenant, Repo: "big", Location: dir}); err != nil {
			t.Fatal(err)
		}
		var stages []string
		last := ""
		if _, err := op.WaitIndexedFunc(ctx, tenant, "big", "", func(rs *api.RepoStatus) {
			s := rs.State
			if rs.Progress != nil {
				s += "/" + rs.Progress.Stage
			}
			if s != last {
				stages = append(stages, fmt.Sprintf("%s@%v", s, time.Since(t0).Round(time.Millisecond)))
				last = s
			}
		}); err != nil {
			t.Fatal(err)
		}
		total := time.Since(t0)
		t.Logf("%s: whole index %v, stages %v", tenant, total, stages)
		a.quiet(ctx, t)
		return total
	}
	timeline("sw0")
	if bad := a.consistent(ctx, t, "sw0", "big"); len(bad) > 0 {
		t.Fatalf("round 0 not consistent: %v", bad)
	}
	// A reference round, warm otherwise: the rounds below take as long.
	total := timeline("swref")
	n := 6 // the audit ran 22 rounds of a 2,500-file repository: AUDIT_N
	if v := os.Getenv("AUDIT_N"); v != "" {
		fmt.Sscan(v, &n)
	}
	var fracs []float64
	for i := range n {
		fracs = append(fracs, 1.1*float64(i)/float64(n-1))
	}
	for i, f := range fracs {
		tenant := fmt.Sprintf("sw%d", i+1)
		delay := time.Duration(f * float64(total))
		t1 := time.Now()
		if _, err := op.Index(ctx, api.IndexRequest{Tenant: tenant, Repo: "big", Location: dir}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay - time.Since(t1))
		seen := a.stageAt(ctx, tenant, "big")
		code, body := a.del(t, tenant, "big")
		took := time.Since(t1) - delay
		if code != http.StatusOK {
			t.Errorf("round %d: DELETE at %v (%s): %d %s", i+1, delay, seen, code, body)
			continue
		}
		a.quiet(ctx, t)
		bad := a.gone(ctx, t, tenant, "big")
		t.Logf("round %d: DELETE at %v (%.2f, %s, took %v): %v", i+1, delay.Round(time.Millisecond), f, seen, took.Round(time.Millisecond), bad)
		if len(bad) > 0 {
			t.Errorf("round %d: DELETE at %v (%s) answered 200: %v", i+1, delay, seen, bad)
		}
	}
}

// TestAuditDelPushRace: a repository indexed at one commit, then a push of
// a second commit (an incremental build, spliced from the stored shards)
// and a DELETE sent at delays swept over that push's snapshot.
func TestAuditDelPushRace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	root := t.TempDir()
	files := auditFiles(400, "p")
	lib := commitTree(t, filepath.Join(root, "lib"), files)
	base := testrepo.SmartHTTP(t, root)
	loc := base + "/lib/.git"
	a := startAuditUp(t, "--allow-hosts", strings.TrimPrefix(base, "http://"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	delays := []time.Duration{0, 80, 200} // the audit ran 32 rounds, 0-2.5 s
	for round, d := range delays {
		d *= time.Millisecond
		repo := fmt.Sprintf("lib%d", round)
		if code, body := tryIndex(ctx, a.secureStack, tenantB, repo, loc); code != http.StatusAccepted {
			t.Fatalf("round %d: index: %d %s", round, code, body)
		}
		if _, err := a.client(tenantB).WaitIndexed(ctx, tenantB, repo, ""); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// A second commit changing a few files in a third of the shards.
		for i := 0; i < 400; i += 13 {
			name := fmt.Sprintf("pkg%02d/f%04d.go", i%20, i)
			if err := os.WriteFile(filepath.Join(lib, name), []byte(files[name]+fmt.Sprintf("\n// Round%d changed it.\nfunc Changed%d() {}\n", round, i)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		gitRun(t, lib, "add", "-A")
		gitRun(t, lib, "-c", "user.name=A", "-c", "user.email=a@example.com", "commit", "-q", "-m", fmt.Sprintf("round %d", round))
		commit := gitRun(t, lib, "rev-parse", "HEAD")
		t1 := time.Now()
		if code, body := tryWebhook(ctx, a.secureStack, tenantB, githubPushFrom(repo, loc, commit, randHex(20))); code != http.StatusAccepted {
			t.Fatalf("round %d: push: %d %s", round, code, body)
		}
		time.Sleep(d - time.Since(t1))
		seen := a.stageAt(ctx, tenantB, repo)
		code, body := a.del(t, tenantB, repo)
		if code != http.StatusOK {
			t.Errorf("round %d: DELETE: %d %s", round, code, body)
			continue
		}
		a.quiet(ctx, t)
		bad := a.gone(ctx, t, tenantB, repo)
		t.Logf("round %d: DELETE %v after the push (%s): %v", round, d, seen, bad)
		if len(bad) > 0 {
			t.Errorf("round %d: DELETE %v after the push (%s) answered 200: %v", round, d, seen, bad)
		}
	}
}

// TestAuditDelRecreate: a DELETE during indexing, then at once an index
// request for the same name (the same commit, or another one): the new
// repository must end up whole (HEAD, its segment, every shard named),
// also after the work of the deleted one has finished.
func TestAuditDelRecreate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	dirA := commitTree(t, filepath.Join(t.TempDir(), "a"), auditFiles(400, "a"))
	dirB := commitTree(t, filepath.Join(t.TempDir(), "b"), auditFiles(400, "b"))
	a := startAuditUp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	op := a.client(api.AllTenants)
	delays := []time.Duration{0, 120, 300, 600} // the audit ran 40 rounds, 0-700 ms
	for round, d := range delays {
		d *= time.Millisecond
		tenant := fmt.Sprintf("rc%d", round) // fresh caches each round
		second := dirA
		if round%2 == 1 {
			second = dirB
		}
		t1 := time.Now()
		if _, err := op.Index(ctx, api.IndexRequest{Tenant: tenant, Repo: "re", Location: dirA}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d - time.Since(t1))
		seen := a.stageAt(ctx, tenant, "re")
		if code, body := a.del(t, tenant, "re"); code != http.StatusOK {
			t.Errorf("round %d: DELETE: %d %s", round, code, body)
			continue
		}
		if _, err := op.Index(ctx, api.IndexRequest{Tenant: tenant, Repo: "re", Location: second}); err != nil {
			t.Fatalf("round %d: re-create: %v", round, err)
		}
		_, werr := op.WaitIndexed(ctx, tenant, "re", "")
		a.quiet(ctx, t)
		bad := a.consistent(ctx, t, tenant, "re")
		if werr != nil {
			bad = append(bad, "re-create failed: "+werr.Error())
		}
		same := "same commit"
		if second != dirA {
			same = "other commit"
		}
		left := objectsOf(ctx, t, a.st, tenant, "re")
		t.Logf("round %d: DELETE at %v (%s), re-create (%s): %d objects, %v", round, d, seen, same, len(left), bad)
		if len(bad) > 0 {
			t.Errorf("round %d: DELETE at %v (%s), then re-create (%s): %v", round, d, seen, same, bad)
		}
	}
}

// TestAuditDelTwiceAndForeign: two DELETEs at once during indexing, and a
// DELETE with acme's admin key of beta's repository being indexed.
func TestAuditDelTwiceAndForeign(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	dir := commitTree(t, filepath.Join(t.TempDir(), "two"), auditFiles(300, "t"))
	a := startAuditUp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	op := a.client(api.AllTenants)
	for round, d := range []time.Duration{100, 1500} {
		d *= time.Millisecond
		tenant := fmt.Sprintf("tw%d", round)
		t1 := time.Now()
		if _, err := op.Index(ctx, api.IndexRequest{Tenant: tenant, Repo: "two", Location: dir}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d - time.Since(t1))
		seen := a.stageAt(ctx, tenant, "two")
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i := range 2 {
			wg.Go(func() { codes[i], _ = a.del(t, tenant, "two") })
		}
		wg.Wait()
		a.quiet(ctx, t)
		bad := a.gone(ctx, t, tenant, "two")
		t.Logf("two DELETEs at %v (%s): %v; %v", d, seen, codes, bad)
		if !slices.Contains(codes, http.StatusOK) || slices.ContainsFunc(codes, func(c int) bool { return c != 200 && c != 404 }) || len(bad) > 0 {
			t.Errorf("two DELETEs at %v (%s): %v; %v", d, seen, codes, bad)
		}
	}

	// acme's key (admin of acme) against beta's repositories: the one
	// indexed, and one being indexed.
	for round, d := range []time.Duration{0, 300} {
		d *= time.Millisecond
		repo := fmt.Sprintf("fx%d", round)
		t1 := time.Now()
		if _, err := op.Index(ctx, api.IndexRequest{Tenant: tenantB, Repo: repo, Location: dir}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d - time.Since(t1))
		before := objectsOf(ctx, t, a.st, tenantB, "vault")
		var codes []int
		for _, path := range []string{"/v1/repos/beta/" + repo, "/v1/repos/beta/vault", "/v1/repos/beta/vault/", "/v1/repos/acme/../beta/vault", "/v1/repos/beta/./vault", "/v1/repos/Beta/vault", "/v1/repos/beta%2Fvault/x"} {
			code, body := a.do(t, "DELETE", path, tenantA, "")
			codes = append(codes, code)
			if code == http.StatusOK {
				t.Errorf("acme's DELETE %s: %d %s", path, code, body)
			}
		}
		if _, err := a.client(tenantB).WaitIndexed(ctx, tenantB, repo, ""); err != nil {
			t.Errorf("beta/%s after acme's DELETEs: %v", repo, err)
		}
		a.quiet(ctx, t)
		after := objectsOf(ctx, t, a.st, tenantB, "vault")
		bad := a.consistent(ctx, t, tenantB, repo)
		if !slices.Equal(before, after) {
			bad = append(bad, fmt.Sprintf("beta/vault changed: %v -> %v", before, after))
		}
		t.Logf("acme's DELETEs of beta's at %v: %v; %v", d, codes, bad)
		if len(bad) > 0 {
			t.Errorf("acme's DELETEs of beta's at %v: %v", d, bad)
		}
	}
	a.assertServes(t)
}

// slowHeads is a store whose reads of one HEAD key take longer than a
// query waits for a HEAD it already knows (api headTimeout, 1.5 s) while
// armed: a slow object store, or a local disk under load.
type slowHeads struct {
	*blob.Bucket
	key   atomic.Value // string
	armed atomic.Bool
}

func (s *slowHeads) Get(ctx context.Context, key string) ([]byte, error) {
	if s.armed.Load() && key == s.key.Load() {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(3 * time.Second):
		}
	}
	return s.Bucket.Get(ctx, key)
}

// TestAuditDelStaleHeadServesDeletedRepo: after a DELETE has answered 200
// and removed every object of the repository, a query of it on the same
// server whose HEAD read is slow (over the 1.5 s a known HEAD is waited
// for) is answered from the HEAD the server knew before the DELETE: the
// deleted repository's code, from the segment still in the cache.
func TestAuditDelStaleHeadServesDeletedRepo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	slow := &slowHeads{}
	slow.key.Store(index.HeadKey(tenantB, "leak"))
	upStoreHook = func(b *blob.Bucket) *blob.Bucket {
		slow.Bucket = b
		return blob.NewBucket(slow)
	}
	t.Cleanup(func() { upStoreHook = nil })
	s := startSecureUp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const secret = "DeletedLeakMarker91c2"
	dir := commitTree(t, filepath.Join(t.TempDir(), "leak"), map[string]string{
		"creds/creds.go": "package creds\n\n// LeakToken was committed by mistake.\nconst LeakToken = \"" + secret + "\"\n",
	})
	s.index(t, tenantB, "leak", dir)
	beta := s.client(tenantB)
	q := api.QueryRequest{Tenant: tenantB, Repo: "leak", Query: "LeakToken", Budget: 2000}
	if resp, err := beta.Query(ctx, q); err != nil || !strings.Contains(fmt.Sprint(resp.Chunks), secret) {
		t.Fatalf("query before the DELETE: %v %+v", err, resp)
	}
	if code, body := s.do(t, "DELETE", "/v1/repos/beta/leak", api.AllTenants, ""); code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	st, err := openStore(s.data)
	if err != nil {
		t.Fatal(err)
	}
	if left := objectsOf(ctx, t, st, tenantB, "leak"); len(left) > 0 {
		t.Fatalf("objects left: %v", left)
	}
	slow.armed.Store(true)
	resp, err := beta.Query(ctx, q)
	slow.armed.Store(false)
	if err == nil {
		t.Errorf("DELETE answered 200 and removed everything, yet a query of the deleted repository answers (commit %.12s, stale %q, holds the secret: %v)",
			resp.Commit, resp.StaleReason, strings.Contains(fmt.Sprint(resp.Chunks), secret))
	} else {
		t.Logf("query after the DELETE with a slow HEAD read: %v", err)
	}
}

// slowSwap is a store whose first HEAD swap of one repository, once
// armed, waits until released: a Publish whose write to the store is slow.
type slowSwap struct {
	*blob.Bucket
	key     string
	armed   atomic.Bool
	reached chan struct{}
	release chan struct{}
}

func (s *slowSwap) Swap(ctx context.Context, key string, old, new []byte) error {
	if key == s.key && s.armed.CompareAndSwap(true, false) {
		close(s.reached)
		select {
		case <-s.release:
		case <-time.After(50 * time.Second): // within Publish's StartToClose (1 min)
		}
	}
	return s.Bucket.Swap(ctx, key, old, new)
}

// TestAuditDelLatePublishAfterRecreate: a Publish of a repository's
// snapshot whose HEAD swap is slow; meanwhile the repository is deleted
// (200) and indexed again under the same name from another commit. The
// old Publish's swap then lands: it finds the repository's workflow
// running (the new incarnation's) and keeps the HEAD it moved, which
// names the deleted snapshot's segment, removed by the DELETE. The new
// repository is broken (its HEAD names a missing segment) until its next
// push.
func TestAuditDelLatePublishAfterRecreate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	slow := &slowSwap{key: index.HeadKey(tenantB, "hp"), reached: make(chan struct{}), release: make(chan struct{})}
	upStoreHook = func(b *blob.Bucket) *blob.Bucket {
		slow.Bucket = b
		return blob.NewBucket(slow)
	}
	t.Cleanup(func() { upStoreHook = nil })
	s := startSecureUp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := openStore(s.data)
	if err != nil {
		t.Fatal(err)
	}
	a := &auditStack{secureStack: s, st: st}
	dirA := commitTree(t, filepath.Join(t.TempDir(), "a"), auditFiles(60, "a"))
	dirB := commitTree(t, filepath.Join(t.TempDir(), "b"), auditFiles(60, "b"))
	op := s.client(api.AllTenants)
	slow.armed.Store(true)
	if _, err := op.Index(ctx, api.IndexRequest{Tenant: tenantB, Repo: "hp", Location: dirA}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-slow.reached:
	case <-ctx.Done():
		t.Fatal("the publish never came")
	}
	released := false
	defer func() {
		if !released {
			close(slow.release)
		}
	}()
	if code, body := a.del(t, tenantB, "hp"); code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	if left := objectsOf(ctx, t, st, tenantB, "hp"); len(left) > 0 {
		t.Errorf("after the DELETE: %v", left)
	}
	if _, err := op.Index(ctx, api.IndexRequest{Tenant: tenantB, Repo: "hp", Location: dirB}); err != nil {
		t.Fatal(err)
	}
	if _, err := op.WaitIndexed(ctx, tenantB, "hp", ""); err != nil {
		t.Fatal(err)
	}
	if bad := a.consistent(ctx, t, tenantB, "hp"); len(bad) > 0 {
		t.Fatalf("re-created before the old publish landed: %v", bad)
	}
	close(slow.release)
	released = true
	time.Sleep(3 * time.Second) // the old publish lands and checks its workflow
	if bad := a.consistent(ctx, t, tenantB, "hp"); len(bad) > 0 {
		h, _ := index.ReadHead(ctx, st, tenantB, "hp")
		t.Errorf("the re-created repository after the deleted one's publish landed: HEAD %+v: %v", h, bad)
	}
}

// slowList is a store whose first listing of one prefix, once armed,
// waits until released: a GC whose store is slow.
type slowList struct {
	*blob.Bucket
	prefix  string
	armed   atomic.Bool
	reached chan struct{}
	release chan struct{}
}

func (s *slowList) List(ctx context.Context, prefix string) ([]string, error) {
	if prefix == s.prefix && s.armed.CompareAndSwap(true, false) {
		close(s.reached)
		select {
		case <-s.release:
		case <-time.After(50 * time.Second):
		}
	}
	return s.Bucket.List(ctx, prefix)
}

// TestAuditDelLateGCAfterRecreate: the GC activity of a repository's
// snapshot is slow; meanwhile the repository is deleted (200) and indexed
// again under the same name from another commit. The old GC, which
// checks nothing, goes on with the commits it was told to keep (the
// deleted snapshot's): it removes the new repository's manifest and plan
// under its running build, whose graph job then drops what it wrote as a
// deleted snapshot's. The new repository never gets indexed: its Graph
// activity waits for a segment no job will write (6 h, then retries).
func TestAuditDelLateGCAfterRecreate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	slow := &slowList{prefix: index.RepoPrefix("manifests/", tenantB, "gcr"), reached: make(chan struct{}), release: make(chan struct{})}
	upStoreHook = func(b *blob.Bucket) *blob.Bucket {
		slow.Bucket = b
		return blob.NewBucket(slow)
	}
	var commitA atomic.Value
	commitA.Store("")
	held, hold := make(chan struct{}), make(chan struct{})
	var once sync.Once
	upGraphHook = func(j pipeline.GraphJob) {
		if j.Repo == "gcr" && commitA.Load() != "" && j.Commit != commitA.Load() {
			once.Do(func() { close(held) })
			<-hold
		}
	}
	t.Cleanup(func() { upStoreHook, upGraphHook = nil, nil })
	s := startSecureUp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := openStore(s.data)
	if err != nil {
		t.Fatal(err)
	}
	dirA := commitTree(t, filepath.Join(t.TempDir(), "a"), auditFiles(60, "a"))
	dirB := commitTree(t, filepath.Join(t.TempDir(), "b"), auditFiles(60, "b"))
	commitA.Store(gitRun(t, dirA, "rev-parse", "HEAD"))
	op := s.client(api.AllTenants)
	slow.armed.Store(true)
	if _, err := op.Index(ctx, api.IndexRequest{Tenant: tenantB, Repo: "gcr", Location: dirA}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-slow.reached: // the snapshot published; its GC lists the manifests
	case <-ctx.Done():
		t.Fatal("the GC never came")
	}
	var releaseOnce, holdOnce sync.Once
	defer releaseOnce.Do(func() { close(slow.release) })
	defer holdOnce.Do(func() { close(hold) })
	if code, body := s.do(t, "DELETE", "/v1/repos/beta/gcr", api.AllTenants, ""); code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	if _, err := op.Index(ctx, api.IndexRequest{Tenant: tenantB, Repo: "gcr", Location: dirB}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held: // the new build has read its manifest
	case <-ctx.Done():
		t.Fatal("the new graph job never came")
	}
	releaseOnce.Do(func() { close(slow.release) })
	time.Sleep(2 * time.Second) // the old GC finishes
	left := objectsOf(ctx, t, st, tenantB, "gcr")
	holdOnce.Do(func() { close(hold) })
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	_, werr := op.WaitIndexed(wctx, tenantB, "gcr", "")
	a := &auditStack{secureStack: s, st: st}
	bad := a.consistent(ctx, t, tenantB, "gcr")
	if werr != nil || len(bad) > 0 {
		t.Errorf("re-created while the deleted snapshot's GC ran (objects then: %v): index: %v; %v", left, werr, bad)
	}
}
