package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/keys"
	"codectx/pkg/metrics"
	"codectx/pkg/netguard"
	"codectx/pkg/pipeline"
	"codectx/pkg/query"
	"codectx/pkg/queue"
	"codectx/pkg/queue/natsq"
	"codectx/pkg/session"
	"codectx/pkg/session/natskv"
	"codectx/pkg/vector/qdrant"
	"codectx/workflows"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// role describes one deployable role of the binary.
type role struct {
	name    string
	help    string // first line of -h
	use     int    // useTemporal | useNATS: needed, checked by /readyz
	soft    int    // connected too, but not needed to be ready (the query service's sessions)
	routes  api.Routes
	notes   map[string]string
	workers int // default of --workers (concurrent handlers); 0 = no such flag
	dense   int // denseNone, denseEmbedder (--embedder) or denseQdrant (and --qdrant)
	// embedNATS: the role connects to NATS only when an embedder is configured.
	embedNATS bool
	body      func(ctx context.Context, e *roleEnv) error
}

// What a role takes of the dense configuration.
const (
	denseNone = iota
	denseEmbedder
	denseQdrant
)

// roleEnv is what a running role has at hand.
type roleEnv struct {
	cfg     config
	log     *slog.Logger
	store   *blob.Bucket
	deps    *deps
	metrics *metrics.Metrics
	stdout  io.Writer
	workers int
	dense   *denseKit // nil for roles without --embedder
}

// lazyIndexer is the Indexer of a role whose Temporal client is still
// connecting: requests fail with 503 until it is there.
type lazyIndexer struct{ d *deps }

var errNotConnected = errors.New("temporal not connected yet")

// deliveryLogBytes bounds the webhook delivery log in NATS KV (up and the
// gateway); a variable for tests.
var deliveryLogBytes int64 = natsq.MaxDeliveryBytes

func (l lazyIndexer) Index(ctx context.Context, req api.IndexRequest) (string, error) {
	c := l.d.client()
	if c == nil {
		return "", errNotConnected
	}
	return temporalIndexer{c}.Index(ctx, req)
}

func (l lazyIndexer) Status(ctx context.Context, tenant, repo string) (api.RepoStatus, error) {
	c := l.d.client()
	if c == nil {
		return api.RepoStatus{}, errNotConnected
	}
	return temporalIndexer{c}.Status(ctx, tenant, repo)
}

func (l lazyIndexer) CloseRepo(ctx context.Context, tenant, repo string) (bool, error) {
	c := l.d.client()
	if c == nil {
		return false, errNotConnected
	}
	return temporalIndexer{c}.CloseRepo(ctx, tenant, repo)
}

// run parses the flags, opens the store, serves the HTTP endpoints,
// connects the dependencies and runs the body until ctx ends; then it shuts
// down in order: the body stops taking work (and finishes or naks what it
// holds), HTTP stops, connections close.
func (r role) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(r.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	flagUse := r.use | r.soft | useStore
	if r.embedNATS {
		flagUse |= useNATS
	}
	c.flags(fs, flagUse)
	var df denseFlags
	if r.dense != denseNone {
		df.register(fs, r.dense == denseQdrant)
	}
	var hooks webhookFlags
	var adminQdrant string
	if r.routes&api.AdminRoutes != 0 {
		hooks.register(fs)
		tenantReposFlag(fs, &c.tenantRepos, fmt.Sprint(api.DefaultTenantRepos))
		if r.dense != denseQdrant {
			fs.StringVar(&adminQdrant, "qdrant", env(qdrant.Env, ""), "Qdrant gRPC host:port holding the vectors, whose points DELETE /v1/repos/{tenant}/{repo} removes; empty = the embedded store's, in the blob store ($"+qdrant.Env+")")
		}
	}
	var keysFile string
	var limits limitFlags
	if r.routes != 0 {
		limits.register(fs)
		fs.StringVar(&keysFile, "api-keys", env(envAPIKeys, ""), "API key file (codectx key create --file FILE writes it; re-read when it changes); when set, every API route but health and webhooks needs a key, /metrics an operator's ($"+envAPIKeys+")")
	}
	cacheBytes := int64(api.DefaultCacheBytes)
	var memBytes int64
	var shardCache shardCacheFlags
	if r.routes&api.QueryRoutes != 0 {
		cacheFlag(fs, &cacheBytes)
		memoryFlag(fs, &memBytes)
		shardCache.register(fs)
	}
	if r.name == "graph-worker" {
		shardFlag(fs, &c.shardBytes)
		chunksFlag(fs, &c.maxChunks)
	}
	if r.name == "orchestrator" {
		tenantSnapshotsFlag(fs, &c.tenantSnapshots, fmt.Sprint(defaultTenantSnapshots))
		queueWindowFlag(fs, &c.queueWindow)
		tenantBatchesFlag(fs, &c.tenantBatches, fmt.Sprint(defaultTenantBatches))
	}
	var prof profileFlags
	prof.register(fs)
	workers := r.workers
	if r.workers > 0 {
		fs.IntVar(&workers, "workers", r.workers, "concurrent handlers")
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: codectx %s [flags]\n\n%s\nEvery flag can also be set by the environment variable named in its help.\n\n", r.name, r.help)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log := newLogger(stderr).With("role", r.name)
	stopProf, err := prof.start()
	if err != nil {
		return err
	}
	defer func() {
		if err := stopProf(); err != nil {
			log.Warn("profile", "error", err)
		}
	}()
	privateDataDir(log, c.data)
	d := &deps{log: log, namespace: c.namespace}
	keyStore, err := openKeys(keysFile)
	if err != nil {
		return err
	}
	var webhooks api.WebhookConfig
	if r.routes&api.AdminRoutes != 0 {
		if webhooks, err = hooks.config(); err != nil {
			return err
		}
	}
	// A TLS file that cannot be used stops the role now, not at the
	// first of many retried dials.
	temporalTLS, err := c.temporalTLS.Client()
	if err != nil {
		return fmt.Errorf("temporal: %w", err)
	}
	natsTLS, err := c.natsTLS.Client()
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	// Serve /healthz (and a /readyz that says what is missing) before the
	// store answers: a liveness probe must not kill a pod whose store is
	// unreachable at start.
	var handler swapHandler
	handler.set(startingHandler("blob store"))
	hl := limits.http()
	hl.log = log
	hs, err := startHTTP(c.listen, &handler, hl)
	if err != nil {
		return err
	}
	var where string
	store, err := retry(ctx, log, "blob store", func(ctx context.Context) (st *blob.Bucket, err error) {
		st, where, err = c.store(ctx)
		return st, err
	})
	if err != nil {
		hs.shutdown(time.Second)
		return ignoreCancel(ctx, err)
	}
	var kit *denseKit
	if r.dense != denseNone {
		handler.set(startingHandler("embedder"))
		if kit, err = retry(ctx, log, "embedder", func(ctx context.Context) (*denseKit, error) { return df.open(ctx, store) }); err != nil {
			hs.shutdown(time.Second)
			return ignoreCancel(ctx, err)
		}
		defer kit.close()
	}
	use := r.use
	if r.embedNATS && kit.emb != nil {
		use |= useNATS
	}
	notes := maps.Clone(r.notes)
	if r.dense != denseNone {
		if notes == nil {
			notes = map[string]string{}
		}
		notes["embed"] = kit.note()
	}
	var onMapped func(int64)
	if r.routes&api.QueryRoutes != 0 {
		cacheBytes, onMapped = budget(log, memBytes, cacheBytes)
	}
	m := metrics.New()
	srv := &api.Server{Store: store, Metrics: m, Routes: r.routes, Checks: d.checks(use, r.soft), Notes: notes, Log: log, Dense: kit.arm(), CacheSize: cacheBytes, OnMapped: onMapped, Net: c.netPolicy()}
	if srv.ShardCache, err = shardCache.open(); err != nil {
		hs.shutdown(time.Second)
		return err
	}
	if keyStore != nil {
		srv.KeyStore = keyStore
	}
	var heard atomic.Bool // this server hears DELETE notices (OnHeadGone below)
	if r.routes&api.QueryRoutes != 0 && (use|r.soft)&useNATS != 0 {
		srv.Sessions = &lazySessions{d: d}
		srv.HeadsHeard = func() bool {
			q := d.queue.Load()
			return heard.Load() && q != nil && q.Connected()
		}
	}
	if r.routes&api.AdminRoutes != 0 {
		srv.Indexer = lazyIndexer{d}
		if (r.use|r.soft)&useNATS != 0 {
			srv.Deliveries = &lazyDeliveries{d: d, mem: api.NewMemDeliveries(api.DefaultDeliveryWindow, 0)}
		}
		srv.Webhooks = webhooks
		if (r.use|r.soft)&useNATS != 0 {
			srv.Notices = lazyNotices{d}
		}
		if adminQdrant != "" {
			qs, err := qdrant.Open(adminQdrant)
			if err != nil {
				hs.shutdown(time.Second)
				return err
			}
			defer qs.Close()
			srv.Vectors = qs
		}
	}
	limits.apply(srv, c.listen)
	srv.Limits.TenantRepos = tenantRepos(c.tenantRepos, true)
	handler.set(srv.Handler())
	log.Info("started", "listen", hs.URL(), "store", where)
	defer func() {
		if err := hs.shutdown(5 * time.Second); err != nil {
			log.Warn("http shutdown", "error", err)
		}
		if q := d.queue.Load(); q != nil {
			q.Close()
		}
		if c := d.client(); c != nil {
			c.Close()
		}
		log.Info("stopped")
	}()
	go func() {
		<-ctx.Done()
		d.stopping.Store(true)
		log.Info("shutting down")
	}()

	if use&useTemporal != 0 {
		tc, err := dialTemporal(ctx, log, c.temporal, c.namespace, temporalTLS)
		if err != nil {
			return ignoreCancel(ctx, err)
		}
		if c.createNS {
			if err := ensureNamespace(ctx, log, tc, c.namespace, c.retention); err != nil {
				tc.Close()
				return ignoreCancel(ctx, err)
			}
		}
		d.temporal.Store(tc)
		if srv.Indexer != nil {
			go recordLocations(ctx, srv, log)
		}
	}
	if (use|r.soft)&useNATS != 0 {
		q, err := connectNATS(ctx, log, c.nats, natsTLS)
		if err != nil {
			return ignoreCancel(ctx, err)
		}
		d.queue.Store(q)
		if r.routes&api.QueryRoutes != 0 {
			// A DELETE on a gateway: forget the HEAD this server last
			// read, so that a slow or failing store does not answer the
			// deleted repository from it. What was read before listening,
			// or while NATS was away, is forgotten too (notices may have
			// gone unheard), and while they are not heard no last HEAD
			// answers (HeadsHeard).
			stop, err := q.OnHeadGone(srv.ForgetHead, srv.ForgetHeads)
			if err != nil {
				log.Warn("DELETE notices not heard: no query is answered from the last HEAD read while the store is down", "error", err)
			} else {
				heard.Store(true)
				defer stop()
			}
		}
		m.QueueStats(q.Stats)
		go m.WatchLag(ctx, 5*time.Second, q.Pending, pipeline.StageParse, pipeline.StageEmbed, pipeline.StageGraph)
	}
	e := &roleEnv{cfg: c, log: log, store: store, deps: d, metrics: m, stdout: stdout, workers: workers, dense: kit}
	return ignoreCancel(ctx, r.body(ctx, e))
}

// privateDataDir makes the data directory (clones, the local store, the
// shard cache) private to the service user, as up does. Where it cannot
// (a volume the pod does not own) the role runs on and says so.
func privateDataDir(log *slog.Logger, dir string) {
	if err := privateDir(dir); err != nil {
		log.Warn("data directory left as it is: other local users may read it", "dir", dir, "error", err)
	}
}

// privateDir makes dir, or tightens it, to mode 0700. It refuses a
// directory another local user owns, or a symbolic link: one made first
// in a shared working directory would give that user the files put in it.
func privateDir(dir string) error { return keys.PrivateDir(dir) }

// ignoreCancel drops the error of a body that ended because ctx did.
func ignoreCancel(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func waitDone(ctx context.Context, _ *roleEnv) error {
	<-ctx.Done()
	return nil
}

func orchestratorRole() role {
	return role{
		name:  "orchestrator",
		help:  "Runs the Temporal worker of the indexing workflows (RepoWorkflow, SnapshotWorkflow,\nOrgWorkflow, TenantLeaseWorkflow) and their activities on task queue " + workflows.TaskQueue + ".",
		use:   useTemporal | useNATS,
		dense: denseQdrant,
		body: func(ctx context.Context, e *roleEnv) error {
			e.cfg.keepClones(ctx, e.log)
			shareQueue(e.deps.queue.Load(), perTenant(e.cfg.tenantBatches, true, defaultTenantBatches))
			w := newSDKWorker(e.deps.client(), e.deps.queue.Load(), e.store, e.cfg.data, e.cfg.netPolicy(), e.cfg.sourceLimit(), 0, perTenant(e.cfg.tenantSnapshots, true, defaultTenantSnapshots), e.cfg.queueWindow, e.dense)
			if err := w.Start(); err != nil {
				return fmt.Errorf("start temporal worker: %w", err)
			}
			<-ctx.Done()
			w.Stop() // finishes running activities up to WorkerStopTimeout
			return nil
		},
	}
}

// infraRetry, when set by a test, replaces the activities' delays before
// re-publishing a job that failed for an infrastructure error. Nil in the
// program (the workflows default).
var infraRetry []time.Duration

// queueBackoff, when set by a test, replaces the parse and graph workers'
// retry delays. Nil in the program (pipeline.DefaultBackoff).
var queueBackoff []time.Duration

// newSDKWorker is the orchestrator's Temporal worker. poll is how often the
// waiting activities look for stage results (0: the workflows default);
// tenantSnaps bounds a tenant's snapshots in progress (0 or less: no bound);
// window bounds a snapshot's batches in a queue (0: the default).
func newSDKWorker(c client.Client, q *natsq.Queue, store *blob.Bucket, data string, net *netguard.Policy, sourceBytes int64, poll time.Duration, tenantSnaps, window int, kit *denseKit) worker.Worker {
	w := worker.New(c, workflows.TaskQueue, worker.Options{
		WorkerStopTimeout: 10 * time.Second,
		// Heartbeats carry the parse progress that status reports: send
		// them at least every 2 s (the default is 80% of the heartbeat
		// timeout, 16 s for WaitParse).
		MaxHeartbeatThrottleInterval: 2 * time.Second,
	})
	a := &workflows.Activities{Store: store, Queue: q, CacheDir: filepath.Join(data, "clones"), Net: net, SourceMaxBytes: sourceBytes, PollInterval: poll, InfraRetry: infraRetry, TenantSnapshots: tenantSnaps, Window: window}
	if kit != nil && kit.emb != nil {
		a.Embedder, a.Vectors = kit.emb, kit.store
	}
	workflows.Register(w, a)
	return w
}

func parseWorkerRole() role {
	return role{
		name:    "parse-worker",
		help:    "Consumes the parse stage: chunks the files of each batch and caches the results in the blob store.",
		use:     useNATS,
		workers: runtime.GOMAXPROCS(0),
		body: func(ctx context.Context, e *roleEnv) error {
			e.cfg.keepClones(ctx, e.log)
			w := &pipeline.Workers{Store: e.store, Queue: e.deps.queue.Load(), CacheDir: filepath.Join(e.cfg.data, "clones"), Net: e.cfg.netPolicy(), Wrap: e.metrics.Wrap, Log: e.log}
			return w.RunParse(ctx, queue.Config{Workers: e.workers, Backoff: queueBackoff})
		},
	}
}

func graphWorkerRole() role {
	return role{
		name:    "graph-worker",
		help:    "Consumes the graph stage: assembles each snapshot's segment from its manifest and the cached parse results.",
		use:     useNATS,
		workers: 1,
		body: func(ctx context.Context, e *roleEnv) error {
			w := &pipeline.Workers{Store: e.store, Queue: e.deps.queue.Load(), CacheDir: filepath.Join(e.cfg.data, "clones"), Wrap: e.metrics.Wrap, Log: e.log, ShardBytes: e.cfg.shardBytes, MaxChunks: noBound(e.cfg.maxChunks)}
			return w.RunGraph(ctx, queue.Config{Workers: e.workers, Backoff: queueBackoff})
		},
	}
}

const embedDisabled = "disabled: no embedder configured"

func embedWorkerRole() role {
	return role{
		name:      "embed-worker",
		help:      "Consumes the embed stage: embeds the chunks of each batch with --embedder and caches the\nvectors in the blob store by (model, content hash); the orchestrator writes them to the\nvector store. Without an embedder it consumes nothing and /readyz says the stage is disabled\n(give the orchestrator and the query service the same --embedder).",
		dense:     denseEmbedder,
		embedNATS: true,
		workers:   1,
		body: func(ctx context.Context, e *roleEnv) error {
			if e.dense.emb == nil {
				e.log.Warn("embed stage " + embedDisabled + ": consuming nothing")
				return waitDone(ctx, e)
			}
			w := &pipeline.Workers{Store: e.store, Queue: e.deps.queue.Load(), Embedder: e.dense.emb, Wrap: e.metrics.Wrap}
			return w.RunEmbed(ctx, queue.Config{Workers: e.workers})
		},
	}
}

func queryServiceRole() role {
	return role{
		name:   "query-service",
		help:   "Serves POST /v1/query and MCP (Streamable HTTP at /v1/mcp) over the published index in the\nblob store (stateless; segments are cached in memory, query sessions kept in NATS KV so\nreplicas share them) and GET /v1/repos/{tenant}/{repo}/status (published HEAD).",
		soft:   useNATS,
		dense:  denseQdrant,
		routes: api.QueryRoutes,
		body:   waitDone,
	}
}

func gatewayRole() role {
	return role{
		name:   "gateway",
		help:   "Serves the admin API: POST /v1/index signals the repository's RepoWorkflow,\nPOST /v1/webhooks/{github|gitlab|gitea}/{tenant} does the same for a verified push,\nGET /v1/repos/{tenant}/{repo}/status reports it.",
		use:    useTemporal,
		soft:   useNATS, // the webhook delivery log, shared by replicas
		routes: api.AdminRoutes,
		body:   waitDone,
	}
}

// lazyDeliveries is the webhook delivery log of a gateway: NATS KV, shared
// by every replica and kept across restarts, once NATS is connected; an
// in-memory log of this replica until then.
type lazyDeliveries struct {
	d   *deps
	mem *api.MemDeliveries
	mu  sync.Mutex
	kv  *natsq.Deliveries
}

func (l *lazyDeliveries) log(ctx context.Context) api.Deliveries {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kv == nil {
		q := l.d.queue.Load()
		if q == nil {
			return l.mem
		}
		kv, err := q.DeliveriesBounded(ctx, api.DefaultDeliveryWindow, deliveryLogBytes)
		if err != nil {
			l.d.log.Warn("webhook delivery log in memory until NATS answers", "error", err)
			return l.mem
		}
		l.kv = kv
	}
	return l.kv
}

func (l *lazyDeliveries) Remember(ctx context.Context, key string) (bool, error) {
	lg := l.log(ctx)
	fresh, err := lg.Remember(ctx, key)
	if err == nil && fresh && lg != api.Deliveries(l.mem) {
		// Keep the local log too: a delivery taken while NATS was down is
		// still refused by this replica after NATS comes back.
		fresh, err = l.mem.Remember(ctx, key)
	}
	return fresh, err
}

func (l *lazyDeliveries) Forget(ctx context.Context, key string) error {
	l.mem.Forget(ctx, key)
	if lg := l.log(ctx); lg != api.Deliveries(l.mem) {
		return lg.Forget(ctx, key)
	}
	return nil
}

// lazyNotices sends DELETE notices over NATS once it is connected.
type lazyNotices struct{ d *deps }

func (l lazyNotices) HeadGone(ctx context.Context, tenant, repo string) error {
	q := l.d.queue.Load()
	if q == nil {
		return errors.New("NATS not connected yet")
	}
	return q.HeadGone(ctx, tenant, repo)
}

// lazySessions is the session store of a role whose NATS connection may
// still be coming up: session queries fail until it is there, then the
// key-value bucket is opened once.
type lazySessions struct {
	d  *deps
	mu sync.Mutex
	st *natskv.Store
}

func (l *lazySessions) store(ctx context.Context) (*natskv.Store, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st != nil {
		return l.st, nil
	}
	q := l.d.queue.Load()
	if q == nil {
		return nil, errors.New("sessions: NATS not connected yet")
	}
	st, err := natskv.Open(ctx, q.JetStream(), session.DefaultTTL)
	if err != nil {
		return nil, err
	}
	l.st = st
	return st, nil
}

func (l *lazySessions) Load(ctx context.Context, key string) (*session.Session, error) {
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	return st.Load(ctx, key)
}

func (l *lazySessions) Save(ctx context.Context, key string, s *session.Session) error {
	st, err := l.store(ctx)
	if err != nil {
		return err
	}
	return st.Save(ctx, key, s)
}

func (l *lazySessions) Append(ctx context.Context, key string, sent []query.Sent) (*session.Session, error) {
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	return st.Append(ctx, key, sent)
}

// swapHandler serves through the handler set last.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// startingHandler answers while a role waits for what: /healthz is 200
// (the process is alive), every other route 503 naming what it waits for.
func startingHandler(what string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/healthz" {
			w.WriteHeader(http.StatusOK)
			json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		if r.URL.Path == "/readyz" {
			json.NewEncoder(w).Encode(api.Readiness{Checks: map[string]string{"store": "connecting: " + what + " not reachable yet"}})
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"error": "starting: " + what + " not reachable yet"})
	})
}
