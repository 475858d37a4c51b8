// Package pipeline holds the work items that the indexing pipeline passes
// between its stages over the queue, and the worker handlers that consume
// them: the parse worker (chunks the changed files of a snapshot, caching
// each result in the blob store under its blob hash) and the graph-build
// worker (assembles the snapshot's segment from its manifest and the cached
// parse results). The Temporal workflows in package workflows publish the
// items and wait for their outputs in the blob store.
package pipeline

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"codectx/pkg/blob"
	"codectx/pkg/graph"
	"codectx/pkg/index"
	"codectx/pkg/queue"
	"codectx/pkg/source"
)

// Stages of the pipeline (queue stage names).
const (
	StageParse = "parse"
	StageEmbed = "embed"
	StageGraph = "graph"
)

// SkipParseFailed is the skip reason recorded in a segment for a file whose
// parse batch was dead-lettered (a poison file): it is left out of the
// segment instead of failing the snapshot.
const SkipParseFailed = "parse_failed"

// MaxFileSize is the size above which a file is never parsed (it is
// recorded as too large by the segment); it matches index.ParseFile's default.
const MaxFileSize = 1 << 20

// ParseBatch is one parse job: files of one snapshot to chunk.
type ParseBatch struct {
	Tenant, Repo, Commit string
	Location             string // what source.Open takes (path or URL)
	Batch                int
	Files                []source.File
}

// GraphJob asks the graph worker to build the segment of one snapshot.
type GraphJob struct {
	Tenant, Repo, Commit string
	ManifestKey          string
	Failed               []string // paths whose parse failed: left out of the segment
	// ShardBytes is the source size of a shard (0: index.DefaultShardBytes);
	// negative builds one segment.
	ShardBytes int64 `json:",omitempty"`
}

// SegmentKey is where the segment of the job is written. A snapshot with
// files left out gets its own key, commit~hash of the left-out paths, so
// that indexing the commit again once they parse writes a new segment
// (segments are immutable and cached by key) at the commit's plain key.
func (j GraphJob) SegmentKey() string {
	key := index.SegmentKey(j.Tenant, j.Repo, j.Commit)
	if len(j.Failed) == 0 {
		return key
	}
	paths := slices.Sorted(slices.Values(j.Failed))
	h := sha256.Sum256([]byte(strings.Join(paths, "\x00")))
	return strings.TrimSuffix(key, ".seg") + "~" + hex.EncodeToString(h[:4]) + ".seg"
}

// SegmentCommit is the commit of a segment file name (without ".seg")
// as SegmentKey makes it.
func SegmentCommit(name string) string {
	c, _, _ := strings.Cut(name, "~")
	return c
}

// Plan is what the snapshot stage decided to parse, stored at PlanKey so
// that workflow histories stay small.
type Plan struct {
	Tenant, Repo, Commit, Location string
	Batches                        [][]source.File
}

// ManifestKey is where the manifest of a snapshot is stored.
func ManifestKey(tenant, repo, commit string) string {
	return index.RepoPrefix("manifests/", tenant, repo) + commit + ".json"
}

// PlanKey is where the parse plan of a snapshot is stored.
func PlanKey(tenant, repo, commit string) string {
	return index.RepoPrefix("plans/", tenant, repo) + commit + ".json"
}

// NeedsParse reports whether f gets a parse result in the cache (files
// over MaxFileSize never do).
func NeedsParse(f source.File) bool { return f.Size <= MaxFileSize }

// ResultKey is the parse-cache key of f in tenant's cache.
func ResultKey(tenant string, f source.File) string {
	return index.ParseKey(tenant, f.Path, f.Blob)
}

// worktreePrefix names snapshots of plain directories, which have no
// commit: "worktree-" and a hash of the file list, as index.Build does.
const worktreePrefix = source.WorktreePrefix

// IsWorktree reports whether commit names a plain-directory snapshot.
func IsWorktree(commit string) bool { return strings.HasPrefix(commit, worktreePrefix) }

// opening serialises source.Open of one location in this process: clones
// and fetches into one clone directory must not run concurrently. Other
// locations go on: a clone that stalls (a host that accepts and never
// answers) holds up only its own repository, never another tenant's.
var opening keyedMutex

// keyedMutex is a set of mutexes by key, each kept while it is held or
// waited for.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	refs int
}

// lock locks key and returns its unlock.
func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// OpenSnapshot opens location at commit ("" = HEAD) through tenant's
// clone cache in cacheDir (each tenant clones and fetches a URL into a
// directory of its own). A plain directory gets a content-derived commit
// name (see IsWorktree); opening such a name reads the directory as it is
// now.
func OpenSnapshot(ctx context.Context, tenant, location, commit, cacheDir string) (*source.Snapshot, error) {
	return openSnapshot(ctx, location, commit, source.Options{Tenant: tenant, CacheDir: cacheDir})
}

// OpenSnapshotFrom is OpenSnapshot listing the tree from base, the listing
// of an earlier snapshot (source.Options.Base; nil: a full walk). The
// listing is the same either way.
func OpenSnapshotFrom(ctx context.Context, tenant, location, commit, cacheDir string, base *source.Listing) (*source.Snapshot, error) {
	return openSnapshot(ctx, location, commit, source.Options{Tenant: tenant, CacheDir: cacheDir, Base: base})
}

// OpenReader is OpenSnapshot for reading the files of a snapshot listed
// before: nothing is listed (source.Options.NoList), and a plain
// directory's snapshot keeps the name commit.
func OpenReader(ctx context.Context, tenant, location, commit, cacheDir string) (*source.Snapshot, error) {
	s, err := openSnapshot(ctx, location, commit, source.Options{Tenant: tenant, CacheDir: cacheDir, NoList: true})
	if err == nil && s.Commit == "" {
		s.Commit = commit
	}
	return s, err
}

func openSnapshot(ctx context.Context, location, commit string, opt source.Options) (*source.Snapshot, error) {
	opt.Rev = commit
	if IsWorktree(commit) {
		opt.Rev = ""
	}
	unpin := func() {}
	dir := source.CloneDir(opt.CacheDir, opt.Tenant, location)
	if dir != "" {
		// In use from before the open until the snapshot closes:
		// CollectClones leaves it alone meanwhile.
		unpin = clones.pin(dir)
	}
	unlock := opening.lock(opt.CacheDir + "\x00" + opt.Tenant + "\x00" + location)
	s, err := source.Open(ctx, location, opt)
	unlock()
	if err != nil {
		unpin()
		return nil, err
	}
	if dir != "" {
		touch(dir)
		s.OnClose(unpin)
	}
	if s.Commit == "" && !opt.NoList {
		s.Commit = s.ContentName()
	}
	return s, nil
}

// blobHash is the git blob hash of data, as `git hash-object` computes it.
func blobHash(data []byte) string {
	h := sha1.New()
	h.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// FilterFailed returns a copy of m without the failed paths, which are
// listed as skipped with SkipParseFailed instead.
func FilterFailed(m *index.Manifest, failed []string) *index.Manifest {
	if len(failed) == 0 {
		return m
	}
	drop := map[string]bool{}
	for _, p := range failed {
		drop[p] = true
	}
	out := *m
	out.Files = nil
	out.Skipped = append([]source.Skipped(nil), m.Skipped...)
	for _, f := range m.Files {
		if drop[f.Path] {
			out.Skipped = append(out.Skipped, source.Skipped{Path: f.Path, Reason: SkipParseFailed})
			continue
		}
		out.Files = append(out.Files, f)
	}
	return &out
}

// ErrSnapshotGone reports a graph job whose snapshot's manifest was
// removed while (or before) its segment was built: the repository was
// deleted, or its snapshot collected. What the job wrote is removed again.
var ErrSnapshotGone = errors.New("the snapshot's manifest is gone (repository deleted or snapshot collected)")

// BuildSegment builds and writes the index of job unless it exists: the
// snapshot's shards, one at a time, reusing those whose files did not
// change (index.BuildShards), then the shard list at the segment key. It is
// what the graph worker does per message. The list is written last, so the
// key exists only once every shard it names does.
//
// A DELETE of the repository may run while a job builds: it removes the
// manifests first, then lists and removes the segments and shards. So the
// job checks, after its writes, that its manifest is still there: if it
// is, the DELETE had not yet listed what the job wrote and removes it; if
// not, the job removes its segment and the repository's shards that no
// stored list names, and returns ErrSnapshotGone.
func BuildSegment(ctx context.Context, store *blob.Bucket, job GraphJob) (string, error) {
	return buildSegment(ctx, store, job, 0, nil)
}

// buildSegment is BuildSegment under a bound of the snapshot's chunks
// (index.ChunkLimit: 0 is index.MaxChunks, negative no bound); read, when
// set, runs once the manifest is read (a test hook).
func buildSegment(ctx context.Context, store *blob.Bucket, job GraphJob, maxChunks int, read func(GraphJob)) (string, error) {
	key := job.SegmentKey()
	if ok, err := store.Exists(ctx, key); err != nil {
		return "", err
	} else if ok {
		// Segments are immutable: a redelivery is done, unless an earlier
		// delivery wrote the segment and failed before its check.
		return key, stillThere(ctx, store, job, key)
	}
	// The parse workers stored their results without an fsync each: make
	// them durable before a shard names them.
	if err := store.Sync(ctx); err != nil {
		return "", err
	}
	m, err := ReadManifest(ctx, store, job.ManifestKey)
	if errors.Is(err, blob.ErrNotFound) {
		return "", ErrSnapshotGone // nothing written
	}
	if err != nil {
		return "", err
	}
	if m.Tenant != job.Tenant || m.Repo != job.Repo {
		// The segment is written under the job's tenant from the parse
		// results of the manifest's: a job naming a manifest of another
		// tenant or repository would copy its code there.
		return "", queue.Permanent(fmt.Errorf("manifest %s is of %s/%s, not of the job's %s/%s", job.ManifestKey, m.Tenant, m.Repo, job.Tenant, job.Repo))
	}
	if read != nil {
		read(job)
	}
	m = FilterFailed(m, job.Failed)
	var data []byte
	var g *graph.Graph
	if job.ShardBytes < 0 {
		parsed, err := index.LoadParsed(ctx, store, m)
		if err != nil {
			return "", err
		}
		if err := index.CheckChunks(parsed, maxChunks); err != nil {
			return "", queue.Permanent(err) // the same on every delivery
		}
		seg, _ := index.Assemble(m, parsed)
		if data, err = seg.MarshalBinary(); err != nil {
			return "", fmt.Errorf("encode segment %s: %w", key, err)
		}
	} else {
		load := func(ctx context.Context, files []source.File) ([]index.Parsed, error) {
			return index.LoadParsedFiles(ctx, store, m.Tenant, files)
		}
		list, _, _, err := index.BuildShardsFrom(ctx, store, m, previous(ctx, store, job.Tenant, job.Repo, load), index.ShardOptions{Bytes: job.ShardBytes, MaxChunks: maxChunks}, load, nil)
		if errors.Is(err, index.ErrTooManyChunks) {
			return "", queue.Permanent(err) // the same on every delivery
		}
		if err != nil {
			return "", err
		}
		if data, err = list.MarshalBinary(); err != nil {
			return "", fmt.Errorf("encode shard list %s: %w", key, err)
		}
		g = list.Graph
	}
	if err := store.Put(ctx, key, data); err != nil {
		return "", fmt.Errorf("write segment: %w", err)
	}
	if err := stillThere(ctx, store, job, key); err != nil {
		return "", err
	}
	index.KeepGraph(store, key, data, g)
	return key, nil
}

// stillThere checks that job's manifest still exists after its segment was
// written at key; if not, it removes the segment and those of its shards
// that no other stored list names, and returns ErrSnapshotGone. Only its
// own: the job may be a stale delivery (of a worker that hung past its ack
// wait) running beside the repository's current build, whose shards no
// list names until that build ends.
func stillThere(ctx context.Context, store *blob.Bucket, job GraphJob, key string) error {
	ok, err := store.Exists(ctx, job.ManifestKey)
	if err != nil || ok {
		return err
	}
	switch h, err := index.ReadHead(ctx, store, job.Tenant, job.Repo); {
	case err == nil && h.Segment == key:
		return nil // published (a HEAD from a build that kept no manifest): never removed here
	case err != nil && !errors.Is(err, blob.ErrNotFound):
		return err
	}
	own, err := index.ShardKeys(ctx, store, key)
	if err != nil && !errors.Is(err, blob.ErrNotFound) {
		return fmt.Errorf("read the shards of a deleted snapshot: %w", err)
	}
	if err := store.Delete(ctx, key); err != nil && !errors.Is(err, blob.ErrNotFound) {
		return fmt.Errorf("remove the segment of a deleted snapshot: %w", err)
	}
	if _, err := collectShards(ctx, store, job.Tenant, job.Repo, own, nil); err != nil {
		return fmt.Errorf("remove the shards of a deleted snapshot: %w", err)
	}
	return ErrSnapshotGone
}

// previous is the index HEAD names, with the files of its manifest (kept
// until HEAD moves on), so that a changed shard is spliced from the stored
// one: only the changed files' parse results are read. Without the
// manifest (HEAD from a build that stores none, or collected) the changed
// shards are built from all their files.
func previous(ctx context.Context, store *blob.Bucket, tenant, repo string, load index.ParseFunc) index.Previous {
	prev := index.Previous{Shards: index.PreviousShards(ctx, store, tenant, repo), Load: load}
	if len(prev.Shards) == 0 {
		return prev
	}
	h, err := index.ReadHead(ctx, store, tenant, repo)
	if err != nil {
		return prev
	}
	if m, err := ReadManifest(ctx, store, ManifestKey(tenant, repo, h.Commit)); err == nil && m.Tenant == tenant {
		prev.Files = m.Files
	}
	return prev
}

// RepoName names a repository after its location the way source.Open does:
// "owner/name" for URLs with a host, the directory name for paths (proj
// for proj, proj/.git and proj.git).
func RepoName(location string) string { return source.RepoName(location) }

// errChanged reports a plain-directory file that changed after its snapshot.
var errChanged = errors.New("file changed since the snapshot was taken")
