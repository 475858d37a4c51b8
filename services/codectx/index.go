package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/blob/local"
	"codectx/pkg/chunk"
	"codectx/pkg/dense"
	"codectx/pkg/index"
)

// openData opens the store of a data directory that must exist: a
// command that only reads it (query, mcp --data) given a mistyped
// --data created an empty one and said the repository was not indexed.
func openData(data string) (*blob.Bucket, error) {
	if st, err := os.Stat(filepath.Join(data, "store")); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("no codectx data at %s: index a repository there first (codectx index --data %s PATH), or give the --data of one", data, data)
	}
	return openStore(data)
}

func openStore(data string) (*blob.Bucket, error) {
	st, err := local.Open(filepath.Join(data, "store"))
	if err != nil {
		return nil, fmt.Errorf("open data dir %s: %w", data, err)
	}
	return st, nil
}

// defaultIndexMemoryLimit is the soft memory limit of codectx index: the
// collector runs before the heap doubles. The live set is one shard's
// build (about 100 MB at 16 MB of source) plus the compact graph input;
// on GOROOT/src and twice it 160 MiB costs no measurable CPU against
// 200 MiB (docs/benchmarks.md, issue 12).
const defaultIndexMemoryLimit = 160 << 20

// defaultIndexGCPercent is the collector's GOGC while indexing under a
// soft memory limit. At GOGC=100 the heap goal is twice a live set that
// is mostly small (a shard's build starts from nothing), so the
// collector ran about 100 times on GOROOT/src; at 400 it runs about 40
// times, the limit still bounding the heap (docs/benchmarks.md, issue 12).
const defaultIndexGCPercent = 400

func runIndex(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("index", flag.ContinueOnError)
	fs.SetOutput(usageOut("index", stderr, args))
	data := fs.String("data", dataDir(), "data directory (embedded mode) ($"+envData+")")
	name := fs.String("name", "", "repository name (default: derived from the path or URL)")
	tenant := fs.String("tenant", "", "tenant (default: with --server, the API key's tenant for a tenant's key, else "+index.DefaultTenant+")")
	rev := fs.String("rev", "", "revision to index (default HEAD)")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	maxSize := bytesFlag(fs, "max-file-size", 1<<20, "skip files larger than this many `bytes` (a unit may follow: 2MiB)")
	sourceBytes := bytesFlag(fs, "source-max-bytes", index.DefaultMaxSourceBytes, "fail when the files to parse (those under --max-file-size, one per path) are larger in all than this many `bytes` (a unit may follow: 2GiB), before parsing any; 0: no bound")
	var maxChunks int
	chunksFlag(fs, &maxChunks)
	workers := fs.Int("workers", 0, "parse goroutines (default: number of CPUs)")
	shardBytes := bytesFlag(fs, "shard-bytes", index.DefaultShardBytes, "source `bytes` per index shard (a push rewrites only the shards it touches); negative: one segment")
	server := fs.String("server", env(envServer, ""), "send the request to a running codectx up or gateway at this URL and wait ($"+envServer+")")
	timeout := fs.Duration("timeout", time.Hour, "with --server: how long to wait for the index")
	var df denseFlags
	df.register(fs, false)
	var prof profileFlags
	prof.register(fs)
	memLimit := bytesFlag(fs, "memory-limit", defaultIndexMemoryLimit, "the Go soft memory limit while indexing, in `bytes` or with a unit (300MiB) (the collector runs harder near it; 0: none); GOMEMLIMIT wins")
	gcPercent := fs.Int("gc-percent", defaultIndexGCPercent, "the collector's GOGC while indexing under a memory limit (the limit bounds the heap; without one GOGC stays 100); GOGC wins")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: codectx index [flags] PATH_OR_URL\n\nIndexes a working directory, a clone, a bare git directory or a clone URL.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("index: want exactly one PATH_OR_URL, got %d", fs.NArg())
	}
	if err := dataOrServer(fs, server); err != nil {
		return err
	}
	if *server != "" {
		where, err := absLocation(fs.Arg(0))
		if err != nil {
			return fmt.Errorf("index: %w", err)
		}
		return indexRemote(ctx, *server, api.IndexRequest{Tenant: *tenant, Repo: *name, Location: where, Commit: *rev}, *timeout, *asJSON, stdout)
	}
	store, err := openStore(*data)
	if err != nil {
		return err
	}
	// What package initialization mapped of the binary is not the build's:
	// given back, the build's peak RSS is its own (a failure costs only
	// that, so it is not reported).
	_, _ = dropBinaryPages()
	// One build in this process: shard inputs kept for a next build would
	// only hold a second copy of the graph input until exit.
	defer func(n int64) { index.InputCacheBytes = n }(index.InputCacheBytes)
	index.InputCacheBytes = 0
	if os.Getenv("GOMEMLIMIT") == "" && *memLimit > 0 {
		debug.SetMemoryLimit(*memLimit)
		// Only under a limit of the flag's: the heap may grow to
		// 1+gc-percent/100 times the live set short of it.
		if os.Getenv("GOGC") == "" && *gcPercent > 0 {
			defer debug.SetGCPercent(debug.SetGCPercent(*gcPercent))
		}
	}
	stopProf, err := prof.start()
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	defer func() {
		if err := stopProf(); err != nil {
			fmt.Fprintf(stderr, "index: %v\n", err)
		}
	}()
	opt := index.Options{
		Tenant: cmp.Or(*tenant, index.DefaultTenant), Name: *name, Rev: *rev,
		CacheDir:       filepath.Join(*data, "clones"),
		Chunk:          chunk.Options{MaxFileSize: *maxSize},
		Workers:        *workers,
		ShardBytes:     *shardBytes,
		MaxSourceBytes: noBound(*sourceBytes),
		MaxChunks:      noBound(maxChunks),
	}
	if isTerminal(stderr) {
		opt.Progress = index.WriteProgress(stderr)
	}
	kit, err := df.open(ctx, store)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	defer kit.close()
	sum, err := index.Build(ctx, store, fs.Arg(0), opt)
	if err != nil {
		return err
	}
	var ds *dense.Stats
	if kit.emb != nil {
		// The library path embeds in process; HEAD is its only snapshot.
		seg, err := index.LoadHead(ctx, store, sum.Tenant, sum.Repo)
		if err != nil {
			return err
		}
		if ds, err = dense.IndexSegment(ctx, store, kit.store, kit.emb, seg); err != nil {
			return fmt.Errorf("index: dense: %w", err)
		}
	}
	if *asJSON {
		return writeIndented(stdout, struct {
			*index.Summary
			Dense *dense.Stats `json:"dense,omitempty"`
		}{sum, ds})
	}
	fmt.Fprint(stdout, index.FormatSummary(sum))
	if ds != nil {
		fmt.Fprintf(stdout, "  dense     %s: %d chunks, %d embedded, %d reused from cache, %d points added, %d removed (%.2f s)\n", ds.Model, ds.Chunks, ds.Embedded, ds.Reused, ds.Added, ds.Deleted, ds.Seconds)
	}
	return nil
}

// indexRemote asks a server to index and waits for it.
func indexRemote(ctx context.Context, url string, req api.IndexRequest, timeout time.Duration, asJSON bool, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := serverClient(url)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	if !asJSON {
		return keyHint(indexAndWait(ctx, cl, req, stdout))
	}
	resp, err := cl.Index(ctx, req)
	if err != nil {
		return keyHint(err)
	}
	st, err := cl.WaitIndexed(ctx, resp.Tenant, resp.Repo, req.Commit)
	if err != nil {
		return err
	}
	return writeIndented(stdout, st)
}
