package pipeline

import (
	"codectx/pkg/netguard"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/chunk"
	"codectx/pkg/embed"
	"codectx/pkg/index"
	"codectx/pkg/queue"
	"codectx/pkg/queue/natsq"
	"codectx/pkg/ratelog"
	"codectx/pkg/source"
)

// Workers are the queue consumers of the parse, embed and graph stages.
type Workers struct {
	Store    *blob.Bucket
	Queue    *natsq.Queue
	CacheDir string // clone cache for URL locations
	// Net is where clones may connect (nil: public addresses only).
	Net *netguard.Policy
	// ParseHook is a test hook called before each file is parsed (on a
	// parse-cache miss, before its content is read). It may block or panic.
	ParseHook func(path string)
	// GraphHook is a test hook called once a graph job has read its
	// manifest, before it builds. It may block.
	GraphHook func(GraphJob)
	Chunk     chunk.Options // parse options (size cap, parse timeout)
	// Wrap, if set, wraps each stage's handler (metrics: items, failures,
	// latency per stage).
	Wrap func(stage string, h queue.Handler) queue.Handler
	// Log, if set, gets one line per failed job (tenant, repo, commit,
	// cause), repeats of one cause for one commit rate-limited.
	Log *slog.Logger
	// Embedder embeds the chunks of the embed stage (RunEmbed).
	Embedder embed.Embedder
	// ShardBytes is the shard size of graph jobs that name none
	// (GraphJob.ShardBytes; 0: index.DefaultShardBytes).
	ShardBytes int64
	// MaxChunks bounds the chunks of a snapshot a graph job builds, which
	// its build holds in memory (index.ChunkLimit: 0 is index.MaxChunks,
	// negative no bound). Past it the snapshot fails with
	// index.ErrTooManyChunks.
	MaxChunks int

	snaps   snapCache
	logOnce sync.Once
	fails   *ratelog.Limiter
}

// DefaultBackoff is the retry delay of a failed parse or graph job when
// the consumer config sets none: a store that fails for a few seconds
// does not use up a job's deliveries at once.
var DefaultBackoff = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}

func withBackoff(cfg queue.Config) queue.Config {
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	return cfg
}

// failed logs a failed job, rate-limited per stage, commit and cause.
func (w *Workers) failed(ctx context.Context, stage, tenant, repo, commit string, m queue.Message, err error) {
	w.logOnce.Do(func() {
		if w.Log != nil {
			w.fails = ratelog.New(w.Log, ratelog.DefaultInterval)
		}
	})
	if w.fails == nil {
		return
	}
	cause := "error"
	if queue.IsPermanent(err) {
		cause = "bad input"
	}
	w.fails.Warn(ctx, stage+"\x00"+tenant+"\x00"+repo+"\x00"+commit+"\x00"+cause, stage+" job failed",
		"stage", stage, "tenant", tenant, "repo", repo, "commit", commit, "delivery", m.Deliveries, "kind", cause, "cause", err.Error())
}

// RunParse consumes the parse stage until ctx is done. cfg.Stage is set to
// StageParse; a nil cfg.Backoff is DefaultBackoff.
func (w *Workers) RunParse(ctx context.Context, cfg queue.Config) error {
	cfg.Stage = StageParse
	cfg = withBackoff(cfg)
	defer w.snaps.closeIdle(0)
	return w.Queue.Consume(ctx, cfg, w.wrap(StageParse, w.HandleParse))
}

func (w *Workers) wrap(stage string, h queue.Handler) queue.Handler {
	if w.Wrap == nil {
		return h
	}
	return w.Wrap(stage, h)
}

// RunGraph consumes the graph stage until ctx is done: each job assembles
// and writes one segment (never HEAD). cfg.Stage is set to StageGraph; a
// nil cfg.Backoff is DefaultBackoff.
func (w *Workers) RunGraph(ctx context.Context, cfg queue.Config) error {
	cfg.Stage = StageGraph
	cfg = withBackoff(cfg)
	return w.Queue.Consume(ctx, cfg, w.wrap(StageGraph, w.HandleGraph))
}

// HandleParse parses the files of one ParseBatch message. Results are keyed
// by blob hash, so a redelivered batch only parses what is still missing.
// A panic (of the parser or ParseHook) is re-raised naming the file, for the
// queue to recover, retry and eventually dead-letter with that reason. A
// file that is itself bad (changed since its snapshot) fails with a
// queue.Permanent error; every other error (store, clone) is retried and
// never marks a file bad.
func (w *Workers) HandleParse(ctx context.Context, m queue.Message) error {
	var b ParseBatch
	if err := json.Unmarshal(m.Data, &b); err != nil {
		return queue.Permanent(fmt.Errorf("decode parse batch: %w", err))
	}
	err := w.handleParse(ctx, b)
	if err != nil && ctx.Err() == nil {
		w.failed(ctx, StageParse, b.Tenant, b.Repo, b.Commit, m, err)
	}
	return err
}

func (w *Workers) handleParse(ctx context.Context, b ParseBatch) error {
	snap, release, err := w.snaps.get(netguard.With(ctx, w.Net.For(b.Tenant)), b.Tenant, b.Location, b.Commit, w.CacheDir)
	if err != nil {
		return fmt.Errorf("parse batch %d of %s/%s@%s: %w", b.Batch, b.Tenant, b.Repo, b.Commit, err)
	}
	defer release()
	worktree := IsWorktree(b.Commit)
	for _, f := range b.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := w.parseOne(ctx, snap, b.Tenant, f, worktree); err != nil {
			err = fmt.Errorf("parse %s of %s/%s@%s: %w", f.Path, b.Tenant, b.Repo, b.Commit, err)
			if errors.Is(err, errChanged) {
				err = queue.Permanent(err)
			}
			return err
		}
	}
	return nil
}

func (w *Workers) parseOne(ctx context.Context, snap *source.Snapshot, tenant string, f source.File, worktree bool) error {
	defer func() {
		if r := recover(); r != nil {
			panic(fmt.Sprintf("parse %s: %v", f.Path, r))
		}
	}()
	_, err := index.ParseFile(ctx, w.Store, tenant, f, func() ([]byte, error) {
		if w.ParseHook != nil {
			w.ParseHook(f.Path)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, err := snap.Read(f)
		if err == nil && worktree && blobHash(data) != f.Blob {
			return nil, errChanged
		}
		return data, err
	}, w.Chunk)
	return err
}

// HandleGraph builds the segment of one GraphJob message.
func (w *Workers) HandleGraph(ctx context.Context, m queue.Message) error {
	var j GraphJob
	if err := json.Unmarshal(m.Data, &j); err != nil {
		return queue.Permanent(fmt.Errorf("decode graph job: %w", err))
	}
	if j.ShardBytes == 0 {
		j.ShardBytes = w.ShardBytes
	}
	_, err := buildSegment(ctx, w.Store, j, w.MaxChunks, w.GraphHook)
	if errors.Is(err, ErrSnapshotGone) {
		// Nobody waits for it; what it wrote is removed.
		if w.Log != nil {
			w.Log.Info("graph job of a deleted snapshot dropped", "tenant", j.Tenant, "repo", j.Repo, "commit", j.Commit)
		}
		return nil
	}
	if err != nil {
		err = fmt.Errorf("graph %s/%s@%s: %w", j.Tenant, j.Repo, j.Commit, err)
		if ctx.Err() == nil {
			w.failed(ctx, StageGraph, j.Tenant, j.Repo, j.Commit, m, err)
		}
		return err
	}
	return nil
}

// snapCache keeps recently opened snapshots, so that the batches of one
// tenant's commit share one open (and a clone's fetch; another tenant's
// batches open the location through their own clone); they list nothing
// (OpenReader): a batch names its files. Idle entries are closed after snapTTL.
type snapCache struct {
	mu sync.Mutex
	m  map[string]*snapEntry
}

type snapEntry struct {
	ready chan struct{}
	snap  *source.Snapshot
	err   error
	refs  int
	used  time.Time
	clone string // the clone directory it reads ("" for a path)
}

// snapCaches are the snapshot caches of this process's workers, so that
// RemoveClone can close their idle snapshots of a deleted repository's
// clone instead of waiting out snapTTL.
var snapCaches = struct {
	mu sync.Mutex
	m  map[*snapCache]bool
}{m: map[*snapCache]bool{}}

// closeIdleOf closes the idle cached snapshots that read the clone in
// dir, in every worker of this process.
func closeIdleOf(dir string) {
	snapCaches.mu.Lock()
	caches := make([]*snapCache, 0, len(snapCaches.m))
	for c := range snapCaches.m {
		caches = append(caches, c)
	}
	snapCaches.mu.Unlock()
	for _, c := range caches {
		c.mu.Lock()
		for k, e := range c.m {
			if e.refs == 0 && e.clone == dir && e.snap != nil {
				e.snap.Close()
				delete(c.m, k)
			}
		}
		c.mu.Unlock()
	}
}

const (
	snapTTL  = 30 * time.Second
	maxSnaps = 8
)

func (c *snapCache) get(ctx context.Context, tenant, location, commit, cacheDir string) (*source.Snapshot, func(), error) {
	key := tenant + "\x00" + location + "\x00" + commit
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*snapEntry{}
		snapCaches.mu.Lock()
		snapCaches.m[c] = true
		snapCaches.mu.Unlock()
	}
	c.evictLocked(snapTTL)
	e, ok := c.m[key]
	if !ok {
		e = &snapEntry{ready: make(chan struct{}), clone: source.CloneDir(cacheDir, tenant, location)}
		c.m[key] = e
	}
	e.refs++
	c.mu.Unlock()
	if !ok {
		e.snap, e.err = OpenReader(ctx, tenant, location, commit, cacheDir)
		close(e.ready)
	} else {
		select {
		case <-e.ready:
		case <-ctx.Done():
			c.release(key, e)
			return nil, nil, ctx.Err()
		}
	}
	if e.err != nil {
		c.mu.Lock()
		e.refs--
		if c.m[key] == e {
			delete(c.m, key) // do not cache failures
		}
		c.mu.Unlock()
		return nil, nil, e.err
	}
	return e.snap, func() { c.release(key, e) }, nil
}

func (c *snapCache) release(key string, e *snapEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	e.used = time.Now()
	if e.refs == 0 {
		time.AfterFunc(snapTTL, func() { c.closeIdle(snapTTL) })
	}
}

// closeIdle closes entries idle for at least age.
func (c *snapCache) closeIdle(age time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evictLocked(age)
}

func (c *snapCache) evictLocked(age time.Duration) {
	now := time.Now()
	var oldest string
	idle := 0
	for k, e := range c.m {
		if e.refs > 0 {
			continue
		}
		if now.Sub(e.used) >= age {
			e.snap.Close()
			delete(c.m, k)
			continue
		}
		idle++
		if oldest == "" || e.used.Before(c.m[oldest].used) {
			oldest = k
		}
	}
	if len(c.m) >= maxSnaps && oldest != "" {
		c.m[oldest].snap.Close()
		delete(c.m, oldest)
	}
}
