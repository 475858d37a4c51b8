package api

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/keys"
	"codectx/pkg/location"
	"codectx/pkg/metrics"
	"codectx/pkg/netguard"
	"codectx/pkg/pipeline"
	"codectx/pkg/query"
	"codectx/pkg/ratelog"
	"codectx/pkg/session"
	"codectx/pkg/webhook"
)

// Routes selects which API routes a Server serves besides /healthz,
// /readyz and /metrics, which it always serves (0 = only those: workers).
type Routes int

const (
	QueryRoutes Routes = 1 << iota // POST /v1/query, GET status (published HEAD only without an Indexer)
	AdminRoutes                    // POST /v1/index, GET status
	AllRoutes   = QueryRoutes | AdminRoutes
)

// Check is one readiness probe: Fn returns nil when the dependency answers.
type Check struct {
	Name    string
	Fn      func(ctx context.Context) error
	Timeout time.Duration // deadline of this check alone; default 2s
	// Local says the check asks nothing outside the process (a state of
	// its own): it runs for every request, outside the shared round of
	// the dependency checks, so that it is seen at once.
	Local bool
	// Soft says the server answers without the dependency, worse: its
	// failure is shown ("degraded: ...") and leaves the server ready.
	Soft bool
}

// RepoVectors removes a repository's vectors (vector.Store does).
type RepoVectors interface {
	DeleteRepo(ctx context.Context, tenant, repo string) error
}

// Server holds what the handlers need. Set the fields, then call Handler
// once; the handler is safe for concurrent use.
type Server struct {
	Store   *blob.Bucket // required: published segments and HEADs
	Indexer Indexer      // nil: /v1/index answers 503 and status shows the HEAD only
	// LocalPaths says the paths an index request names are on this
	// machine (codectx up: the server and the workers are one process), so
	// a path that is not a directory here is refused at once (400) instead
	// of failing in the workflow. A gateway whose workers run elsewhere
	// leaves it false.
	LocalPaths bool
	Metrics    *metrics.Metrics  // nil: a fresh registry
	Routes     Routes            // API routes served; 0 = health, readiness and metrics only
	Checks     []Check           // readiness probes besides the store
	Notes      map[string]string // shown by /readyz, e.g. {"embed": "disabled: no embedder configured"}
	CacheSize  int64             // bytes the loaded segments may hold (heap and resident mapped pages); default DefaultCacheBytes
	// OnMapped, if set, is told the resident mapped bytes the segment cache
	// charges whenever they moved by 1 MiB or more (a process budget keeps
	// the Go memory limit at what the mapped pages leave of it).
	OnMapped func(bytes int64)
	// ShardCache, when set, is where the shards of a store that keeps no
	// local files (an object store) are downloaded to and mapped from;
	// without it they are read into the heap. A local store's shard files
	// are mapped where they are.
	ShardCache *index.ShardCache
	// Webhooks verifies push deliveries (POST /v1/webhooks/{host}/{tenant},
	// with AdminRoutes); a tenant without a secret takes none.
	Webhooks WebhookConfig
	// Keys, when set, require an API key (Authorization: Bearer) on the
	// query, index and status routes, each valid for one tenant.
	Keys Keys
	// Limits bound bodies, queries, concurrent deliveries and each
	// tenant's request rate (zero fields: the defaults).
	Limits Limits
	// PublicMetrics serves /metrics without a key when keys are on. By
	// default it then needs an operator's key (tenant "*"): its counters
	// add up every tenant's activity, which no tenant may watch.
	PublicMetrics bool
	// LoopbackOnly answers only requests whose Host is a loopback name
	// (421 otherwise): set it when listening on loopback, so that a web
	// page cannot reach the API by rebinding its own name to 127.0.0.1.
	LoopbackOnly bool
	// Hosts are the names (Host header, any port) an API without keys
	// answers to besides IP addresses and localhost when it does not
	// listen on loopback only; other names get 421, so that a web page
	// rebinding its own name to the server cannot use the open API.
	Hosts []string
	// Deliveries remembers webhook deliveries to refuse replays; nil = an
	// in-memory log of the last DefaultDeliveryWindow (lost on restart).
	Deliveries Deliveries
	// Net is where clone URLs may point (loopback, private and link-local
	// addresses are refused unless it allows them); nil = public hosts only.
	Net *netguard.Policy
	// KeyStore, when set, is consulted first: keys with scopes, re-read
	// while the server runs (keys.File).
	KeyStore KeyStore
	Log      *slog.Logger // default slog.Default()
	// Sessions keeps what each query session was sent; nil: in memory.
	Sessions session.Store
	// Dense is the query engine's dense arm; nil: no embedder, and a
	// request for the dense arm is refused.
	Dense query.Dense
	// Vectors is the vector store whose points DELETE of a repository
	// removes (every model's); nil: only the embedded store's objects in
	// Store are removed.
	Vectors RepoVectors
	// CloneDir is the clone cache of the snapshots this process takes
	// (codectx up): DELETE of a repository removes its clone there, which
	// holds its source. "": the workers' caches are elsewhere, and their
	// age bound removes the clone.
	CloneDir string
	// Notices, when set, carries a DELETE's word to the other servers
	// sharing the store, so that each forgets the HEAD it last read of the
	// repository (ForgetHead) and never answers from it while its store
	// is slow or down. Nil: only this server forgets.
	Notices HeadNotices
	// HeadsHeard, when set, reports whether this server hears the other
	// servers' DELETE notices now (ForgetHead). While it does not, a
	// repository deleted on another server could still be answered from
	// the last HEAD read, so that fallback is not used: a query whose
	// HEAD read fails gets 503. Nil: DELETEs are all made here.
	HeadsHeard func() bool

	once     sync.Once
	patterns []string // registered by Handler, for the OpenAPI agreement test
	segs     *segCache
	limits   Limits
	rate     *rateLimiter
	busy     *inflight
	webhooks *bodyBudget      // the memory delivery bodies are read into
	noSecret string           // random: the webhook secret of a tenant without one, which nothing verifies against
	heads    sync.Map         // tenant\x00repo -> index.Head last read, served while the store is down
	xrepo    xrepoCache       // per tenant: the cross-repository import graph
	fails    *ratelog.Limiter // failure log lines, rate-limited per cause
	// registering takes one tenant's new repositories one at a time.
	registering tenantLocks
	// repoBusy takes one repository's pushes (index, webhook, reindex)
	// and its DELETE one at a time (lockRepo).
	repoBusy   tenantLocks
	repoCounts sync.Map // tenant -> repoCount: at its bound, for refusals without a listing

	keyErrMu sync.Mutex
	keyErr   string // the key store's last reason for holding no key, logged once

	// ready is the last round of /readyz's dependency checks, which the
	// requests of the next readyFor share.
	ready    readyRound
	readyFor time.Duration // 0: defaultReadyFor; negative: every request checks

	openapiOnce sync.Once
	openapiDoc  []byte // the OpenAPI document, encoded once (Routes do not change)
	openapiErr  error

	mcpMu      sync.Mutex
	mcpServers map[Principal]*mcp.Server // /v1/mcp's server of each caller (mcpServerFor)
	sessLocks  sessionLocks              // a session's queries one at a time
}

// init fills in the defaults, once.
func (s *Server) init() {
	s.once.Do(func() {
		if s.Metrics == nil {
			s.Metrics = metrics.New()
		}
		if s.Log == nil {
			s.Log = slog.Default()
		}
		if s.Sessions == nil {
			s.Sessions = &session.Mem{}
		}
		s.segs = newSegCache(s.Store, s.CacheSize, s.ShardCache)
		s.segs.onMapped = s.OnMapped
		s.Metrics.SegmentCache(s.segs.cacheStats)
		s.fails = ratelog.New(s.Log, ratelog.DefaultInterval)
		s.limits = s.Limits.withDefaults()
		s.rate = newRateLimiter(s.limits.Rate, s.limits.Burst)
		if s.limits.TenantConcurrency == 0 && s.keysOn() {
			s.limits.TenantConcurrency = max(1, runtime.GOMAXPROCS(0)/2)
		}
		if s.limits.TenantConcurrency > 0 {
			s.busy = newInflight(s.limits.TenantConcurrency)
		}
		if s.limits.TenantRepos == 0 && s.keysOn() {
			s.limits.TenantRepos = DefaultTenantRepos
		}
		s.webhooks = newBodyBudget(s.limits.WebhookBytes)
		s.noSecret = rand.Text()
		if s.Deliveries == nil {
			s.Deliveries = NewMemDeliveries(DefaultDeliveryWindow, 0)
		}
	})
}

// Handler returns the HTTP handler of the server's routes.
func (s *Server) Handler() http.Handler {
	s.init()
	mux := http.NewServeMux()
	s.patterns = nil
	handle := func(pattern, route string, h http.HandlerFunc) {
		s.patterns = append(s.patterns, pattern)
		var hh http.Handler = h
		if s.busy != nil {
			hh = holdSlots(h) // a request's context carries its tenant slot
		}
		mux.Handle(pattern, s.Metrics.Middleware(route, hh))
	}
	handle("GET /healthz", "healthz", s.healthz)
	handle("GET /readyz", "readyz", s.readyz)
	s.patterns = append(s.patterns, "GET /metrics")
	mux.Handle("GET /metrics", s.metricsGuard(s.Metrics.Handler()))
	handle("GET /v1/openapi.json", "openapi", s.openapi)
	if s.Routes&QueryRoutes != 0 {
		handle("POST /v1/query", "query", s.query)
		handle("/v1/mcp", "mcp", s.mcpHandler().ServeHTTP)
		handle("POST /v1/impact", "impact", graphRoute(s, (*Server).toolImpact, func(in *ImpactInput) *string { return &in.Tenant }))
		handle("POST /v1/references", "references", graphRoute(s, (*Server).toolReferences, func(in *ReferencesInput) *string { return &in.Tenant }))
	}
	if s.Routes&AdminRoutes != 0 {
		handle("POST /v1/index", "index", s.index)
		handle("POST /v1/webhooks/{host}/{tenant}", "webhook", s.webhook)
		handle("POST /v1/repos/{tenant}/{rest...}", "reindex", s.repoAction)
		handle("DELETE /v1/repos/{tenant}/{rest...}", "delete", s.deleteRepo)
	}
	if s.Routes != 0 {
		handle("GET /v1/repos", "repos", s.listRepos)
		handle("GET /v1/repos/{tenant}/{rest...}", "status", s.status)
	}
	// known answers which methods a path has: a path served with other
	// methods gets 405 and Allow, not 404.
	known := http.NewServeMux()
	for _, p := range s.patterns {
		known.Handle(p, http.NotFoundHandler())
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			r2 := r.Clone(r.Context())
			r2.Method = m
			if _, pat := known.Handler(r2); pat != "" && m != r.Method && repoRouteAllows(r.URL.Path, m) {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: allowed %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		writeError(w, http.StatusNotFound, fmt.Errorf("no route %s %s", r.Method, r.URL.Path))
	})
	return s.guard(mux)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Readiness is the body of /readyz.
type Readiness struct {
	Ready  bool              `json:"ready"`
	Checks map[string]string `json:"checks"` // name -> "ok" or the error
	Notes  map[string]string `json:"notes,omitempty"`
}

// checkTimeout is the deadline of one readiness check without its own.
const checkTimeout = 2 * time.Second

// defaultReadyFor is how long a round of /readyz's dependency checks
// answers later requests. Anyone may ask /readyz, and each round asks the
// store, Temporal and NATS: 8 anonymous clients in a loop made about 740
// rounds a second, each fanned out onto those services.
const defaultReadyFor = time.Second

// readyRound is the last round of the dependency checks of /readyz: the
// requests that arrive while one runs wait for it, and those of the next
// readyFor take its answer.
type readyRound struct {
	mu   sync.Mutex // held while a round runs
	at   time.Time
	errs []error
}

// run answers the errors of checks, from the last round if it ended
// within d (0: defaultReadyFor; negative: never), else from a new one.
// ctx must not end with one caller's request: the round is everyone's.
func (rr *readyRound) run(ctx context.Context, checks []Check, d time.Duration) []error {
	if d == 0 {
		d = defaultReadyFor
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.errs != nil && time.Since(rr.at) < d {
		return slices.Clone(rr.errs)
	}
	rr.errs, rr.at = checkAll(ctx, checks), time.Now()
	return slices.Clone(rr.errs)
}

// checkAll runs checks concurrently, each under its own deadline, and
// returns their errors in order.
func checkAll(ctx context.Context, checks []Check) []error {
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() {
			d := c.Timeout
			if d <= 0 {
				d = checkTimeout
			}
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- c.Fn(ctx) }()
			select {
			case errs[i] = <-done:
			case <-ctx.Done():
				errs[i] = fmt.Errorf("no answer within %v", d)
			}
		})
	}
	wg.Wait()
	return errs
}

// readyz runs the checks concurrently, each under its own deadline, so a
// dependency that hangs fails only its own check.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	deps := []Check{{Name: "store", Fn: func(ctx context.Context) error {
		_, err := s.Store.Exists(ctx, "readyz/probe")
		return err
	}}}
	var local []Check
	for _, c := range s.Checks {
		if c.Local {
			local = append(local, c)
		} else {
			deps = append(deps, c)
		}
	}
	if _, ok := s.KeyStore.(keyErrer); ok {
		local = append(local, Check{Name: "api keys", Local: true, Fn: func(context.Context) error {
			if s.keyStoreErr() != nil {
				// The reason (it names the file) is in the log: /readyz
				// answers anyone.
				return errors.New("the key file cannot be read or does not parse: every key is refused (see the log)")
			}
			return nil
		}})
	}
	errs := append(s.ready.run(context.WithoutCancel(r.Context()), deps, s.readyFor), checkAll(r.Context(), local)...)
	checks := slices.Concat(deps, local)
	res := Readiness{Ready: true, Checks: map[string]string{}, Notes: s.Notes}
	// A dependency's error can name internal addresses or paths, and
	// /readyz answers anyone who reaches the port: with keys, only an
	// operator's key sees it; a probe needs the status alone.
	detail := !s.keysOn()
	if !detail {
		k, known, _ := s.keyOwner(r)
		detail = known && k.Tenant == AllTenants
	}
	for i, c := range checks {
		if errs[i] != nil {
			why := "failing (an operator's key sees why)"
			if detail {
				why = errs[i].Error()
			}
			if c.Soft {
				why = "degraded: " + why
			} else {
				res.Ready = false
			}
			res.Checks[c.Name] = why
			continue
		}
		res.Checks[c.Name] = "ok"
	}
	code := http.StatusOK
	if !res.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, res)
}

func (s *Server) query(w http.ResponseWriter, r *http.Request) {
	k, ok := s.admit(w, r)
	if !ok {
		return
	}
	var req QueryRequest
	if !readJSON(w, r, s.limits.QueryBody, &req) {
		return
	}
	req.Tenant = s.tenantOr(r, req.Tenant)
	repos := req.Repos
	if req.Repo != "" {
		repos = append([]string{req.Repo}, repos...)
	}
	if !index.ValidTenant(req.Tenant) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("invalid tenant %s", webhook.Quote(req.Tenant)))
		return
	}
	if len(repos) == 0 {
		writeError(w, http.StatusBadRequest, errors.New("no repo: name one in repo, several in repos, or \"*\" for all"))
		return
	}
	if err := validRepos(req.Tenant, repos); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	pay, ok := s.authorizePayer(w, r, k, req.Tenant, keys.Query)
	if !ok {
		return
	}
	if strings.TrimSpace(req.Query) == "" {
		writeError(w, http.StatusBadRequest, errors.New("empty query"))
		return
	}
	if len(req.Query) > s.limits.Query {
		writeError(w, http.StatusBadRequest, fmt.Errorf("query of %d bytes is longer than the %d-byte limit", len(req.Query), s.limits.Query))
		return
	}
	if req.Budget < 0 || req.Budget > 1_000_000 || (req.budgetSet && req.Budget == 0) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("budget %d out of range (1..1000000; leave it out for the default 8000)", req.Budget))
		return
	}
	if err := validArms(req.Arms); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if s.Dense == nil && slices.Contains(req.Arms, query.ArmDense) {
		writeError(w, http.StatusBadRequest, errors.New("the dense arm needs an embedder, and this server has none configured"))
		return
	}
	resp, err := s.search(r.Context(), Search{Tenant: req.Tenant, Repos: req.Repos, Repo: req.Repo, Query: req.Query, Budget: req.Budget, Arms: req.Arms, NoRoute: req.NoRoute, Languages: req.Languages, Session: req.Session, Payer: pay})
	if err != nil {
		code := searchCode(err)
		if code >= 500 && r.Context().Err() == nil {
			// One key per tenant and status: the repos list is the
			// caller's (up to 64 KiB, duplicates and "*" included), so a
			// key or a line of it let one tenant fill the limiter's 4096
			// keys with 64 KiB each and write a 64 KiB line per request.
			s.fails.Warn(r.Context(), "query\x00"+req.Tenant+"\x00"+strconv.Itoa(code), "query failed",
				"tenant", req.Tenant, "repos", reposSummary(repos), "code", code, "cause", err.Error())
		}
		writeError(w, code, err)
		return
	}
	writeResponse(w, resp)
}

// reposSummary names at most 8 of a request's repositories for a log line.
func reposSummary(repos []string) string {
	const most = 8
	if len(repos) <= most {
		return strings.Join(repos, ",")
	}
	return strings.Join(repos[:most], ",") + fmt.Sprintf(",... (%d in all)", len(repos))
}

// respBufs are the buffers answers are encoded into.
var respBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledResp bounds the buffers kept for reuse: an answer to a huge
// budget does not pin its buffer.
const maxPooledResp = 1 << 20

// writeResponse writes a query's answer as writeJSON does (the same bytes:
// query.Response.AppendJSON is encoding/json's encoding), into a reused
// buffer.
func writeResponse(w http.ResponseWriter, resp *query.Response) {
	bp := respBufs.Get().(*[]byte)
	b, err := resp.AppendJSON((*bp)[:0])
	if err != nil {
		respBufs.Put(bp)
		writeJSON(w, http.StatusOK, resp) // fails as it always did
		return
	}
	b = append(b, '\n') // as json.Encoder ends a value
	w.Header().Set("Content-Type", "application/json")
	// The whole answer is in hand: say its length, so an answer of more
	// than a few kilobytes is not sent chunked.
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	if cap(b) <= maxPooledResp {
		*bp = b
		respBufs.Put(bp)
	}
}

// searchCode is the HTTP status of a failed search.
func searchCode(err error) int {
	switch {
	case errors.Is(err, errNotIndexed):
		return http.StatusNotFound
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	var be badRequest
	if errors.As(err, &be) {
		return http.StatusBadRequest
	}
	return http.StatusServiceUnavailable
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	k, ok := s.admit(w, r)
	if !ok {
		return
	}
	if s.Indexer == nil {
		writeError(w, http.StatusServiceUnavailable, errors.New("no orchestrator configured"))
		return
	}
	var req IndexRequest
	if !readJSON(w, r, s.limits.IndexBody, &req) {
		return
	}
	req.Tenant = s.tenantOr(r, req.Tenant)
	if !index.ValidTenant(req.Tenant) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("invalid tenant %s", webhook.Quote(req.Tenant)))
		return
	}
	if !s.authorize(w, r, k, req.Tenant, keys.Index) {
		return
	}
	if req.Location == "" {
		writeError(w, http.StatusBadRequest, errors.New("no location"))
		return
	}
	if code, err := s.checkLocation(req.Location, req.Tenant, s.operator(r), s.operator(r)); err != nil {
		writeError(w, code, err)
		return
	}
	if err := validRev(req.Commit); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	named := req.Repo != ""
	if !named {
		req.Repo = pipeline.RepoName(req.Location)
	}
	if err := validRepo(req.Tenant, req.Repo); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	unlock := s.lockRepo(req.Tenant, req.Repo)
	defer unlock()
	if !named {
		// A name taken from the location (x/shop and y/shop are both
		// "shop") must not move a repository to another location: the
		// second one silently replaced the first one's index.
		old, err := s.storedLocation(r.Context(), req.Tenant, req.Repo)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, err)
			return
		}
		if old != "" && !location.Same(old, req.Location) {
			writeError(w, http.StatusConflict, fmt.Errorf("repository %s of tenant %s is indexed from another location; give this one its own name (\"repo\" in the request, codectx index --name, up --index NAME=PATH), or name %s to move it here", req.Repo, req.Tenant, req.Repo))
			return
		}
	}
	run, code, err := s.signal(r.Context(), req, s.operator(r))
	if err != nil {
		writeError(w, code, err)
		return
	}
	writeJSON(w, http.StatusAccepted, IndexResponse{Tenant: req.Tenant, Repo: req.Repo, Commit: req.Commit, RunID: run})
}

// repoRoute reads the tenant and repository of a
// /v1/repos/{tenant}/{repo}/ACTION route in the order every such route
// checks them: a known key (charged its rate, admit), the action (404),
// valid names (400), then the key's tenant and scope. It writes the error answer and returns false
// when the request may not proceed.
func (s *Server) repoRoute(w http.ResponseWriter, r *http.Request, action string, need keys.Scope) (tenant, repo string, ok bool) {
	k, ok := s.admit(w, r)
	if !ok {
		return "", "", false
	}
	tenant = r.PathValue("tenant")
	repo, ok = strings.CutSuffix(r.PathValue("rest"), "/"+action)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Errorf("no route %s %s", r.Method, r.URL.Path))
		return "", "", false
	}
	if err := validRepo(tenant, repo); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return "", "", false
	}
	if !s.authorize(w, r, k, tenant, need) {
		return "", "", false
	}
	return tenant, repo, true
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	tenant, repo, ok := s.repoRoute(w, r, "status", keys.Query)
	if !ok {
		return
	}
	ctx := r.Context()
	st := RepoStatus{Tenant: tenant, Repo: repo, State: StateUnknown}
	known := false
	if s.Indexer != nil {
		got, err := s.Indexer.Status(ctx, tenant, repo)
		switch {
		case err == nil:
			st, known = got, !got.Closed
			st.Tenant, st.Repo = tenant, repo
			if st.LastDetail != "" && s.operator(r) {
				st.LastError = st.LastDetail
			}
		case errors.Is(err, ErrUnknownRepo):
		default:
			writeError(w, http.StatusServiceUnavailable, fmt.Errorf("status of %s/%s: %w", tenant, repo, err))
			return
		}
	}
	hctx, cancel := context.WithTimeout(ctx, headReadTimeout)
	head, err := index.ReadHead(hctx, s.Store, tenant, repo)
	cancel()
	switch {
	case err == nil:
		st.Head, known = &head, true
	case errors.Is(err, blob.ErrNotFound):
	default:
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("store unavailable: %w", err))
		return
	}
	if !known && st.Closed {
		// The ended run of a deleted repository still answers with its
		// figures (Temporal keeps closed workflows): known only if the
		// repository is registered again, or published.
		reg, err := s.registered(ctx, tenant, repo)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, err)
			return
		}
		known = reg
	}
	if !known {
		writeError(w, http.StatusNotFound, fmt.Errorf("unknown repository %s/%s", tenant, repo))
		return
	}
	if st.Head != nil && st.State != StateIndexing && st.State != StateQueued {
		// Not while a snapshot runs: a client waiting on it polls
		// status, and the segment is the next one's only at the end.
		// Without it the status still answers (the listing's 503 is
		// for the listing).
		if seg, err := s.segs.get(ctx, st.Head.Segment); err == nil {
			st.Indexed, st.Skipped, st.Degraded = len(seg.Files), maps.Clone(seg.Meta.Skipped), maps.Clone(seg.Meta.Degraded)
			st.SkippedFiles = seg.Meta.SkippedFiles[:min(len(seg.Meta.SkippedFiles), maxStatusFiles)]
			st.DegradedFiles = seg.Meta.DegradedFiles[:min(len(seg.Meta.DegradedFiles), maxStatusFiles)]
		} else {
			s.Log.Warn("status: published segment unreadable", "tenant", tenant, "repo", repo, "error", err)
		}
	}
	writeJSON(w, http.StatusOK, st)
}

// maxStatusFiles bounds the skipped files, and the degraded ones, a status
// reply names.
const maxStatusFiles = 1000

func validRepo(tenant, repo string) error {
	if repo == "" {
		return errors.New("no repo")
	}
	if !index.ValidTenant(tenant) {
		return fmt.Errorf("invalid tenant %s (use letters, digits, . _ -)", webhook.Quote(tenant))
	}
	if len(repo) > maxName {
		// A webhook's full_name comes from its (signed) body: never
		// quote it whole.
		return fmt.Errorf("invalid repo: %d bytes, more than the %d-byte limit", len(repo), maxName)
	}
	if !index.ValidName(repo) {
		return fmt.Errorf("invalid repo %s (use letters, digits, . _ - and /; no empty, . or .. element)", webhook.Quote(repo))
	}
	return nil
}

// validRepos checks each name of a query's repositories ("*" stands for
// all of them and is not a name).
func validRepos(tenant string, repos []string) error {
	for _, name := range repos {
		if name == AllRepos {
			continue
		}
		if err := validRepo(tenant, name); err != nil {
			return err
		}
	}
	return nil
}

func validArms(arms []string) error {
	known := map[string]bool{}
	for _, a := range query.AllArms {
		known[a] = true
	}
	for _, a := range arms {
		if !known[a] {
			return fmt.Errorf("unknown arm %s (want some of %s)", webhook.Quote(a), strings.Join(query.AllArms, ","))
		}
	}
	return nil
}

// MaxRev bounds the characters of the revision of an index request (a
// hash, branch, tag or "HEAD~2"), which goes into the repository's workflow history with the
// push as its location does (MaxLocation): unchecked, a request's 16 KiB
// body could make it 16 KiB.
const MaxRev = 256

// validRev checks the revision of an index request: empty (HEAD), or at
// most MaxRev characters with no space or ASCII control character, as a
// git revision never has.
func validRev(rev string) error {
	if n := utf8.RuneCountInString(rev); n > MaxRev {
		return fmt.Errorf("commit of %d characters is longer than the %d-character limit", n, MaxRev)
	}
	if i := strings.IndexFunc(rev, func(r rune) bool { return r <= ' ' || r == 0x7f }); i >= 0 {
		return fmt.Errorf("commit %q: a revision has no space or control character", rev)
	}
	return nil
}

// MaxLocation bounds a location to index (a clone URL, a path on the
// server), in an index request or a webhook delivery's clone URL: a
// delivery may be 25 MiB (Limits.WebhookBody), and its clone URL went
// whole into the workflow's history with every push and into the
// repository's recorded location (repoloc.go), where a tenant left up to
// that much per repository it may hold, even for a push whose signal the
// orchestrator then refused. Real clone URLs and paths are far shorter
// (a Linux path is at most 4096 bytes).
const MaxLocation = 4 << 10

// checkLocation classifies a location to index (pkg/location, the
// classifier pkg/source opens it with) and says whether the caller may have
// it fetched: paths on the server only when local is true (an operator's
// request), clone URLs only to hosts the network policy allows (and, unless
// operator, on the tenants' allow-list). It answers
// the status code and an error that names neither files nor addresses.
func (s *Server) checkLocation(where, tenant string, operator, local bool) (int, error) {
	if len(where) > MaxLocation {
		return http.StatusBadRequest, fmt.Errorf("location: %d bytes, more than the %d-byte limit", len(where), MaxLocation)
	}
	loc, err := location.Parse(where)
	if err != nil {
		return http.StatusBadRequest, fmt.Errorf("location: %w", err)
	}
	if loc.Kind == location.Local {
		if !local {
			// A path on the server reaches every tenant's files there.
			return http.StatusForbidden, errors.New("location: a path on the server needs an operator key; tenants index clone URLs (https, git)")
		}
		if loc.Scheme == "" && !loc.IsAbs() {
			return http.StatusBadRequest, errors.New("location: want a clone URL or an absolute path on the server")
		}
		// Fail fast, before a workflow starts and retries: the caller
		// is an operator, who may learn which paths the server has.
		if st, err := os.Stat(loc.Path); s.LocalPaths && (err != nil || !st.IsDir()) {
			return http.StatusBadRequest, fmt.Errorf("location: %s is not a directory on the server", loc.Path)
		}
		return 0, nil
	}
	host, port := loc.HostPort()
	pol := s.Net.For(tenant) // hosts reserved for another tenant are refused, operator or not
	if !operator {
		trusted := pol.Trusted(host, port)
		if pol.Restricted() && !trusted {
			return http.StatusForbidden, fmt.Errorf("location: host %s is not on the server's allow-list", host)
		}
		if loc.Scheme == "http" && !trusted {
			return http.StatusForbidden, errors.New("location: plain http only for hosts on the server's allow-list; use https")
		}
		if loc.Scheme == "ssh" {
			// go-git signs every ssh clone with the server's own SSH
			// agent (SSH_AUTH_SOCK): a tenant's ssh URL would fetch, with
			// the operator's key, any repository that key reads, other
			// tenants' included (and the clone cache would hand it over
			// by the same URL). Only an operator may name one.
			return http.StatusForbidden, errors.New("location: ssh clones use the server's own credentials; tenants index https or git URLs (an operator may index an ssh URL for a tenant)")
		}
		if !trusted && !strings.Contains(host, ".") && !strings.Contains(host, ":") {
			// A public host has a dot; a bare name is a local one.
			return http.StatusForbidden, fmt.Errorf("location: host %s: %w", host, netguard.ErrRefused)
		}
	}
	// Names are resolved and checked where the fetch dials, not here.
	if err := pol.CheckName(host, port); err != nil {
		// The same answer for every refused or unresolvable host: it says
		// nothing about what listens there.
		return http.StatusForbidden, fmt.Errorf("location: host %s: %w", host, netguard.ErrRefused)
	}
	return 0, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.Encode(v)
}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, ErrorBody{Error: err.Error()})
}

// repoRouteAllows narrows the methods of the /v1/repos/{tenant}/... routes,
// which share one mux pattern, to the route the path names: .../status is
// GET, .../reindex POST, anything else DELETE.
func repoRouteAllows(path, method string) bool {
	if !strings.HasPrefix(path, "/v1/repos/") {
		return true
	}
	switch {
	case strings.HasSuffix(path, "/status"):
		return method == http.MethodGet
	case strings.HasSuffix(path, "/reindex"):
		return method == http.MethodPost
	}
	return method == http.MethodDelete
}
