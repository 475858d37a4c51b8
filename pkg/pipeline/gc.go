package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"codectx/pkg/blob"
	"codectx/pkg/dense"
	"codectx/pkg/index"
	"codectx/pkg/segment"
)

// GCStats reports a parse-cache collection.
type GCStats struct {
	Roots   int `json:"roots"`   // manifests and segments whose files were kept
	Cached  int `json:"cached"`  // parse-cache entries found
	Kept    int `json:"kept"`    // entries a root references
	Deleted int `json:"deleted"` // entries removed (or, with dry run, that would be)
}

// GCOptions configure CollectParseCache.
type GCOptions struct {
	DryRun       bool // count what would be deleted, delete nothing
	AllowNoRoots bool // empty a cache that no manifest or segment references
	// Collection, when set, is the one vector collection whose cached
	// embeddings CollectEmbeddingCache keeps (those of other models go,
	// referenced or not): the model the servers embed with.
	Collection string
}

// ErrNoRoots is returned by CollectParseCache for a store with cached
// results and no manifest or segment, unless AllowNoRoots.
var ErrNoRoots = errors.New("gc: cached parse results but no manifest or segment")

// CollectParseCache deletes the parse-cache entries that no stored
// manifest or segment references: results of files that no snapshot of
// any tenant still contains, and results of other parser versions or of the
// shared layout before the cache was per tenant. Each entry is live for the
// tenant of the manifest or segment that lists its file. The cache is
// shared by content across a tenant's repositories, so only a store-wide
// pass can tell what is unused; per-repository GC (the
// snapshot workflow's last step) removes manifests and segments, this
// removes what they leave behind.
//
// It is safe beside running indexers: the cache is listed before the roots
// are read, and a snapshot's manifest is stored before any of its files is
// parsed, so an entry written during the pass is either not a candidate or
// marked by its manifest. A library build (codectx index) keeps its results
// in memory, so at worst it loses reuse, never correctness.
//
// A store that holds cached results but no root at all (codectx eval keeps
// only a cache) would lose everything: unless opt.AllowNoRoots, nothing is
// deleted and ErrNoRoots is returned with the counts.
func CollectParseCache(ctx context.Context, store *blob.Bucket, opt GCOptions) (GCStats, error) {
	var st GCStats
	cached, err := store.List(ctx, "parse/")
	if err != nil {
		return st, fmt.Errorf("gc: list parse cache: %w", err)
	}
	st.Cached = len(cached)
	live := map[string]bool{}
	mark := func(tenant, path, blobHash string) {
		live[index.ParseKey(tenant, path, blobHash)] = true
		if len(blobHash) > 2 {
			live[index.ContentKey(blobHash)] = true
		}
	}
	manifests, err := store.List(ctx, "manifests/")
	if err != nil {
		return st, fmt.Errorf("gc: list manifests: %w", err)
	}
	for _, k := range manifests {
		if !strings.HasSuffix(k, ".json") {
			continue
		}
		m, err := ReadManifest(ctx, store, k)
		if errors.Is(err, blob.ErrNotFound) {
			continue // collected by its repository's GC (or a DELETE) meanwhile
		}
		if err != nil {
			return st, fmt.Errorf("gc: %w", err)
		}
		for _, f := range m.Files {
			mark(m.Tenant, f.Path, f.Blob)
		}
		st.Roots++
	}
	segs, err := store.List(ctx, "segments/")
	if err != nil {
		return st, fmt.Errorf("gc: list segments: %w", err)
	}
	for _, k := range segs {
		if !strings.HasSuffix(k, ".seg") {
			continue
		}
		// A segment or shard list (and its shards) that cannot be read
		// cannot say what it references: collect nothing rather than guess.
		err := index.ReferencedFiles(ctx, store, k, func(tenant string, f segment.File) {
			mark(tenant, f.Path, f.Blob)
		})
		if errors.Is(err, blob.ErrNotFound) {
			if ok, xerr := store.Exists(ctx, k); xerr == nil && !ok {
				continue // collected with its shards meanwhile
			}
		}
		if err != nil {
			return st, fmt.Errorf("gc: %s: %w", k, err)
		}
		st.Roots++
	}
	if st.Roots == 0 && st.Cached > 0 && !opt.AllowNoRoots {
		return st, ErrNoRoots
	}
	err = sweep(ctx, store, cached, func(k string) bool { return live[k] }, opt.DryRun, &st)
	return st, err
}

// CollectEmbeddingCache deletes the embedding-cache entries (embeddings/,
// per model and tenant) that nothing stored needs: a vector is live for a
// tenant while a segment of that tenant holds a chunk of its text hash
// (every kept snapshot, of `up` and of the library path), a vector set
// lists it, or an embed plan of a snapshot being indexed does. The GC of
// each repository (the snapshot workflow's last step) removes the
// segments, vector sets and plans of the commits it no longer keeps; this
// removes the vectors only they needed. A hash live for a tenant keeps
// its vectors of every model.
//
// It is safe beside running indexers in the same way as
// CollectParseCache: the cache is listed before the roots are read, and a
// snapshot's embed plan is stored before its chunks are embedded. A
// vector the planner found cached just before the pass may still go; its
// snapshot then stores the chunk without a point (StoreVectors counts it
// missing) and the next snapshot embeds it again.
func CollectEmbeddingCache(ctx context.Context, store *blob.Bucket, opt GCOptions) (GCStats, error) {
	var st GCStats
	cached, err := store.List(ctx, "embeddings/")
	if err != nil {
		return st, fmt.Errorf("gc: list embedding cache: %w", err)
	}
	st.Cached = len(cached)
	live := map[string]bool{} // tenant + "/" + hash
	segs, err := store.List(ctx, "segments/")
	if err != nil {
		return st, fmt.Errorf("gc: list segments: %w", err)
	}
	for _, k := range segs {
		if !strings.HasSuffix(k, ".seg") {
			continue
		}
		// A segment or shard list that cannot be read cannot say what it
		// references: collect nothing rather than guess.
		seg, err := index.LoadSegment(ctx, store, k)
		if errors.Is(err, blob.ErrNotFound) {
			if ok, xerr := store.Exists(ctx, k); xerr == nil && !ok {
				continue // collected with its shards meanwhile
			}
		}
		if err != nil {
			return st, fmt.Errorf("gc: %s: %w", k, err)
		}
		for _, c := range seg.Chunks {
			live[seg.Meta.Tenant+"/"+dense.Hash(c)] = true
		}
		seg.Release() // its mapped shards' pages can go
		st.Roots++
	}
	for _, root := range []string{"vectorsets/", "embedplans/"} {
		keys, err := store.List(ctx, root)
		if err != nil {
			return st, fmt.Errorf("gc: list %s: %w", root, err)
		}
		for _, k := range keys {
			if !strings.HasSuffix(k, ".json") {
				continue
			}
			tenant, _, ok := strings.Cut(strings.TrimPrefix(k, root), "/")
			if !ok {
				continue
			}
			data, err := store.Get(ctx, k)
			if errors.Is(err, blob.ErrNotFound) {
				continue // collected by its repository's GC meanwhile
			}
			if err != nil {
				return st, fmt.Errorf("gc: read %s: %w", k, err)
			}
			var hashes []string
			if root == "vectorsets/" {
				err = json.Unmarshal(data, &hashes)
			} else {
				var p EmbedPlan
				err = json.Unmarshal(data, &p)
				tenant = p.Tenant
				for _, pt := range p.Points {
					hashes = append(hashes, pt.Hash)
				}
			}
			if err != nil {
				return st, fmt.Errorf("gc: decode %s: %w", k, err)
			}
			for _, h := range hashes {
				live[tenant+"/"+h] = true
			}
			st.Roots++
		}
	}
	if st.Roots == 0 && st.Cached > 0 && !opt.AllowNoRoots {
		return st, ErrNoRoots
	}
	err = sweep(ctx, store, cached, func(k string) bool {
		// embeddings/COLLECTION/@TENANT/HH/HASH
		parts := strings.Split(k, "/")
		return len(parts) == 5 && strings.HasPrefix(parts[2], "@") && live[parts[2][1:]+"/"+parts[4]] &&
			(opt.Collection == "" || parts[1] == opt.Collection)
	}, opt.DryRun, &st)
	return st, err
}

// sweep deletes the cached keys keep does not keep (only counts them on a
// dry run), counting kept and deleted in st.
func sweep(ctx context.Context, store *blob.Bucket, cached []string, keep func(string) bool, dryRun bool, st *GCStats) error {
	for _, k := range cached {
		if keep(k) {
			st.Kept++
			continue
		}
		if !dryRun {
			if err := store.Delete(ctx, k); err != nil {
				return fmt.Errorf("gc: delete %s: %w", k, err)
			}
		}
		st.Deleted++
	}
	return nil
}

// CollectShards deletes the shards of tenant/repo that no stored shard list
// of the repository names (the kept snapshots' lists are all that is left
// once GC has deleted the others). The lists are read after the shards are
// listed: a shard written meanwhile by a build is either not a candidate or
// named by a list; only a build running beside GC whose list is not yet
// written could lose a shard, and the snapshot workflow of a repository
// runs one build at a time, GC after it.
func CollectShards(ctx context.Context, store *blob.Bucket, tenant, repo string) (int, error) {
	return CollectShardsUnless(ctx, store, tenant, repo, nil)
}

// CollectShardsUnless is CollectShards asking stop (when set) once it knows
// which shards it would delete, before it deletes any: a GC whose
// snapshot's repository was deleted since stops there.
func CollectShardsUnless(ctx context.Context, store *blob.Bucket, tenant, repo string, stop func() bool) (int, error) {
	shards, err := store.List(ctx, index.ShardPrefix(tenant, repo))
	if err != nil {
		return 0, err
	}
	return collectShards(ctx, store, tenant, repo, shards, stop)
}

// collectShards deletes those of the shards of tenant/repo named (keys
// from the shard prefix) that no stored shard list of the repository
// names, asking stop as CollectShardsUnless does.
func collectShards(ctx context.Context, store *blob.Bucket, tenant, repo string, shards []string, stop func() bool) (int, error) {
	if len(shards) == 0 {
		return 0, nil
	}
	prefix := index.ShardPrefix(tenant, repo)
	segPrefix := index.RepoPrefix("segments/", tenant, repo)
	segs, err := store.List(ctx, segPrefix)
	if err != nil {
		return 0, err
	}
	live := map[string]bool{}
	for _, k := range segs {
		if name := strings.TrimPrefix(k, segPrefix); strings.Contains(name, "/") || !strings.HasSuffix(name, ".seg") {
			continue
		}
		keys, err := index.ShardKeys(ctx, store, k)
		if err != nil {
			// A list that cannot be read cannot say what it keeps.
			return 0, fmt.Errorf("gc shards: %s: %w", k, err)
		}
		for _, sk := range keys {
			live[sk] = true
		}
	}
	var drop []string
	for _, k := range shards {
		if name := strings.TrimPrefix(k, prefix); strings.Contains(name, "/") || live[k] {
			continue
		}
		drop = append(drop, k)
	}
	if len(drop) > 0 && stop != nil && stop() {
		return 0, nil
	}
	n := 0
	for _, k := range drop {
		if err := store.Delete(ctx, k); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
