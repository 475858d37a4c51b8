package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/blob/minio"
	"codectx/pkg/index"
	"codectx/pkg/netguard"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue/natsq"
	"codectx/pkg/tlsfile"
	"codectx/workflows"
)

// Environment variables read by the role subcommands. A flag given on the
// command line wins over its variable.
const (
	envData            = "CODECTX_DATA"
	envListen          = "CODECTX_LISTEN"
	envTemporal        = "CODECTX_TEMPORAL"
	envNamespace       = "CODECTX_TEMPORAL_NAMESPACE"
	envCreateNS        = "CODECTX_TEMPORAL_CREATE_NAMESPACE"
	envRetention       = "CODECTX_TEMPORAL_NAMESPACE_RETENTION"
	envNATS            = "CODECTX_NATS"
	envS3              = "CODECTX_S3_ENDPOINT"
	envS3Access        = "CODECTX_S3_ACCESS_KEY"
	envS3Secret        = "CODECTX_S3_SECRET_KEY"
	envS3Bucket        = "CODECTX_S3_BUCKET"
	envS3Secure        = "CODECTX_S3_SECURE"
	envServer          = "CODECTX_SERVER"
	envCache           = "CODECTX_CACHE_BYTES"
	envMemory          = "CODECTX_MEMORY_BYTES"
	envShardBytes      = "CODECTX_SHARD_BYTES"
	envShardCache      = "CODECTX_SHARD_CACHE"
	envShardCacheBytes = "CODECTX_SHARD_CACHE_BYTES"
	// The network policy of clones (pkg/netguard).
	envAllowHosts   = "CODECTX_ALLOW_HOSTS"
	envTenantHosts  = "CODECTX_TENANT_HOSTS"
	envAllowPrivate = "CODECTX_ALLOW_PRIVATE_NETWORKS"
	envKeys         = "CODECTX_KEYS"
	// The bounds of the clone cache (DATA/clones).
	envCloneMaxBytes = "CODECTX_CLONE_CACHE_MAX_BYTES"
	envCloneBytes    = "CODECTX_CLONE_MAX_BYTES"
	envCloneMaxAge   = "CODECTX_CLONE_CACHE_MAX_AGE"
	// The bound of what one snapshot may parse.
	envSourceBytes = "CODECTX_SOURCE_MAX_BYTES"
	// The bound of the chunks one snapshot's index build holds.
	envMaxChunks = "CODECTX_MAX_CHUNKS"
)

// The PEM files of the TLS of the connections to Temporal and NATS.
const (
	envTemporalCA    = "CODECTX_TEMPORAL_TLS_CA"
	envTemporalCert  = "CODECTX_TEMPORAL_TLS_CERT"
	envTemporalKey   = "CODECTX_TEMPORAL_TLS_KEY"
	envTemporalName  = "CODECTX_TEMPORAL_TLS_SERVER_NAME"
	envNATSCA        = "CODECTX_NATS_TLS_CA"
	envNATSCert      = "CODECTX_NATS_TLS_CERT"
	envNATSKey       = "CODECTX_NATS_TLS_KEY"
	envNATSName      = "CODECTX_NATS_TLS_SERVER_NAME"
	envTenantSnaps   = "CODECTX_TENANT_SNAPSHOTS"
	envQueueWindow   = "CODECTX_QUEUE_WINDOW"
	envTenantBatches = "CODECTX_TENANT_BATCHES"
	envTenantRepos   = "CODECTX_TENANT_REPOS"
)

// cloneGCEvery is how often the clone cache is checked against its bounds.
const cloneGCEvery = 10 * time.Minute

const defaultListen = "127.0.0.1:7700"

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envBool(key string, def bool) bool {
	if v, err := strconv.ParseBool(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

// envNamed matches the "($CODECTX_...)" that ends a flag's help: the
// variable its default is read from.
var envNamed = regexp.MustCompile(`\(\$(CODECTX_[A-Z0-9_]+)\)$`)

// checkEnv fails on a number, duration or boolean flag of fs that the
// command line did not give and whose variable holds what the flag would
// refuse: envInt and its kin read such a value as unset, so a typo in a
// limit (CODECTX_TENANT_REPOS=10k) left the default in force without a
// word. The flag's own parser checks it, as on the command line.
func checkEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		m := envNamed.FindStringSubmatch(f.Usage)
		g, ok := f.Value.(flag.Getter)
		if given[f.Name] || m == nil || !ok {
			return
		}
		switch g.Get().(type) {
		case int, int64, uint, uint64, float64, bool, time.Duration:
		default:
			return // strings, sizes (applyBytesEnv) and lists
		}
		v := os.Getenv(m[1])
		if v == "" {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: $%s=%q: %w (the flag -%s takes the same values)", fs.Name(), m[1], v, err, f.Name))
		}
	})
	return errors.Join(errs...)
}

// config is what the role subcommands share.
type config struct {
	shardBytes int64 // source bytes per index shard (graph stage)
	maxChunks  int   // chunks of one snapshot the graph stage builds (0: no bound)
	data       string
	listen     string
	temporal   string
	namespace  string
	// createNS registers the namespace at start when it does not exist,
	// keeping closed workflows for retention.
	createNS  bool
	retention time.Duration
	nats      string
	// temporalTLS and natsTLS are the client TLS of those connections.
	temporalTLS, natsTLS tlsfile.Files
	s3                   minio.Config
	// allowHosts and allowPrivate make the network policy of clones.
	allowHosts   string
	tenantHosts  string // TENANT=HOST,...;TENANT=HOST,... (netguard.Policy.Reserved)
	allowPrivate bool
	cloneBytes   int64
	clones       pipeline.CloneLimits
	// sourceBytes bounds the source bytes of one snapshot (0: no bound).
	sourceBytes int64
	// tenantBatches bounds one tenant's batches in the parse and embed
	// queues (--tenant-batches; 0: the default, see tenantSnapshots).
	tenantBatches int
	// tenantSnapshots bounds one tenant's snapshots in progress (the
	// orchestrator's workflows); 0 or less: no bound.
	tenantSnapshots int
	// queueWindow bounds one snapshot's batches in the parse and embed
	// queues at once (workflows.Activities.Window).
	queueWindow int
	// tenantRepos bounds the distinct repositories one tenant holds (the
	// roles taking index requests and webhooks); 0: the default.
	tenantRepos int
}

// defaultCloneBytes is the default bound of one remote clone or fetch.
const defaultCloneBytes = 4 << 30

// netFlags registers the network policy of the roles that clone or accept
// clone URLs.
func (c *config) netFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.allowHosts, "allow-hosts", env(envAllowHosts, ""),
		"comma-separated hosts tenants may index from (\"github.com\", \".example.com\" for subdomains, \"host:port\"); they may resolve to private addresses; empty = any public host ($"+envAllowHosts+")")
	fs.StringVar(&c.tenantHosts, "tenant-hosts", env(envTenantHosts, ""),
		"hosts only one tenant's repositories may come from, \"acme=git.acme.internal,.acme.corp;beta=git.beta.internal\" (the syntax of --allow-hosts): trusted like --allow-hosts for that tenant, refused for every other, on any port and whatever they resolve to. For a git server that lets the server in by its network address ($"+envTenantHosts+")")
	fs.BoolVar(&c.allowPrivate, "allow-private-networks", envBool(envAllowPrivate, false),
		"let clones connect to loopback, private and link-local addresses (refused by default) ($"+envAllowPrivate+")")
	bytesVar(fs, &c.cloneBytes, "clone-max-bytes", envCloneBytes, defaultCloneBytes,
		"bound of what one clone or fetch of a remote repository may write to DATA/clones, in `bytes` (a unit may follow: 4GiB): a tenant names what is cloned, and a larger repository fails its snapshot (\"larger than the server's clone limit\") instead of filling the disk; local repositories are not bounded; 0 = no bound ($"+envCloneBytes+")")
	bytesVar(fs, &c.sourceBytes, "source-max-bytes", envSourceBytes, index.DefaultMaxSourceBytes,
		"bound of the source one snapshot may parse, in `bytes` (a unit may follow: 1GiB): the sizes of its files under the file size cap, a blob named under several paths counted once per path (a tenant's tree may name one blob thousands of times); a larger snapshot fails before it is parsed (\"larger in all than the server's source limit\"); 0 = no bound ($"+envSourceBytes+")")
	bytesVar(fs, &c.clones.MaxBytes, "clone-cache-max-bytes", envCloneMaxBytes, pipeline.DefaultCloneMaxBytes,
		"bound of the clone cache in DATA/clones, in `bytes` (a unit may follow: 20GiB): least recently used clones not in use are removed above it; 0 = no bound ($"+envCloneMaxBytes+")")
	fs.DurationVar(&c.clones.MaxAge, "clone-cache-max-age", envDuration(envCloneMaxAge, pipeline.DefaultCloneMaxAge),
		"clones unused for longer are removed from DATA/clones; 0 = no bound ($"+envCloneMaxAge+")")
}

// keepClones bounds the clone cache of the data directory until ctx ends.
func (c *config) keepClones(ctx context.Context, log *slog.Logger) {
	go pipeline.KeepClones(ctx, filepath.Join(c.data, "clones"), c.clones, cloneGCEvery, log)
}

// sourceLimit is workflows.Activities.SourceMaxBytes of --source-max-bytes.
func (c *config) sourceLimit() int64 { return noBound(c.sourceBytes) }

// noBound turns a flag's bound, where 0 is none, into an option's, where
// 0 is the default and none is negative.
func noBound[T int | int64](v T) T {
	if v <= 0 {
		return -1
	}
	return v
}

// netPolicy is the network policy of clones the flags describe.
func (c *config) netPolicy() *netguard.Policy {
	reserved, _ := parseTenantHosts(c.tenantHosts) // checked by parseFlags
	return &netguard.Policy{AllowPrivate: c.allowPrivate, FetchBytes: c.cloneBytes, Hosts: splitList(c.allowHosts), Reserved: reserved}
}

// parseTenantHosts reads --tenant-hosts: TENANT=HOST,HOST;TENANT=HOST. A
// host may be reserved for one tenant only.
func parseTenantHosts(s string) (map[string][]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string][]string{}
	owner := map[string]string{}
	for _, part := range strings.Split(s, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		tenant, hosts, ok := strings.Cut(part, "=")
		tenant = strings.TrimSpace(tenant)
		if !ok || !index.ValidTenant(tenant) || len(splitList(hosts)) == 0 {
			return nil, fmt.Errorf("--tenant-hosts: %q: want TENANT=HOST,HOST (a valid tenant name and at least one host)", part)
		}
		for _, h := range splitList(hosts) {
			key := strings.ToLower(h)
			if prev, ok := owner[key]; ok && prev != tenant {
				return nil, fmt.Errorf("--tenant-hosts: host %s is reserved for both %s and %s", h, prev, tenant)
			}
			owner[key] = tenant
			out[tenant] = append(out[tenant], h)
		}
	}
	return out, nil
}

// Which dependencies a role connects to (selects the flags it takes).
const (
	useTemporal = 1 << iota
	useNATS
	useStore
)

func (c *config) flags(fs *flag.FlagSet, use int) {
	fs.StringVar(&c.data, "data", dataDir(), "data directory: local blob store, clone cache ($"+envData+")")
	fs.StringVar(&c.listen, "listen", env(envListen, defaultListen), "address of the HTTP endpoints: /healthz, /readyz, /metrics, API ($"+envListen+")")
	if use&useTemporal != 0 {
		fs.StringVar(&c.temporal, "temporal", env(envTemporal, "127.0.0.1:7233"), "Temporal frontend host:port ($"+envTemporal+")")
		fs.StringVar(&c.namespace, "namespace", env(envNamespace, "default"), "Temporal namespace ($"+envNamespace+")")
		fs.BoolVar(&c.createNS, "create-namespace", envBool(envCreateNS, false), "register the Temporal namespace at start if it does not exist ($"+envCreateNS+")")
		fs.DurationVar(&c.retention, "namespace-retention", envDuration(envRetention, 72*time.Hour), "how long a namespace registered by --create-namespace keeps closed workflows ($"+envRetention+")")
		tlsFlags(fs, &c.temporalTLS, "temporal", "Temporal", envTemporalCA, envTemporalCert, envTemporalKey)
		fs.StringVar(&c.temporalTLS.ServerName, "temporal-tls-server-name", env(envTemporalName, ""), "name to verify in Temporal's certificate; empty = the host of --temporal (turns TLS on) ($"+envTemporalName+")")
	}
	if use&useNATS != 0 {
		fs.StringVar(&c.nats, "nats", env(envNATS, "nats://127.0.0.1:4222"), "NATS server URL; user:password@ or token@ in it are credentials ($"+envNATS+")")
		tlsFlags(fs, &c.natsTLS, "nats", "NATS", envNATSCA, envNATSCert, envNATSKey)
		fs.StringVar(&c.natsTLS.ServerName, "nats-tls-server-name", env(envNATSName, ""), "name to verify in NATS's certificate; empty = the host of --nats (turns TLS on) ($"+envNATSName+")")
	}
	if use&useStore != 0 {
		c.storeFlags(fs)
	}
	c.netFlags(fs)
}

// tlsFlags registers the PEM files of the client TLS of one connection:
// --NAME-tls-ca, --NAME-tls-cert, --NAME-tls-key. Any of them turns TLS on.
func tlsFlags(fs *flag.FlagSet, f *tlsfile.Files, name, what, envCA, envCert, envKey string) {
	fs.StringVar(&f.CA, name+"-tls-ca", env(envCA, ""), "PEM `file` of the CA that signs "+what+"'s certificate; empty = the system's roots (any --"+name+"-tls-* turns TLS on) ($"+envCA+")")
	fs.StringVar(&f.Cert, name+"-tls-cert", env(envCert, ""), "PEM `file` of the client certificate presented to "+what+" (mutual TLS), with --"+name+"-tls-key ($"+envCert+")")
	fs.StringVar(&f.Key, name+"-tls-key", env(envKey, ""), "PEM `file` of the key of --"+name+"-tls-cert ($"+envKey+")")
}

func (c *config) storeFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.s3.Endpoint, "s3-endpoint", env(envS3, ""), "S3/MinIO host:port; empty = local blob store under --data ($"+envS3+")")
	fs.StringVar(&c.s3.Bucket, "s3-bucket", env(envS3Bucket, "codectx"), "S3 bucket, created if missing ($"+envS3Bucket+")")
	fs.BoolVar(&c.s3.Secure, "s3-secure", envBool(envS3Secure, false), "use HTTPS for S3 ($"+envS3Secure+")")
	fs.StringVar(&c.s3.AccessKey, "s3-access-key", env(envS3Access, ""), "S3 access key (prefer $"+envS3Access+")")
	fs.StringVar(&c.s3.SecretKey, "s3-secret-key", env(envS3Secret, ""), "S3 secret key (prefer $"+envS3Secret+")")
}

// store opens the S3 bucket when an endpoint is configured, else the local
// blob store under the data directory.
func (c *config) store(ctx context.Context) (*blob.Bucket, string, error) {
	if c.s3.Endpoint == "" {
		st, err := openStore(c.data)
		return st, "local " + filepath.Join(c.data, "store"), err
	}
	st, err := minio.Open(ctx, c.s3)
	if err != nil {
		return nil, "", err
	}
	return st, "s3 " + c.s3.Endpoint + "/" + c.s3.Bucket, nil
}

// newLogger logs text lines to w.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := applyBytesEnv(fs); err != nil {
		return err
	}
	if err := checkEnv(fs); err != nil {
		return err
	}
	if f := fs.Lookup("tenant-hosts"); f != nil {
		if _, err := parseTenantHosts(f.Value.String()); err != nil {
			return err
		}
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	warnSecretFlags(fs)
	return nil
}

// secretFlags are the flags that carry a credential, each with the
// variable to give it in instead, and whether a value holds one.
var secretFlags = []struct {
	name, env string
	secret    func(string) bool
}{
	{"s3-access-key", envS3Access, func(v string) bool { return v != "" }},
	{"s3-secret-key", envS3Secret, func(v string) bool { return v != "" }},
	{"nats", envNATS, func(v string) bool {
		u, err := url.Parse(v)
		return err == nil && u.User != nil // user:password@ or token@
	}},
}

// warnSecretFlags warns, on fs's output (stderr), of a credential given on
// the command line: every local user can read a process's arguments (ps,
// /proc/PID/cmdline), not its environment. The flag still works.
func warnSecretFlags(fs *flag.FlagSet) {
	given := map[string]string{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = f.Value.String() })
	for _, s := range secretFlags {
		if v, ok := given[s.name]; ok && s.secret(v) {
			fmt.Fprintf(fs.Output(), "codectx %s: warning: --%s puts a credential on the command line, where other local users can read it (ps); set $%s instead\n", fs.Name(), s.name, s.env)
		}
	}
}

// memoryLimit is the Go soft memory limit a process serving queries with a
// segment cache of cacheBytes gets: the cache (a loaded segment's heap is
// about 1.2x its estimated size), the process's own few hundred MB, and
// the loads and answers in flight. Without it the garbage collector lets
// the heap grow to twice the live data (GOGC=100): a 512 MiB cache made a
// 1.8 GB process.
func memoryLimit(cacheBytes int64) int64 {
	return cacheBytes + cacheBytes/4 + 384<<20
}

// limitMemory sets the soft memory limit for cacheBytes unless GOMEMLIMIT
// is set (the operator's word wins).
func limitMemory(log *slog.Logger, cacheBytes int64) {
	if os.Getenv("GOMEMLIMIT") != "" || cacheBytes <= 0 {
		return
	}
	lim := memoryLimit(cacheBytes)
	debug.SetMemoryLimit(lim)
	log.Debug("memory limit", "bytes", lim, "cache_bytes", cacheBytes)
}

// A process budget (--memory-bytes) is shared out so that the resident set
// stays within it: the segment cache gets the budget less a reserve (the
// binary's own pages, the process's other tables such as the token counts
// of packed texts, requests in flight, and the collector's headroom), and
// the Go soft memory limit is the budget less the process's file pages
// (the binary's and the mapped shards', read from /proc/self/status each
// time the cache's mapped pages move; elsewhere binaryReserve plus the
// mapped pages the cache holds).
const (
	binaryReserve = 128 << 20 // the binary's resident pages (100-160 MB), the runtime's own
	otherReserve  = 128 << 20 // token-count tables (64 MiB of keys at most), requests in flight
)

// cacheShare is the segment cache's part of a process budget of mem bytes.
func cacheShare(mem int64) int64 {
	return max(mem-binaryReserve-otherReserve-mem/8, mem/4)
}

// heapLimit is the Go soft memory limit of a process budget of mem bytes
// whose file pages (binary and mapped shards) take file bytes.
func heapLimit(mem, file int64) int64 {
	return max(mem-file, mem/4)
}

// fileBytes is the process's resident file pages: RssFile of
// /proc/self/status, or binaryReserve plus the cache's mapped pages where
// that cannot be read.
func fileBytes(mapped int64) int64 {
	if n, ok := rssFile(); ok {
		return max(n, mapped)
	}
	return binaryReserve + mapped
}

func rssFile() (int64, bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	return parseRssFile(data)
}

// parseRssFile reads the RssFile line ("RssFile:   158380 kB") of a
// /proc/PID/status.
func parseRssFile(status []byte) (int64, bool) {
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "RssFile:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, false
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || n < 0 || n > 1<<40 {
				return 0, false
			}
			return n << 10, true
		}
	}
	return 0, false
}

// budget applies --memory-bytes: the cache size to use and, unless
// GOMEMLIMIT is set, the Go memory limit to follow the mapped pages
// (nil: no budget, cacheBytes and limitMemory as without one).
func budget(log *slog.Logger, mem, cacheBytes int64) (int64, func(mapped int64)) {
	if mem <= 0 {
		limitMemory(log, cacheBytes)
		return cacheBytes, nil
	}
	cache := cacheShare(mem)
	log.Debug("memory budget", "bytes", mem, "cache_bytes", cache)
	if os.Getenv("GOMEMLIMIT") != "" {
		return cache, nil
	}
	debug.SetMemoryLimit(heapLimit(mem, fileBytes(0)))
	return cache, func(mapped int64) { debug.SetMemoryLimit(heapLimit(mem, fileBytes(mapped))) }
}

// memoryFlag registers --memory-bytes, the process budget of a query
// server.
func memoryFlag(fs *flag.FlagSet, v *int64) {
	bytesVar(fs, v, "memory-bytes", envMemory, 0, "memory budget of the whole process, in `bytes` (or with a unit: 1GiB, 640MiB, 1GB): the segment cache gets it less a reserve (256 MiB and an eighth) instead of --cache-bytes, and the Go soft memory limit follows what the mapped shards leave of it, so the resident set stays within it; 0: --cache-bytes alone ($"+envMemory+")")
}

// shardFlag registers --shard-bytes, the source size of an index shard the
// graph stage cuts a snapshot into.
func shardFlag(fs *flag.FlagSet, v *int64) {
	bytesVar(fs, v, "shard-bytes", envShardBytes, index.DefaultShardBytes, "source `bytes` per index shard (a unit may follow: 16MiB): a push rewrites only the shards holding changed files; negative: one segment per snapshot ($"+envShardBytes+")")
}

// chunksFlag registers --max-chunks, the bound of the chunks of one
// snapshot that the graph stage (or an index command) holds as it builds.
func chunksFlag(fs *flag.FlagSet, v *int) {
	fs.IntVar(v, "max-chunks", envInt(envMaxChunks, index.MaxChunks),
		"bound of the chunks of one snapshot, which its index build holds in memory (about 470 bytes each); a snapshot making more fails (\"more chunks than the server indexes\"); 0 = no bound ($"+envMaxChunks+")")
}

// defaultTenantSnapshots is the default bound of --tenant-snapshots: as
// many as an OrgWorkflow indexes at once by default.
const defaultTenantSnapshots = 4

// tenantSnapshotsFlag registers --tenant-snapshots, the bound of one
// tenant's snapshots in progress. 0 is the default: resolve it with
// perTenant.
func tenantSnapshotsFlag(fs *flag.FlagSet, v *int, def string) {
	fs.IntVar(v, "tenant-snapshots", envInt(envTenantSnaps, 0), "snapshots of one tenant indexed at once; its other pushes wait (status \"queued\") so that one tenant's many repositories cannot fill the shared parse and graph queues ahead of the others' (default: "+def+"; negative: no bound) ($"+envTenantSnaps+")")
}

// queueWindowFlag registers --queue-window, the bound of one snapshot's
// batches in the parse and embed queues at once.
func queueWindowFlag(fs *flag.FlagSet, v *int) {
	fs.IntVar(v, "queue-window", envInt(envQueueWindow, 0), fmt.Sprintf("batches of one snapshot in the parse (and embed) queue at once; the others are published as those finish, so another snapshot's batches wait behind at most this many of each snapshot in progress. One snapshot keeps at most this many workers busy: raise it where more parse workers serve few snapshots (default: %d; negative: every batch at once) ($%s)", workflows.DefaultWindow, envQueueWindow))
}

// defaultTenantBatches is the default bound of --tenant-batches: two
// snapshots' windows.
const defaultTenantBatches = 2 * workflows.DefaultWindow

// tenantBatchesFlag registers --tenant-batches, the bound of one tenant's
// batches in the parse and embed queues at once. 0 is the default:
// resolve it with perTenant.
func tenantBatchesFlag(fs *flag.FlagSet, v *int, def string) {
	fs.IntVar(v, "tenant-batches", envInt(envTenantBatches, 0), "batches of one tenant in the parse queue, and in the embed queue, at once, whatever its snapshots in progress: another tenant's batch waits behind at most this many of each tenant, and one tenant keeps at most this many workers of a stage busy. Enforced by NATS for every process publishing to the queue: give each orchestrator the same value (default: "+def+"; negative: no bound) ($"+envTenantBatches+")")
}

// shareQueue sets the share limit of the parse and embed stages: n
// batches per tenant (n < 1: none).
func shareQueue(q *natsq.Queue, n int) {
	for _, stage := range []string{pipeline.StageParse, pipeline.StageEmbed} {
		q.SetShareLimit(stage, n)
	}
}

// perTenant resolves --tenant-snapshots and --tenant-batches: v
// when set, else def if multi, else none (-1).
func perTenant(v int, multi bool, def int) int {
	switch {
	case v != 0:
		return v
	case multi:
		return def
	}
	return -1
}

// tenantReposFlag registers --tenant-repos, the bound of the distinct
// repositories one tenant holds. 0 is the default: resolve it with
// tenantRepos.
func tenantReposFlag(fs *flag.FlagSet, v *int, def string) {
	fs.IntVar(v, "tenant-repos", envInt(envTenantRepos, 0), "distinct repositories one tenant may hold (registered by an index request, a webhook push or a reindex, or published); a new one past it is refused with 409, while pushes and reindexes of those it holds go on and DELETE frees a slot; operators' requests are not bounded (default: "+def+"; negative: no bound) ($"+envTenantRepos+")")
}

// tenantRepos resolves --tenant-repos: v when set, else the default bound
// if multi, else none (-1).
func tenantRepos(v int, multi bool) int {
	switch {
	case v != 0:
		return v
	case multi:
		return api.DefaultTenantRepos
	}
	return -1
}

// shardCacheFlags are --shard-cache and --shard-cache-bytes: the local
// directory a query server downloads an object store's shards into, to map
// them instead of reading them into its heap.
type shardCacheFlags struct {
	dir   string
	bytes int64
}

func (f *shardCacheFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dir, "shard-cache", env(envShardCache, ""), "local directory the shards of an object store are downloaded to once and memory-mapped from by the query API (empty: read into the heap; a local store's shards are always mapped in place) ($"+envShardCache+")")
	bytesVar(fs, &f.bytes, "shard-cache-bytes", envShardCacheBytes, 4<<30, "bound of --shard-cache in `bytes` (a unit may follow: 4GiB): least recently used shards are deleted past it (<= 0: unbounded) ($"+envShardCacheBytes+")")
}

func (f *shardCacheFlags) open() (*index.ShardCache, error) {
	if f.dir == "" {
		return nil, nil
	}
	return index.OpenShardCache(f.dir, f.bytes)
}

// cacheFlag registers --cache-bytes: the memory budget of the query API's
// loaded segments.
func cacheFlag(fs *flag.FlagSet, v *int64) {
	bytesVar(fs, v, "cache-bytes", envCache, *v, "memory budget of the loaded segments of the query API, in `bytes` (or with a unit: 512MiB); the process's Go soft memory limit is 1.25x it plus 384 MiB unless GOMEMLIMIT is set ($"+envCache+")")
}

// dataOrServer settles a command that reads a data directory or asks a
// server: both given on the command line is an error (one of them was
// silently ignored), and --data given there wins over a server from the
// environment ($CODECTX_SERVER), which then reads as none.
func dataOrServer(fs *flag.FlagSet, server *string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	switch {
	case given["data"] && given["server"]:
		return fmt.Errorf("%s: give --data or --server, not both", fs.Name())
	case given["data"]:
		*server = ""
	}
	return nil
}
