package index

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strconv"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/bm25"
	"codectx/pkg/chunk"
	"codectx/pkg/codectx"
	"codectx/pkg/graph"
	"codectx/pkg/mapfile"
	"codectx/pkg/segment"
	"codectx/pkg/source"
	"codectx/pkg/tokenize"
)

// DefaultShardBytes is the source size a shard is cut at: the files of a
// snapshot, in path order, go to one shard until their bytes reach it.
const DefaultShardBytes = 16 << 20

// shardVersion changes when a shard's content for the same files would;
// it is part of every shard's digest (and so of its key).
const shardVersion = "2" // 2: the in-place format (CTXSHD2)

// ShardKey is where a shard of tenant/repo is stored, by the digest of its
// inputs: the same files give the same key, so a shard that exists is
// reused rather than built again.
func ShardKey(tenant, repo, digest string) string {
	return RepoPrefix("shards/", tenant, repo) + digest + ".shard"
}

// ShardPrefix is the prefix of the shards of tenant/repo.
func ShardPrefix(tenant, repo string) string { return RepoPrefix("shards/", tenant, repo) }

// ShardStats reports what a sharded build wrote.
type ShardStats struct {
	Shards  int `json:"shards"`
	Written int `json:"shards_written"` // shards built and written by this build; the others were reused
}

// group is one planned shard: files[lo:hi] of the manifest.
type group struct {
	lo, hi int
	first  string
}

// planShards cuts the manifest's files (sorted by path) into shards. The
// ranges of the previous snapshot's shards are kept (a file goes to the
// shard whose range holds its path), so a change to one file changes one
// shard's inputs; a range that grew past twice target is cut again and an
// emptied one dropped. Without a previous list the files are cut every
// target bytes.
func planShards(files []source.File, prev []segment.ShardRef, target int64) []group {
	var out []group
	cut := func(lo, hi int, first string) {
		var acc int64
		start := lo
		for i := lo; i < hi; i++ {
			acc += files[i].Size
			if acc >= target && i+1 < hi {
				out = append(out, group{start, i + 1, first})
				start, acc, first = i+1, 0, files[i+1].Path
			}
		}
		if start < hi {
			out = append(out, group{start, hi, first})
		}
	}
	if len(prev) == 0 || prev[0].First != "" {
		cut(0, len(files), "")
		return out
	}
	i := 0
	for r, ref := range prev {
		lo := i
		for i < len(files) && (r+1 == len(prev) || files[i].Path < prev[r+1].First) {
			i++
		}
		if lo == i {
			continue
		}
		first := ref.First
		if len(out) == 0 {
			first = ""
		}
		var bytes int64
		for _, f := range files[lo:i] {
			bytes += f.Size
		}
		if bytes > 2*target {
			cut(lo, i, first)
			continue
		}
		out = append(out, group{lo, i, first})
	}
	return out
}

// shardDigest names a shard's inputs: the shard format and parser
// versions and each file's path, blob and size.
func shardDigest(files []source.File) string {
	h := sha256.New()
	h.Write([]byte("codectx shard " + shardVersion + " chunk " + chunk.Version + "\n"))
	for _, f := range files {
		h.Write([]byte(f.Path + "\x00" + f.Blob + "\x00" + strconv.FormatInt(f.Size, 10) + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// assembleShard builds one shard from its files' parse results, as
// Assemble does for a whole snapshot, with ids local to the shard.
func assembleShard(files []source.File, results []Parsed) *segment.Shard {
	sh := &segment.Shard{Stats: segment.ShardStats{
		FilesByLanguage: map[string]int{}, ChunksByKind: map[string]int{}, Skipped: map[string]int{}, Degraded: map[string]int{},
	}}
	n := 0
	for _, p := range results {
		if p.Result.Skip == "" {
			n += len(p.Result.Chunks)
		}
	}
	sh.Chunks = make([]codectx.Chunk, 0, n)
	for i, p := range results {
		file := files[i]
		sh.Stats.Bytes += file.Size
		if p.Result.Skip != "" {
			sh.Stats.Skipped[p.Result.Skip]++
			continue
		}
		if p.Result.Degraded != "" {
			sh.Stats.Degraded[p.Result.Degraded]++
		}
		sh.Stats.FilesByLanguage[string(p.Result.Language)]++
		f := segment.File{Path: file.Path, Language: p.Result.Language, Blob: file.Blob, Size: file.Size}
		fin := graph.FileInput{Path: file.Path, Language: p.Result.Language, Package: p.Result.Package, Imports: p.Result.Imports}
		for _, c := range p.Result.Chunks {
			c.Path = file.Path
			id := len(sh.Chunks)
			sh.Chunks = append(sh.Chunks, c)
			f.Chunks = append(f.Chunks, id)
			sh.Stats.ChunksByKind[string(c.Kind)]++
			if c.Kind != codectx.KindWindow {
				fin.Symbols = append(fin.Symbols, graph.SymbolInput{ID: id, Name: c.Name, Kind: c.Kind, Calls: c.Calls, Types: c.Types})
			}
		}
		sh.Files = append(sh.Files, f)
		if isCode(p.Result.Language) {
			sh.GraphIn = append(sh.GraphIn, fin)
		}
	}
	sh.Stats.Files = len(sh.Files)
	sh.Stats.Chunks = len(sh.Chunks)
	b, fb := bm25.NewBuilder(), bm25.NewBuilder()
	for _, f := range sh.Files {
		var whole [bm25.NumFields][]string
		whole[bm25.FieldPath] = tokenize.Tokens(f.Path)
		for _, id := range f.Chunks {
			toks := Tokens(sh.Chunks[id])
			b.AddTokens(toks)
			for fld := bm25.Field(0); fld < bm25.NumFields; fld++ {
				if fld != bm25.FieldPath {
					whole[bm25.FieldBody] = append(whole[bm25.FieldBody], toks[fld]...)
				}
			}
		}
		fb.AddTokens(whole)
	}
	sh.BM25, sh.FileBM25 = b.Build(), fb.Build()
	return sh
}

// PreviousShards returns the shards of the index HEAD names, when it is a
// shard list; nil otherwise (no HEAD, a single segment, an unreadable
// object: the build then plans its shards afresh).
func PreviousShards(ctx context.Context, store *blob.Bucket, tenant, repo string) []segment.ShardRef {
	h, err := ReadHead(ctx, store, tenant, repo)
	if err != nil || h.Segment == "" {
		return nil
	}
	data, err := store.Get(ctx, h.Segment)
	if err != nil || !segment.IsShardList(data) {
		return nil
	}
	l, err := segment.LoadShardList(data, false)
	if err != nil {
		return nil
	}
	return l.Shards
}

// ParseFunc returns the parse results of files (results[i] of files[i]).
// BuildShards calls it once per shard it builds; reused, when not nil,
// once per shard it reuses.
type ParseFunc func(ctx context.Context, files []source.File) ([]Parsed, error)

// BuildShards builds the sharded index of a manifest and writes its shards,
// one at a time: each is parsed (through parse), assembled, written and
// dropped before the next, so memory holds one shard and the graph input,
// not the repository. A shard whose inputs did not change since a stored
// one (same key) is not built again: only its counts and graph input are
// read. The returned list (with the graph) is not written: write it at the
// segment key, then move HEAD (Publish). A shard that fails to write
// fails the build, and nothing names the shards already written.
func BuildShards(ctx context.Context, store *blob.Bucket, m *Manifest, prev []segment.ShardRef, target int64, parse ParseFunc, reused func([]source.File)) (*segment.ShardList, *Summary, ShardStats, error) {
	var ss ShardStats
	if target <= 0 {
		target = DefaultShardBytes
	}
	st := &Summary{
		Tenant: m.Tenant, Repo: m.Repo, Commit: m.Commit,
		FilesByLanguage: map[string]int{}, ChunksByKind: map[string]int{},
		Edges: map[string]int{}, Skipped: map[string]int{}, Degraded: map[string]int{},
	}
	for _, s := range m.Skipped {
		st.Skipped[s.Reason]++
	}
	list := &segment.ShardList{History: m.History}
	gin := graph.Input{GoModule: m.GoModule, GoModules: m.GoModules}
	add := func(sh *segment.Shard, base int) {
		for _, fin := range sh.GraphIn {
			for j := range fin.Symbols {
				fin.Symbols[j].ID += base
			}
			gin.Files = append(gin.Files, fin)
		}
		s := sh.Stats
		st.Files += s.Files
		st.Chunks += s.Chunks
		st.Bytes += s.Bytes
		for _, mm := range []struct{ to, from map[string]int }{
			{st.FilesByLanguage, s.FilesByLanguage}, {st.ChunksByKind, s.ChunksByKind}, {st.Skipped, s.Skipped}, {st.Degraded, s.Degraded},
		} {
			for k, v := range mm.from {
				mm.to[k] += v
			}
		}
	}
	for _, g := range planShards(m.Files, prev, target) {
		if err := ctx.Err(); err != nil {
			return nil, nil, ss, err
		}
		files := m.Files[g.lo:g.hi]
		digest := shardDigest(files)
		key := ShardKey(m.Tenant, m.Repo, digest)
		base := st.Chunks
		var sh *segment.Shard
		var size int
		data, err := store.Get(ctx, key)
		if err == nil {
			sh, err = segment.LoadShard(data, false)
		}
		if err == nil {
			st.Reused += len(files)
			size = len(data)
			if reused != nil {
				reused(files)
			}
		} else {
			if !errors.Is(err, blob.ErrNotFound) && !errors.Is(err, segment.ErrCorrupt) {
				return nil, nil, ss, fmt.Errorf("index: read shard %s: %w", key, err)
			}
			results, err := parse(ctx, files)
			if err != nil {
				return nil, nil, ss, err
			}
			for _, p := range results {
				if p.Reused {
					st.Reused++
				} else {
					st.Parsed++
				}
			}
			sh = assembleShard(files, results)
			results = nil
			data, err := sh.MarshalBinary()
			if err != nil {
				return nil, nil, ss, fmt.Errorf("index: encode shard: %w", err)
			}
			if err := store.Put(ctx, key, data); err != nil {
				return nil, nil, ss, fmt.Errorf("index: write shard: %w", err)
			}
			size = len(data)
			ss.Written++
			// Collect the shard just written before the next is built: the
			// collector's next goal then starts from what the build keeps
			// (the graph input), not from this shard's peak.
			sh.Chunks, sh.Files, sh.BM25, sh.FileBM25 = nil, nil, nil, nil
			data = nil
			runtime.GC()
		}
		list.Shards = append(list.Shards, segment.ShardRef{Key: key, First: g.first, Digest: digest, Files: sh.Stats.Files, Chunks: sh.Stats.Chunks, Bytes: size})
		add(sh, base)
		st.SegmentBytes += size
	}
	ss.Shards = len(list.Shards)
	list.Graph = graph.Build(gin)
	gs := list.Graph.Stats()
	st.Edges["import"] = gs.ImportEdges
	st.Edges["call"] = gs.CallEdges
	st.Edges["type"] = gs.TypeEdges
	list.Meta = segment.Meta{Tenant: m.Tenant, Repo: m.Repo, Commit: m.Commit, Built: time.Now().UTC().Format(time.RFC3339), Skipped: st.Skipped, Degraded: st.Degraded}
	return list, st, ss, nil
}

// LoadSegment loads the index stored at key: a segment, or a shard list
// whose shards are joined (segment.Joiner) where they lie: mapped from the
// store's files when it keeps objects as local files, else read into the
// heap (LoadSegmentWith can map them from a local cache instead).
func LoadSegment(ctx context.Context, store *blob.Bucket, key string) (*segment.Segment, error) {
	return LoadSegmentWith(ctx, store, key, LoadOptions{})
}

// LoadOptions say how LoadSegmentWith gets a shard list's shards.
type LoadOptions struct {
	// Cache, when set, holds the shards of a store without local files
	// (an object store): each is downloaded once and mapped from there.
	Cache *ShardCache
	// NoMap reads every shard into the heap.
	NoMap bool
}

// LoadSegmentWith is LoadSegment with options. The segment holds the
// mappings of its shards: Release gives them back (a cache evicting it).
func LoadSegmentWith(ctx context.Context, store *blob.Bucket, key string, opt LoadOptions) (*segment.Segment, error) {
	data, err := store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("index: read segment %s: %w", key, err)
	}
	if !segment.IsShardList(data) {
		return segment.Load(data)
	}
	l, err := segment.LoadShardList(data, true)
	if err != nil {
		return nil, err
	}
	data = nil
	j := segment.NewJoiner(l)
	for _, ref := range l.Shards {
		if err := addShard(ctx, j, store, ref.Key, opt); err != nil {
			j.Release()
			return nil, err
		}
	}
	return j.Segment()
}

// addShard adds the shard at key to j: mapped from the store's file or
// from the cache, or read.
func addShard(ctx context.Context, j *segment.Joiner, store *blob.Bucket, key string, opt LoadOptions) error {
	if !opt.NoMap {
		path, local, err := store.LocalPath(key)
		if err != nil {
			return fmt.Errorf("index: shard %s: %w", key, err)
		}
		var f *mapfile.File
		switch {
		case local:
			if f, err = mapfile.Open(path); errors.Is(err, fs.ErrNotExist) {
				err = fmt.Errorf("%w: %v", blob.ErrNotFound, err)
			}
		case opt.Cache != nil:
			f, err = opt.Cache.Open(ctx, store, key)
		}
		if err != nil {
			return fmt.Errorf("index: read shard %s: %w", key, err)
		}
		if f != nil {
			if err := j.AddFile(f); err != nil {
				if opt.Cache != nil && !local {
					opt.Cache.Drop(key) // fetched again next time
				}
				return fmt.Errorf("index: %w", err)
			}
			return nil
		}
	}
	b, err := store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("index: read shard %s: %w", key, err)
	}
	if err := j.Add(b); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	return nil
}

// ReferencedFiles calls f for each file of the index stored at key (a
// segment or a shard list's shards), with the tenant it belongs to: what
// the parse-cache GC keeps.
func ReferencedFiles(ctx context.Context, store *blob.Bucket, key string, f func(tenant string, file segment.File)) error {
	data, err := store.Get(ctx, key)
	if err != nil {
		return err
	}
	if !segment.IsShardList(data) {
		seg, err := segment.Load(data)
		if err != nil {
			return err
		}
		for _, file := range seg.Files {
			f(seg.Meta.Tenant, file)
		}
		return nil
	}
	l, err := segment.LoadShardList(data, false)
	if err != nil {
		return err
	}
	for _, ref := range l.Shards {
		b, err := store.Get(ctx, ref.Key)
		if err != nil {
			return fmt.Errorf("shard %s: %w", ref.Key, err)
		}
		sh, err := segment.LoadShard(b, false)
		if err != nil {
			return fmt.Errorf("shard %s: %w", ref.Key, err)
		}
		for _, file := range sh.Files {
			f(l.Meta.Tenant, file)
		}
	}
	return nil
}

// ShardKeys returns the shard keys the index stored at key references (none
// for a single segment).
func ShardKeys(ctx context.Context, store *blob.Bucket, key string) ([]string, error) {
	data, err := store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if !segment.IsShardList(data) {
		return nil, nil
	}
	l, err := segment.LoadShardList(data, false)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(l.Shards))
	for i, ref := range l.Shards {
		keys[i] = ref.Key
	}
	return keys, nil
}

// BuildShardedSegment builds the snapshot's index as shards of
// opt.ShardBytes (parse results cached in store, shards written to
// shardStore, nothing published) and returns it joined from the stored
// shards as a query server loads it: what codectx eval --shard-bytes
// measures against the single segment of BuildSegment.
func BuildShardedSegment(ctx context.Context, store, shardStore *blob.Bucket, snap *source.Snapshot, name string, opt Options) (*segment.Segment, *Summary, error) {
	start := time.Now()
	if opt.Tenant == "" {
		opt.Tenant = DefaultTenant
	}
	m, err := ReadManifest(ctx, snap, opt.Tenant, name, opt.HistoryLimit)
	if err != nil {
		return nil, nil, err
	}
	p := newParser(store, snap, opt, start)
	defer p.stop()
	list, st, ss, err := BuildShards(ctx, shardStore, m, nil, opt.ShardBytes, p.parse, p.skip)
	if err != nil {
		return nil, nil, err
	}
	data, err := list.MarshalBinary()
	if err != nil {
		return nil, nil, err
	}
	key := SegmentKey(opt.Tenant, name, m.Commit)
	if err := shardStore.Put(ctx, key, data); err != nil {
		return nil, nil, err
	}
	seg, err := LoadSegment(ctx, shardStore, key)
	if err != nil {
		return nil, nil, err
	}
	st.Shards, st.ShardsWritten = ss.Shards, ss.Written
	st.Seconds = time.Since(start).Seconds()
	return seg, st, nil
}
