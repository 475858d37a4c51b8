package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/keys"
	"codectx/pkg/location"
	"codectx/pkg/metrics"
	"codectx/pkg/pack"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue"
	"codectx/pkg/queue/natsq"
	"codectx/pkg/session"
	"codectx/pkg/session/natskv"
	"codectx/pkg/temporalserver"
)

// upParseHook, when set by a test, runs before each file is parsed (to hold
// indexing in the middle). Nil in the program.
var upParseHook func(path string)

// upGraphHook, when set by a test, runs once a graph job has read its
// manifest (to hold a segment's build in the middle). Nil in the program.
var upGraphHook func(pipeline.GraphJob)

// upQueueHook, when set by a test, is given the queue client of `up` (to
// watch the length of a stage's queue).
var upQueueHook func(*natsq.Queue)

// upStoreHook, when set by a test, wraps the blob store of `up` (to make
// it fail for a while). Nil in the program.
var upStoreHook func(*blob.Bucket) *blob.Bucket

// embeddedPoll is how often `up`'s activities check for stage results.
const embeddedPoll = 100 * time.Millisecond

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// runUp runs every role in one process on embedded dependencies: Temporal
// (SQLite under the data dir), NATS JetStream (under the data dir), the
// local blob store (or S3 when configured), the orchestrator worker, the
// parse and graph workers and the whole HTTP API.
func runUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.StringVar(&c.data, "data", dataDir(), "data directory: Temporal and NATS state, blob store, clone cache ($"+envData+")")
	fs.StringVar(&c.listen, "listen", env(envListen, defaultListen), "address of the HTTP API ($"+envListen+")")
	c.storeFlags(fs)
	c.netFlags(fs)
	var locations listFlag
	fs.Var(&locations, "index", "index this path or clone URL on start, NAME=LOCATION to name its repository (repeatable)")
	tenant := fs.String("tenant", "default", "tenant of the --index repositories")
	parseWorkers := fs.Int("parse-workers", runtime.GOMAXPROCS(0), "parse handlers")
	embedWorkers := fs.Int("embed-workers", 1, "embed handlers (with --embedder)")
	var df denseFlags
	df.register(fs, false)
	var hooks webhookFlags
	hooks.register(fs)
	var limits limitFlags
	limits.register(fs)
	cacheBytes := int64(api.DefaultCacheBytes)
	cacheFlag(fs, &cacheBytes)
	var memBytes int64
	memoryFlag(fs, &memBytes)
	var shardCache shardCacheFlags
	shardCache.register(fs)
	shardFlag(fs, &c.shardBytes)
	chunksFlag(fs, &c.maxChunks)
	tenantSnapshotsFlag(fs, &c.tenantSnapshots, fmt.Sprintf("with API keys %d, without keys (one user) no bound", defaultTenantSnapshots))
	queueWindowFlag(fs, &c.queueWindow)
	tenantBatchesFlag(fs, &c.tenantBatches, fmt.Sprintf("with API keys %d, without keys (one user) no bound", defaultTenantBatches))
	tenantReposFlag(fs, &c.tenantRepos, fmt.Sprintf("with API keys %d, without keys (one user) no bound", api.DefaultTenantRepos))
	keysFile := fs.String("api-keys", env(envAPIKeys, ""), "API key file (codectx key create writes it; re-read when it changes); when set, every API route but health and webhooks needs a key, /metrics an operator's ($"+envAPIKeys+")")
	keysOn := fs.Bool("keys", envBool(envKeys, false), "require API keys from DATA/keys.json; on first start an admin key is written to DATA/admin.key (mode 0600); ignored with --api-keys ($"+envKeys+")")
	var prof profileFlags
	prof.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: codectx up [--data DIR] [--listen ADDR] [--index PATH_OR_URL ...]

Runs all of codectx in one process on embedded defaults: a Temporal server
(SQLite under the data dir, so unfinished indexing resumes after a restart),
a NATS JetStream server, the local blob store, the orchestrator, parse and
graph workers, and the HTTP API (query, MCP at /v1/mcp, index, status,
/healthz, /readyz, /metrics). With --embedder, embed workers embed every new
chunk (cached by model and content), the vectors go to the embedded vector
store and queries get the dense arm; without one the embed stage is skipped.
With --index, each
location is indexed on start and progress is printed; the API keeps serving.
Stop with SIGINT or SIGTERM.`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// Started first and stopped last: the profile covers the whole run,
	// the embedded servers' shutdown included.
	stopProf, err := prof.start()
	if err != nil {
		return err
	}
	defer func() {
		if err := stopProf(); err != nil {
			fmt.Fprintf(stderr, "up: %v\n", err)
		}
	}()
	// The graph workers and the query server share this process: a graph
	// built is handed to the first load of its shard list.
	index.HandOffGraphs()
	webhooks, err := hooks.config()
	if err != nil {
		return err
	}
	// A data dir made by an older version or by hand may be open to other
	// local users; nothing in it is theirs to read.
	if err := privateDir(c.data); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	log := newLogger(stderr).With("role", "up")
	defer log.Info("exited") // after the deferred stops of the servers
	data, err := filepath.Abs(c.data)
	if err != nil {
		return err
	}
	c.data = data

	// Embedded dependencies. Temporal first: its lock on the data dir keeps
	// a second `up` from touching anything.
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ts, err := temporalserver.Start(sctx, temporalserver.Config{DataDir: filepath.Join(data, "temporal")})
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	defer ts.Stop()
	// The keys after the lock: a second `up` on this data directory,
	// refused by it, wrote an admin key of its own first.
	if *keysOn && *keysFile != "" {
		// Both say where the keys are: the file wins, and no DATA/keys.json
		// or admin key is made. Said, so that no one looks for admin.key.
		fmt.Fprintf(stderr, "codectx up: --keys ($%s) ignored: the keys are those of --api-keys %s ($%s); no admin key is written to %s\n", envKeys, *keysFile, envAPIKeys, filepath.Join(c.data, "admin.key"))
	}
	if *keysOn && *keysFile == "" {
		*keysFile = filepath.Join(c.data, "keys.json")
		made, err := keys.Bootstrap(*keysFile, filepath.Join(c.data, "admin.key"))
		if err != nil {
			return fmt.Errorf("up: %w", err)
		}
		if made {
			fmt.Fprintf(stdout, "codectx up: keys on; an admin key was written to %s (mode 0600)\n", filepath.Join(c.data, "admin.key"))
		} else {
			// A restart: say so too, or nothing tells that requests need a
			// key and where the keys are.
			fmt.Fprintln(stdout, "codectx up: "+keysOnLine(*keysFile, filepath.Join(c.data, "admin.key")))
			note, err := keysRestart(*keysFile, filepath.Join(c.data, "admin.key"), c.data)
			if err != nil {
				return fmt.Errorf("up: %w", err)
			}
			if note != "" {
				fmt.Fprintln(stderr, "codectx up: "+note)
			}
		}
	}
	keyStore, err := openKeys(*keysFile)
	if err != nil {
		return err
	}
	// up's own --index requests use a key minted for this run, valid for
	// every tenant and for paths on this machine.
	selfKey := rand.Text()
	var selfKeys api.Keys
	if keyStore != nil {
		selfKeys = api.Keys{api.HashKey(selfKey): api.AllTenants}
	}
	ns, err := natsq.StartEmbedded(filepath.Join(data, "nats"))
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	defer ns.Shutdown()
	q, err := natsq.Connect(sctx, ns.URL())
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	defer q.Close()
	shareQueue(q, perTenant(c.tenantBatches, *keysFile != "", defaultTenantBatches))
	if upQueueHook != nil {
		upQueueHook(q)
	}
	store, where, err := c.store(sctx)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	if upStoreHook != nil {
		store = upStoreHook(store)
	}
	kit, err := df.open(sctx, store)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	defer kit.close()
	tc, err := dialTemporal(sctx, log, ts.HostPort(), ts.Namespace(), ts.ClientTLS())
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	defer tc.Close()

	sessions, err := natskv.Open(sctx, q.JetStream(), session.DefaultTTL)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	d := &deps{log: log}
	d.temporal.Store(tc)
	d.queue.Store(q)
	m := metrics.New()
	m.QueueStats(q.Stats)
	// Webhook deliveries are remembered in NATS KV: a replay is refused
	// across restarts of `up` too.
	deliveries, err := q.DeliveriesBounded(sctx, api.DefaultDeliveryWindow, deliveryLogBytes)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	// In up the budget is the whole process's, workers and Temporal
	// included: the cache gets the same share as in a query service and
	// the collector works harder when indexing nears the limit.
	cacheBytes, onMapped := budget(log, memBytes, cacheBytes)
	shards, err := shardCache.open()
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	srv := &api.Server{
		Deliveries: deliveries,
		Store:      store, Indexer: temporalIndexer{tc}, LocalPaths: true, Metrics: m, Routes: api.AllRoutes,
		Checks: d.checks(useTemporal|useNATS, 0), Notes: map[string]string{"embed": kit.note()}, Log: log, Dense: kit.arm(),
		Webhooks: webhooks, Keys: selfKeys, Sessions: sessions, CacheSize: cacheBytes, OnMapped: onMapped, Net: c.netPolicy(),
		ShardCache: shards, CloneDir: filepath.Join(data, "clones"),
	}
	if keyStore != nil {
		srv.KeyStore = keyStore
	}
	if kit.store != nil {
		srv.Vectors = kit.store
	}
	limits.apply(srv, c.listen)
	srv.Limits.TenantRepos = tenantRepos(c.tenantRepos, *keysFile != "")
	hl := limits.http()
	hl.log = log
	hs, err := startHTTP(c.listen, srv.Handler(), hl)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}

	// Workers. They stop on their own context, in order, at shutdown.
	wctx, stopWork := context.WithCancel(context.Background())
	defer stopWork()
	workers := newGroup()
	c.keepClones(wctx, log)
	pw := &pipeline.Workers{Store: store, Queue: q, CacheDir: filepath.Join(data, "clones"), Net: c.netPolicy(), ParseHook: upParseHook, GraphHook: upGraphHook, Wrap: m.Wrap, Embedder: kit.emb, Log: log, ShardBytes: c.shardBytes, MaxChunks: noBound(c.maxChunks)}
	workers.goFunc("parse worker", func() error { return pw.RunParse(wctx, queue.Config{Workers: *parseWorkers, Backoff: queueBackoff}) })
	workers.goFunc("graph worker", func() error { return pw.RunGraph(wctx, queue.Config{Workers: 1, Backoff: queueBackoff}) })
	stages := []string{pipeline.StageParse, pipeline.StageGraph}
	if kit.emb != nil {
		workers.goFunc("embed worker", func() error { return pw.RunEmbed(wctx, queue.Config{Workers: *embedWorkers, Backoff: queueBackoff}) })
		stages = append(stages, pipeline.StageEmbed)
	}
	go m.WatchLag(wctx, 5*time.Second, q.Pending, stages...)
	// Stage results land in a local store: polling it often is cheap and
	// shortens push-to-queryable time.
	sdk := newSDKWorker(tc, q, store, data, c.netPolicy(), c.sourceLimit(), embeddedPoll, perTenant(c.tenantSnapshots, *keysFile != "", defaultTenantSnapshots), c.queueWindow, kit)
	if err := sdk.Start(); err != nil {
		stopWork()
		workers.wait()
		hs.shutdown(time.Second)
		return fmt.Errorf("up: start temporal worker: %w", err)
	}
	go recordLocations(wctx, srv, log)
	fmt.Fprintf(stdout, "codectx up: serving on %s (data %s, store %s)\n", hs.URL(), data, where)
	if note, warn := exposure(c.listen, keyStore != nil); note != "" {
		fmt.Fprintln(stdout, "codectx up: "+note)
		if warn {
			fmt.Fprintln(stderr, "codectx up: WARNING: "+note)
			log.Warn("the API listens beyond loopback without API keys", "listen", c.listen)
		}
	}
	log.Info("started", "listen", hs.URL(), "temporal", ts.HostPort(), "nats", ns.Addr(), "store", where)

	// Index what was asked for, printing progress; failures are printed
	// and do not stop the server.
	var indexing sync.WaitGroup
	ictx, stopIndexing := context.WithCancel(ctx)
	defer stopIndexing()
	cl := &api.Client{BaseURL: hs.URL(), Key: selfKey}
	for _, loc := range locations {
		indexing.Add(1)
		go func() {
			defer indexing.Done()
			indexOne(ictx, cl, *tenant, loc, stdout)
		}()
	}

	var runErr error
	select {
	case <-ctx.Done():
	case <-workers.fail:
		runErr = workers.wait()
	case err := <-hs.done:
		runErr = fmt.Errorf("http: %w", err)
		hs.done <- err // for shutdown below
	}

	// Shutdown: stop taking requests, stop the workers (they nak what they
	// hold), stop the Temporal worker, then the servers (deferred).
	log.Info("shutting down")
	d.stopping.Store(true)
	stopIndexing()
	indexing.Wait()
	if err := hs.shutdown(5 * time.Second); err != nil {
		log.Warn("http shutdown", "error", err)
	}
	stopWork()
	if err := workers.wait(); err != nil && runErr == nil && !errors.Is(err, context.Canceled) {
		runErr = err
	}
	sdk.Stop()
	return runErr
}

// absLocation makes a local path absolute, so that the server (which may
// run elsewhere in the file system) finds it; URLs, and absolute paths
// (the server's), pass unchanged. A relative path that does not exist
// here is an error: the server, which takes only absolute ones, said
// "want a clone URL or an absolute path" of a mistyped one.
func absLocation(loc string) (string, error) {
	l, err := location.Parse(loc)
	if err != nil || l.Kind != location.Local || l.Scheme != "" || l.IsAbs() {
		return loc, nil // the server's to judge
	}
	if _, err := os.Stat(loc); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("local path %s: %w", loc, err)
	}
	abs, err := filepath.Abs(loc)
	if err != nil {
		return "", fmt.Errorf("local path %s: %w", loc, err)
	}
	return abs, nil
}

// indexAndWait sends an index request and prints the outcome when the
// repository's workflow has covered it.
func indexAndWait(ctx context.Context, cl *api.Client, req api.IndexRequest, out io.Writer) error {
	_, err := indexAccepted(ctx, cl, req, out)
	return err
}

// indexAccepted is indexAndWait, also saying whether the server took
// the request (its snapshot runs whether or not the wait ends).
func indexAccepted(ctx context.Context, cl *api.Client, req api.IndexRequest, out io.Writer) (bool, error) {
	resp, err := cl.Index(ctx, req)
	if err != nil {
		return false, err
	}
	fmt.Fprintf(out, "indexing %s/%s from %s\n", termSafe(resp.Tenant, false), termSafe(resp.Repo, false), termSafe(req.Location, false))
	return true, waitPrinted(ctx, cl, resp.Tenant, resp.Repo, req.Commit, out)
}

// splitIndexArg reads an --index value: LOCATION, or NAME=LOCATION to
// name the repository (two directories of one name are one repository
// otherwise, and the second is refused). A value that is an existing
// path is a location, "=" and all.
func splitIndexArg(v string) (name, loc string) {
	if n, l, ok := strings.Cut(v, "="); ok && l != "" && index.ValidName(n) {
		if _, err := os.Stat(v); err != nil {
			return n, l
		}
	}
	return "", v
}

// indexOne indexes an --index value for up and prints how it ended:
// indexed, failed, or, when up stops first (ctx ends), not finished.
func indexOne(ctx context.Context, cl *api.Client, tenant, arg string, out io.Writer) {
	name, loc := splitIndexArg(arg)
	where, err := absLocation(loc)
	accepted := false
	if err == nil {
		accepted, err = indexAccepted(ctx, cl, api.IndexRequest{Tenant: tenant, Repo: name, Location: where}, out)
	}
	switch {
	case err == nil:
	case ctx.Err() != nil && accepted:
		// Ctrl-C: the snapshot is the orchestrator's, kept with the
		// data directory (said nothing, and looked lost).
		fmt.Fprintf(out, "index %s not finished: up is stopping; its snapshot goes on when up starts again with this data directory\n", termSafe(loc, false))
	case ctx.Err() != nil:
		fmt.Fprintf(out, "index %s not started: up is stopping\n", termSafe(loc, false))
	default:
		// The request went to this process's own API: its answer's
		// text, not the HTTP status of a "server".
		var e *api.Error
		if errors.As(err, &e) {
			err = errors.New(e.Message)
		}
		fmt.Fprintf(out, "index %s failed: %s\n", termSafe(loc, false), termSafe(err.Error(), false))
	}
}

// waitPrinted waits for tenant/repo's snapshot (of commit, "" for every
// push it received), printing its progress as it changes, then what the
// snapshot indexed.
func waitPrinted(ctx context.Context, cl *api.Client, tenant, repo, commit string, out io.Writer) error {
	last := ""
	st, err := cl.WaitIndexedFunc(ctx, tenant, repo, commit, func(st *api.RepoStatus) {
		line := ""
		switch {
		case st.State == api.StateQueued:
			line = "  queued: waiting for one of the tenant's snapshot slots (--tenant-snapshots)"
		case st.Progress != nil:
			line = formatProgress(st.Progress)
		}
		if line != "" && line != last {
			fmt.Fprintln(out, line)
			last = line
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, formatIndexed(st))
	return nil
}

// shortCommit is a commit as provenances write it (pack.ShortCommit).
func shortCommit(c string) string { return pack.ShortCommit(c) }

// formatProgress is the line `index --server` prints when the progress of
// the running snapshot changes.
func formatProgress(p *api.Progress) string {
	if p.Stage == api.StageSnapshot {
		return "  stage snapshot: opening and planning"
	}
	s := fmt.Sprintf("  stage %s: %d files, %d planned, %d parsed, %d reused", termSafe(p.Stage, false), p.Files, p.Planned, p.Parsed, p.Reused)
	if p.Failed > 0 {
		s += fmt.Sprintf(", %d failed", p.Failed)
	}
	if p.Quiet >= quietNote {
		s += fmt.Sprintf("; no %s result for %s: is a %s worker running?", termSafe(p.Stage, false), time.Duration(p.Quiet)*time.Second, termSafe(p.Stage, false))
	}
	return s
}

// quietNote is how long, in seconds, a stage may see no result before
// the progress line asks whether its workers run.
const quietNote = 120

func formatIndexed(st *api.RepoStatus) string {
	// What the server says is printed escaped (termSafe): the
	// repository names its paths, its parser's errors the reasons.
	line := func(s string) string { return termSafe(s, false) }
	commit := shortCommit(st.LastCommit)
	// The index's own count when the server says it (as `index` prints
	// it), the listing's beside it when files were left out.
	files := fmt.Sprintf("%d files", st.Files)
	if st.Indexed > 0 || len(st.Skipped) > 0 {
		files = fmt.Sprintf("%d files", st.Indexed)
		if st.Indexed != st.Files && !st.Already {
			files += fmt.Sprintf(" of %d listed", st.Files)
		}
	}
	var s string
	if st.Already {
		s = fmt.Sprintf("indexed %s@%s: %s (already indexed)", line(st.Repo), line(commit), files)
	} else {
		s = fmt.Sprintf("indexed %s@%s: %s (%d parsed, %d reused)", line(st.Repo), line(commit), files, st.Parsed, st.Reused)
		if st.Failed > 0 {
			s += fmt.Sprintf(", %d failed to parse", st.Failed)
		}
		if st.Embed != "" {
			s += "; embed " + line(st.Embed)
		}
	}
	if len(st.Skipped) > 0 {
		s += "\n  skipped " + line(index.FormatCounts(st.Skipped))
	}
	if len(st.Degraded) > 0 {
		s += "\n  degraded " + line(index.FormatCounts(st.Degraded))
	}
	for _, f := range st.LeftOut {
		s += fmt.Sprintf("\n  left out %s: %s", line(f.Path), line(f.Reason))
	}
	return s
}

// keysOnLine is what a restart with --keys says of its keys: where the
// admin key of the first start is, or, when that start found a key file
// made before it (by key create) and wrote none, that there is none.
func keysOnLine(keysFile, adminFile string) string {
	if _, err := os.Stat(adminFile); err != nil {
		return fmt.Sprintf("keys on (%s); no admin key was written to %s (the key file was made before the first start, by key create): use a key of that file", keysFile, adminFile)
	}
	return fmt.Sprintf("keys on (%s); the admin key of the first start was written to %s", keysFile, adminFile)
}

// keysRestart checks the key file of a restart with --keys, whose
// admin key the first start wrote to adminFile: a file left without keys
// (all revoked) is an error saying how to make one (the key file's own
// check said "leave the file unset", which --keys did not set), and an
// admin key no longer in it (revoked) is a note, as the line above sends
// the operator to adminFile for a key.
func keysRestart(keysFile, adminFile, data string) (string, error) {
	ks, err := keys.List(keysFile)
	if err != nil {
		return "", nil // the key file's own check says what is wrong
	}
	create := fmt.Sprintf("codectx key create --data %s --tenant '*' --scope admin", data)
	if len(ks) == 0 {
		return "", fmt.Errorf("--keys: %s holds no key (all were revoked), so every request would be refused: make one (%s), or start without --keys for an open API", keysFile, create)
	}
	admin, err := os.ReadFile(adminFile)
	if err != nil {
		return "", nil
	}
	hash := keys.Hash(strings.TrimSpace(string(admin)))
	if slices.ContainsFunc(ks, func(k keys.Key) bool { return k.Hash == hash }) {
		return "", nil
	}
	return fmt.Sprintf("the admin key in %s was revoked (it is not in %s): make another (%s)", adminFile, keysFile, create), nil
}
