package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/blob/local"
	"codectx/pkg/index"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue/natsq"
	"codectx/pkg/segment"
	"codectx/pkg/testrepo"
)

// genFiles is n small Go files under gen/, each with its own content (so
// its own parse result).
func genFiles(n int) map[string]string {
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("gen/f%03d.go", i)] = fmt.Sprintf("package gen\n\n// Gen%03d returns %d.\nfunc Gen%03d() int { return %d }\n", i, i, i, i)
	}
	return files
}

// segmentPaths lists the files of the index HEAD of tenant/repo names.
func segmentPaths(t *testing.T, ctx context.Context, store *blob.Bucket, tenant, repo string) []string {
	t.Helper()
	h, err := index.ReadHead(ctx, store, tenant, repo)
	if err != nil {
		t.Fatalf("HEAD of %s/%s: %v", tenant, repo, err)
	}
	var paths []string
	if err := index.ReferencedFiles(ctx, store, h.Segment, func(_ string, f segment.File) { paths = append(paths, f.Path) }); err != nil {
		t.Fatalf("files of %s/%s@%s: %v", tenant, repo, h.Commit, err)
	}
	slices.Sort(paths)
	return paths
}

// Losing Temporal's state while snapshots are in progress: one repository
// in its parse stage over a published HEAD (big, its second commit adds
// 200 files), two never published in their graph stage (shop, and gone,
// which is deleted after the restart), one idle (lib). The parse and graph jobs of the lost workflows are left in NATS.
// After the restart what is published serves unchanged, a reindex (the
// location recorded in the store) completes each repository with every
// file, as an uninterrupted index of the same commit has them, and the
// jobs left, redelivered after that, move nothing (deploy/README.md,
// "Losing a store").
func TestUpLosesTemporalStateMidSnapshot(t *testing.T) {
	began := time.Now()
	lib := testrepo.New(t)
	libCommit := lib.Commit("initial", testrepo.Small)
	big := testrepo.New(t)
	bigCommit1 := big.Commit("initial", testrepo.Small)
	shopDir, shopCommit := gitFixture(t)
	gone := testrepo.New(t)
	gone.Commit("initial", testrepo.Small)
	data := t.TempDir()
	addr := freeAddr(t)
	base := "http://" + addr
	cl := &api.Client{BaseURL: base}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	store, err := local.Open(filepath.Join(data, "store"))
	if err != nil {
		t.Fatal(err)
	}

	// The first run holds the first parse of a gen/ file and gone's graph
	// job once asked to, until up has begun to shut down: then the held
	// jobs fail and are handed back to the queue, unfinished.
	var holdParse, holdGraph atomic.Bool
	parseHeld, graphHeld := make(chan string, 1), make(chan string, 1)
	release := make(chan struct{})
	var released sync.Once
	free := func() { released.Do(func() { close(release) }) }
	t.Cleanup(free)
	upParseHook = func(path string) {
		if strings.HasPrefix(path, "gen/") && holdParse.CompareAndSwap(true, false) {
			parseHeld <- path
			<-release
		}
	}
	upGraphHook = func(j pipeline.GraphJob) {
		if j.Repo == "gone" && holdGraph.CompareAndSwap(true, false) {
			graphHeld <- j.Commit
			<-release
		}
	}
	var q atomic.Pointer[natsq.Queue]
	upQueueHook = func(x *natsq.Queue) { q.Store(x) }
	t.Cleanup(func() { upParseHook, upGraphHook, upQueueHook = nil, nil, nil })
	pending := func() (parse, graph int) {
		t.Helper()
		var err error
		if parse, err = q.Load().Pending(ctx, pipeline.StageParse); err != nil {
			t.Fatal(err)
		}
		if graph, err = q.Load().Pending(ctx, pipeline.StageGraph); err != nil {
			t.Fatal(err)
		}
		return parse, graph
	}

	// One parse worker: held, it leaves big's other batches waiting in
	// the queue.
	up := startUp(t, "--data", data, "--listen", addr, "--parse-workers", "1")
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	index1 := func(when, tenant, repo, loc, commit string) *api.RepoStatus {
		t.Helper()
		if _, err := cl.Index(ctx, api.IndexRequest{Tenant: tenant, Repo: repo, Location: loc}); err != nil {
			t.Fatalf("%s: index %s: %v", when, repo, err)
		}
		st, err := cl.WaitIndexed(ctx, tenant, repo, commit)
		if err != nil {
			t.Fatalf("%s: wait for %s: %v", when, repo, err)
		}
		if st.Head == nil || st.Head.Commit != commit || !st.Head.Complete || st.Failed != 0 {
			t.Fatalf("%s: %s status %+v, want a complete HEAD at %s", when, repo, st, commit)
		}
		return st
	}
	index1("first run", "", "lib", lib.Dir, libCommit)
	index1("first run", "", "big", big.Dir, bigCommit1)
	bigCommit2 := big.Commit("generated", genFiles(200))

	// gone's files are lib's, all reused: it reaches its graph stage at
	// once. shop's graph job waits behind its held one.
	holdGraph.Store(true)
	if _, err := cl.Index(ctx, api.IndexRequest{Repo: "gone", Location: gone.Dir}); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, up, graphHeld, "gone's graph job started")
	if _, err := cl.Index(ctx, api.IndexRequest{Repo: "shop", Location: shopDir}); err != nil {
		t.Fatal(err)
	}
	up.waitFor(t, "shop in its graph stage", time.Minute, func() bool { return indexingStage(ctx, cl, "shop") == api.StageGraph })
	holdParse.Store(true)
	if _, err := cl.Index(ctx, api.IndexRequest{Repo: "big", Location: big.Dir}); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, up, parseHeld, "big's parse started")
	// The snapshots are in progress, as status says, before the stop.
	up.waitFor(t, "big in its parse stage, shop and gone in their graph stage", time.Minute, func() bool {
		return indexingStage(ctx, cl, "big") == api.StageParse && indexingStage(ctx, cl, "shop") == api.StageGraph && indexingStage(ctx, cl, "gone") == api.StageGraph
	})
	parseLeft, graphLeft := pending()
	if parseLeft < 2 || graphLeft != 2 {
		t.Fatalf("before the stop %d parse and %d graph jobs in the queue, want big's batches (the held one and more) and the graph jobs of shop and gone", parseLeft, graphLeft)
	}
	stopTook := up.stopFreeing(t, free)
	if h, err := index.ReadHead(ctx, store, index.DefaultTenant, "big"); err != nil || h.Commit != bigCommit1 {
		t.Fatalf("big's HEAD before the restart: %+v, %v; want it still at %s", h, err, bigCommit1)
	}
	// What the lost snapshot wrote stays: its manifest and plan.
	lost := pipeline.ManifestKey(index.DefaultTenant, "big", bigCommit2)
	if ok, err := store.Exists(ctx, lost); err != nil || !ok {
		t.Fatalf("no manifest of big's second commit before the restart (%v): the snapshot was not stopped past its snapshot stage", err)
	}
	for _, repo := range []string{"shop", "gone"} {
		if h, err := index.ReadHead(ctx, store, index.DefaultTenant, repo); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("%s's HEAD before the restart: %+v, %v; want none", repo, h, err)
		}
	}

	same := loseTemporal(t, data)
	// The stop handed the held jobs back, and the restarted up would take
	// them at once. They can come back late too (a process that dies
	// hands nothing back: its jobs wait out the queue's ack wait): the
	// second run holds them, big's batch until the reindexes have
	// published, gone's graph job until gone is deleted.
	lateParse, lateGraph := make(chan struct{}), make(chan struct{})
	lateParseHeld, lateGraphHeld := make(chan struct{}), make(chan struct{})
	var freeLateParse, freeLateGraph sync.Once
	t.Cleanup(func() {
		freeLateParse.Do(func() { close(lateParse) })
		freeLateGraph.Do(func() { close(lateGraph) })
	})
	holdParse.Store(true)
	holdGraph.Store(true)
	upParseHook = func(path string) {
		if strings.HasPrefix(path, "gen/") && holdParse.CompareAndSwap(true, false) {
			close(lateParseHeld)
			<-lateParse
		}
	}
	upGraphHook = func(j pipeline.GraphJob) {
		if j.Repo == "gone" && holdGraph.CompareAndSwap(true, false) {
			close(lateGraphHeld)
			<-lateGraph
		}
	}
	restartAt := time.Now()
	// Two parse workers: one holds big's batch, the other parses.
	up = startUp(t, "--data", same, "--listen", addr, "--parse-workers", "2")
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	checkNewTemporal(t, data)
	for what, held := range map[string]chan struct{}{"big's batch": lateParseHeld, "gone's graph job": lateGraphHeld} {
		waitHeld(t, up, held, what+", handed back at the stop, redelivered after the restart")
	}
	t.Logf("the handed-back jobs were redelivered within %v of the restart", time.Since(restartAt).Round(time.Millisecond))

	// 1. What is published serves: lib and big's first commit; shop and
	// gone, never published, are unknown (no workflow, no HEAD).
	check := func(when, repo, question, commit string) {
		t.Helper()
		answersAt(ctx, t, cl, when, repo, question, commit)
	}
	check("after losing Temporal", "lib", "price lookup", libCommit)
	check("after losing Temporal", "big", "price lookup", bigCommit1)
	if st, err := cl.Status(ctx, "", "big"); err != nil || st.Head == nil || st.Head.Commit != bigCommit1 || !st.Head.Complete || st.State != api.StateUnknown {
		t.Fatalf("big's status after losing Temporal: %+v, %v; want state unknown, its complete HEAD at %s", st, err, bigCommit1)
	}
	for _, repo := range []string{"shop", "gone"} {
		_, err = cl.Query(ctx, api.QueryRequest{Repo: repo, Query: "how are refunds issued", Budget: 1000})
		if !isStatus(err, http.StatusNotFound) {
			t.Fatalf("query of %s after losing Temporal: %v, want HTTP 404", repo, err)
		}
		if _, err := cl.Status(ctx, "", repo); !isStatus(err, http.StatusNotFound) {
			t.Fatalf("status of %s after losing Temporal: %v, want HTTP 404", repo, err)
		}
	}
	// Without a bound on a tenant's repositories the list is the HEADs:
	// a repository whose first snapshot was lost is not on it (its name
	// and location are under repos/ in the store).
	var page api.RepoPage
	getJSON(t, ctx, base+"/v1/repos", &page)
	var listed []string
	for _, r := range page.Repos {
		listed = append(listed, r.Repo)
	}
	if !slices.Equal(listed, []string{"big", "lib"}) {
		t.Errorf("GET /v1/repos after losing Temporal lists %v, want the published big and lib", listed)
	}
	// gone is not wanted any more: its DELETE, without a workflow or a
	// HEAD, removes what its lost snapshot wrote (its registration and
	// recorded location, manifest and plan). Its graph job, held at the
	// stop, held again since the restart, goes on after it and must
	// leave nothing.
	if res, err := cl.Delete(ctx, "", "gone"); err != nil || res.Deleted == 0 {
		t.Fatalf("delete of gone after losing Temporal: %+v, %v; want its objects removed", res, err)
	}
	freeLateGraph.Do(func() { close(lateGraph) })

	// 2. A reindex of each (the location recorded in the store) completes
	// it, at its location's HEAD, every file indexed. big's has moved on
	// meanwhile: one file changed, one added.
	bigCommit3 := big.Commit("third", map[string]string{
		"gen/f000.go":  "package gen\n\n// Gen000 returns zero.\nfunc Gen000() int { return 0 }\n",
		"gen/extra.go": "package gen\n\n// Extra is one more.\nconst Extra = 1\n",
	})
	reindexAt := time.Now()
	for _, repo := range []string{"big", "shop"} {
		if code, body := do(t, ctx, http.MethodPost, base+"/v1/repos/default/"+repo+"/reindex"); code != http.StatusAccepted {
			t.Fatalf("reindex of %s without its workflow: HTTP %d %s, want 202", repo, code, body)
		}
	}
	commits := map[string]string{"big": bigCommit3, "shop": shopCommit}
	heads := map[string]index.Head{}
	for _, repo := range []string{"big", "shop"} {
		st, err := cl.WaitIndexed(ctx, "", repo, commits[repo])
		if err != nil {
			t.Fatalf("wait for %s: %v", repo, err)
		}
		if st.Head == nil || st.Head.Commit != commits[repo] || !st.Head.Complete || st.Failed != 0 || st.Already || st.Files != st.Parsed+st.Reused {
			t.Fatalf("%s reindexed after losing Temporal: %+v, want a complete HEAD at %s", repo, st, commits[repo])
		}
		heads[repo] = *st.Head
		t.Logf("%s reindexed within %v: %d files, %d parsed, %d reused", repo, time.Since(reindexAt).Round(time.Millisecond), st.Files, st.Parsed, st.Reused)
	}
	// The reindexes did not wait for big's held batch: it goes on after
	// the publishes (step 4).
	if p, _ := pending(); p == 0 {
		t.Fatalf("after the reindexes %d parse jobs in the queue, want the lost workflow's held batch still there", p)
	}
	freeLateParse.Do(func() { close(lateParse) })

	// 3. Every file is there, as in an uninterrupted index of the same
	// commits: under another tenant, so that nothing of the run that was
	// cut is reused (the parse cache is a tenant's).
	files := map[string][]string{}
	for _, repo := range []string{"big", "shop"} {
		loc := map[string]string{"big": big.Dir, "shop": shopDir}[repo]
		want := index1("uninterrupted", "ref", repo, loc, commits[repo])
		got, err := cl.Status(ctx, "", repo)
		if err != nil {
			t.Fatal(err)
		}
		if got.Files != want.Files || want.Parsed+want.Reused != want.Files {
			t.Errorf("%s: %d files after the reindex, %d (%d parsed, %d reused) in an uninterrupted index", repo, got.Files, want.Files, want.Parsed, want.Reused)
		}
		files[repo] = segmentPaths(t, ctx, store, index.DefaultTenant, repo)
		if wp := segmentPaths(t, ctx, store, "ref", repo); !slices.Equal(files[repo], wp) {
			t.Errorf("%s: the segment after the reindex holds %d files, the uninterrupted one %d\n got %v\nwant %v", repo, len(files[repo]), len(wp), files[repo], wp)
		}
		t.Logf("%s: %d files in the snapshot, %d in the segment, as uninterrupted", repo, got.Files, len(files[repo]))
	}
	check("after the reindex", "big", "Gen123 returns", bigCommit3)
	check("after the reindex", "shop", "how are refunds issued", shopCommit)

	// 4. The jobs the lost workflows had in hand go on late: big's batch
	// (of its second commit, whose manifest the reindex's GC removed)
	// after the reindex published, gone's graph job after the delete.
	// They are consumed, none dead-lettered, and move nothing.
	up.waitFor(t, "the jobs of the lost workflows to be consumed", time.Minute, func() bool {
		p, g := pending()
		return p == 0 && g == 0
	})
	drained := time.Since(restartAt)
	if !strings.Contains(up.errs.String(), "graph job of a deleted snapshot dropped") {
		t.Errorf("gone's graph job, back after its delete, was not dropped as a deleted snapshot's\nstderr:\n%s", up.errs.String())
	}
	for _, stage := range []string{pipeline.StageParse, pipeline.StageGraph} {
		dls, err := q.Load().DeadLetters(ctx, stage)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dls {
			t.Errorf("dead letter of the %s stage: %s: %s", stage, d.ID, d.Reason)
		}
	}
	for _, repo := range []string{"big", "shop"} {
		if h, err := index.ReadHead(ctx, store, index.DefaultTenant, repo); err != nil || h != heads[repo] {
			t.Errorf("%s's HEAD after the lost workflows' jobs: %+v, %v; want %+v", repo, h, err, heads[repo])
		}
		if got := segmentPaths(t, ctx, store, index.DefaultTenant, repo); !slices.Equal(got, files[repo]) {
			t.Errorf("%s: %d files in the segment after the lost workflows' jobs, %d before", repo, len(got), len(files[repo]))
		}
	}
	check("after the lost workflows' jobs", "big", "Gen123 returns", bigCommit3)
	check("after the lost workflows' jobs", "shop", "how are refunds issued", shopCommit)
	check("after the lost workflows' jobs", "lib", "price lookup", libCommit)
	all, err := store.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range all {
		if strings.Contains(k, "/"+index.DefaultTenant+"/gone/") {
			t.Errorf("after the delete of gone and its lost jobs the store holds %s", k)
		}
	}

	// 5. Nothing of the lost snapshots is left over but parse results:
	// each repository has objects only of its HEAD and the commit before
	// it (big's first: its second, lost, was never published). The held
	// batch, parsed late, wrote the result of gen/f000.go as it was in the
	// second commit, which no manifest or segment references: codectx gc
	// collects it.
	keep := map[string][]string{"big": {bigCommit1, bigCommit3}, "shop": {shopCommit}, "lib": {libCommit}}
	for repo, commits := range keep {
		for _, root := range []string{"manifests/", "plans/", "segments/"} {
			keys, err := store.List(ctx, index.RepoPrefix(root, index.DefaultTenant, repo))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(k), ".json"), ".seg")
				if !slices.Contains(commits, pipeline.SegmentCommit(name)) {
					t.Errorf("%s: %s left over (kept commits %v)", repo, k, commits)
				}
			}
		}
	}
	gc := func(args ...string) pipeline.GCStats {
		t.Helper()
		var out syncBuffer
		if err := run(ctx, append([]string{"gc", "--data", same, "--json"}, args...), &out, &syncBuffer{}); err != nil {
			t.Fatalf("gc %v: %v", args, err)
		}
		var rep gcReport
		if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
			t.Fatalf("gc %v: %v\n%s", args, err, out.String())
		}
		return rep.GCStats
	}
	if st := gc("--dry-run"); st.Deleted != 1 {
		t.Errorf("gc --dry-run after the lost workflows' jobs: %+v, want the one result of the lost commit to delete", st)
	}
	collected := gc()
	if st := gc("--dry-run"); st.Deleted != 0 {
		t.Errorf("gc --dry-run after gc: %+v, want nothing to delete", st)
	}
	check("after gc", "big", "Gen123 returns", bigCommit3)
	check("after gc", "shop", "how are refunds issued", shopCommit)
	check("after gc", "lib", "price lookup", libCommit)
	t.Logf("the first stop took %v; the jobs of the lost workflows were consumed %v after the restart; gc: %+v; whole test %v",
		stopTook.Round(time.Millisecond), drained.Round(time.Millisecond), collected, time.Since(began).Round(time.Millisecond))
}

// isStatus reports whether err is an API error with HTTP status code.
func isStatus(err error, code int) bool {
	var e *api.Error
	return errors.As(err, &e) && e.Code == code
}
