package index

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/bm25"
	"codectx/pkg/chunk"
	"codectx/pkg/codectx"
	"codectx/pkg/graph"
	"codectx/pkg/mapfile"
	"codectx/pkg/segment"
	"codectx/pkg/source"
)

// DefaultShardBytes is the source size a shard is cut at: the files of a
// snapshot, in path order, go to one shard until their bytes reach it.
// 4 MiB against 16 MiB on $GOROOT/src (docs/benchmarks.md): a one-file
// push 0.74-0.93x at p50, a full index's peak RSS 251-253 against
// 277-286 MB, a single-client query 1.10x (4.6 against 4.2 ms at 106k
// chunks).
const DefaultShardBytes = 4 << 20

// shardVersion changes when a shard's content for the same files would;
// it is part of every shard's digest (and so of its key).
const shardVersion = "3" // 2: the in-place format (CTXSHD2); 3: skipped and degraded files named

// collectShardBytes is the encoded size from which a build collects
// garbage after writing a shard.
const collectShardBytes = 1 << 20

// collect runs a full collection (and trims the C heap) in the
// background; the channel is closed when it is done.
func collect() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.GC()
		trimCHeap()
	}()
	return done
}

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
	Written int `json:"shards_written"`           // shards built and written by this build; the others were reused
	Spliced int `json:"shards_spliced,omitempty"` // of those written, spliced from a stored shard (BuildShardsFrom)
}

// group is one planned shard: files[lo:hi] of the manifest.
type group struct {
	lo, hi int
	first  string
	prev   int // the previous shard whose range it keeps, -1 if cut afresh
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
				out = append(out, group{start, i + 1, first, -1})
				start, acc, first = i+1, 0, files[i+1].Path
			}
		}
		if start < hi {
			out = append(out, group{start, hi, first, -1})
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
		out = append(out, group{lo, i, first, r})
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
		SkippedFiles: map[string]string{}, DegradedFiles: map[string]string{},
	}}
	n := 0
	for _, p := range results {
		if p.Result.Skip == "" {
			n += len(p.Result.Chunks)
		}
	}
	sh.Chunks = make([]codectx.Chunk, 0, n)
	bs := newBuilders()
	for i, p := range results {
		countFile(&sh.Stats, files[i].Path, files[i].Size, p.Result, 1)
		addParsed(sh, bs, files[i], p.Result)
	}
	sh.Stats.Files = len(sh.Files)
	sh.Stats.Chunks = len(sh.Chunks)
	sh.BM25, sh.FileBM25 = bs.b.Build(), bs.fb.Build()
	return sh
}

// countFile adds (sign 1) or takes off (sign -1) the counts of the file at
// path, of size bytes, parsed as r, as a shard's statistics hold them
// (Files and Chunks are set from the shard's lists).
func countFile(st *segment.ShardStats, path string, size int64, r chunk.Result, sign int) {
	st.Bytes += int64(sign) * size
	mark := func(m map[string]string, reason string) {
		if sign > 0 {
			m[path] = reason
		} else {
			delete(m, path)
		}
	}
	if r.Skip != "" {
		st.Skipped[r.Skip] += sign
		mark(st.SkippedFiles, r.Skip)
		return
	}
	if r.Degraded != "" {
		st.Degraded[r.Degraded] += sign
		mark(st.DegradedFiles, r.Degraded)
	}
	st.FilesByLanguage[string(r.Language)] += sign
	for _, c := range r.Chunks {
		st.ChunksByKind[string(c.Kind)] += sign
	}
}

// builders are a shard's chunk and whole-file BM25 builders, sharing one
// dictionary (each word of the text tokenized once, each term looked up
// once), and the term buffers addParsed reuses from file to file.
type builders struct {
	b, fb *bm25.Builder
	ids   [bm25.NumFields][]uint32 // a chunk's fields
	whole [bm25.NumFields][]uint32 // its file's fields
}

func newBuilders() *builders {
	d := bm25.NewDict()
	return &builders{b: bm25.NewBuilderDict(d), fb: bm25.NewBuilderDict(d)}
}

// add adds the documents of one file's chunks (their Path set) to the
// chunk index, and the file's to the whole-file index: its path, and the
// terms of every other field of its chunks as its body.
func (bs *builders) add(path string, chunks []codectx.Chunk) {
	d := bs.b.Dict()
	pathIDs := d.AppendTerms(bs.whole[bm25.FieldPath][:0], path)
	bs.whole[bm25.FieldPath] = pathIDs
	body := bs.whole[bm25.FieldBody][:0]
	ids := &bs.ids
	for i := range chunks {
		c := &chunks[i]
		ids[bm25.FieldName] = d.AppendTerms(ids[bm25.FieldName][:0], c.Name)
		ids[bm25.FieldSignature] = d.AppendTerms(ids[bm25.FieldSignature][:0], c.Signature)
		ids[bm25.FieldDoc] = d.AppendTerms(ids[bm25.FieldDoc][:0], c.Doc)
		ids[bm25.FieldBody] = d.AppendTerms(ids[bm25.FieldBody][:0], c.Body)
		if c.Path == path {
			ids[bm25.FieldPath] = pathIDs
		} else {
			ids[bm25.FieldPath] = d.AppendTerms(nil, c.Path)
		}
		bs.b.AddIDs(ids)
		for fld := bm25.Field(0); fld < bm25.NumFields; fld++ {
			if fld != bm25.FieldPath {
				body = append(body, ids[fld]...)
			}
		}
	}
	bs.whole[bm25.FieldBody] = body
	bs.fb.AddIDs(&bs.whole)
}

// addParsed appends one file parsed as r to sh (its chunks, its file entry
// and its graph input, with ids following those already in sh) and its
// documents to the chunk and whole-file BM25 builders. A skipped file adds
// nothing.
func addParsed(sh *segment.Shard, bs *builders, file source.File, r chunk.Result) {
	if r.Skip != "" {
		return
	}
	f := segment.File{Path: file.Path, Language: r.Language, Blob: file.Blob, Size: file.Size}
	fin := graph.FileInput{Path: file.Path, Language: r.Language, Package: r.Package, Imports: r.Imports}
	first := len(sh.Chunks)
	if len(r.Chunks) > 0 {
		f.Chunks = make([]int, 0, len(r.Chunks))
	}
	for _, c := range r.Chunks {
		c.Path = file.Path
		id := len(sh.Chunks)
		sh.Chunks = append(sh.Chunks, c)
		f.Chunks = append(f.Chunks, id)
		if c.Kind != codectx.KindWindow {
			fin.Symbols = append(fin.Symbols, graph.SymbolInput{ID: id, Name: c.Name, Kind: c.Kind, Calls: c.Calls, Types: c.Types})
		}
	}
	bs.add(file.Path, sh.Chunks[first:])
	sh.Files = append(sh.Files, f)
	if isCode(r.Language) {
		sh.GraphIn = append(sh.GraphIn, fin)
	}
}

// errNoSplice says a shard cannot be spliced from the stored one: it is
// built from all its files instead.
var errNoSplice = errors.New("index: shard not spliced")

// spliceShard builds the shard of files (one range of the manifest) from
// old, the stored shard of oldFiles (the same range of the previous
// snapshot's manifest): a file whose path, blob and size did not change
// keeps its chunks, file entry, graph input and BM25 postings (bm25.Slice,
// bm25.Concat: nothing of it is read from the parse cache or tokenized
// again); the others are parsed (parse), and the counts of the old files
// dropped are taken off with their old parse results (loadOld). The shard
// is the one assembleShard builds from all the files' results, byte for
// byte (TestSpliceShard). It returns the results parse gave.
func spliceShard(ctx context.Context, old *segment.Shard, oldFiles, files []source.File, parse, loadOld ParseFunc) (*segment.Shard, []Parsed, error) {
	before := make(map[string]source.File, len(oldFiles))
	for _, f := range oldFiles {
		before[f.Path] = f
	}
	keep := make([]bool, len(files))
	kept := map[string]bool{}
	var changed []source.File
	for i, f := range files {
		if o, ok := before[f.Path]; ok && o == f {
			keep[i], kept[f.Path] = true, true
		} else {
			changed = append(changed, f)
		}
	}
	if len(kept) == 0 {
		return nil, nil, errNoSplice
	}
	var dropped []source.File
	for _, f := range oldFiles {
		if !kept[f.Path] {
			dropped = append(dropped, f)
		}
	}
	oldRes, err := loadOld(ctx, dropped)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errNoSplice, err)
	}
	results, err := parse(ctx, changed)
	if err != nil {
		return nil, nil, err
	}
	st := old.Stats
	st.FilesByLanguage, st.ChunksByKind, st.Skipped, st.Degraded = maps.Clone(st.FilesByLanguage), maps.Clone(st.ChunksByKind), maps.Clone(st.Skipped), maps.Clone(st.Degraded)
	st.SkippedFiles, st.DegradedFiles = maps.Clone(st.SkippedFiles), maps.Clone(st.DegradedFiles)
	for _, m := range []*map[string]int{&st.FilesByLanguage, &st.ChunksByKind, &st.Skipped, &st.Degraded} {
		if *m == nil {
			*m = map[string]int{}
		}
	}
	for _, m := range []*map[string]string{&st.SkippedFiles, &st.DegradedFiles} {
		if *m == nil {
			*m = map[string]string{}
		}
	}
	for i, f := range dropped {
		countFile(&st, f.Path, f.Size, oldRes[i].Result, -1)
	}
	for i, f := range changed {
		countFile(&st, f.Path, f.Size, results[i].Result, 1)
	}
	// A shard built before the files were named (or whose names do not
	// match its counts) is built again: a splice would keep it unnamed.
	if Total(st.Skipped) != len(st.SkippedFiles) || Total(st.Degraded) != len(st.DegradedFiles) {
		return nil, nil, fmt.Errorf("%w: the stored shard does not name its skipped and degraded files", errNoSplice)
	}
	for _, m := range []map[string]int{st.FilesByLanguage, st.ChunksByKind, st.Skipped, st.Degraded} {
		for k, v := range m {
			if v < 0 {
				return nil, nil, fmt.Errorf("%w: counts of the stored shard do not match its files", errNoSplice)
			}
			if v == 0 {
				delete(m, k)
			}
		}
	}
	if st.Bytes < 0 {
		return nil, nil, fmt.Errorf("%w: bytes of the stored shard do not match its files", errNoSplice)
	}

	at := make(map[string]int, len(old.Files))
	for i, f := range old.Files {
		at[f.Path] = i
	}
	gin := make(map[string]int, len(old.GraphIn))
	for i, f := range old.GraphIn {
		gin[f.Path] = i
	}
	// Sized for what the shard holds at most (the old chunks and the new
	// files' chunks), so the copies are not grown by doubling: tens of
	// thousands of chunks in a shard of $GOROOT/src.
	nc := len(old.Chunks)
	for _, r := range results {
		nc += len(r.Result.Chunks)
	}
	sh := &segment.Shard{
		Stats:   st,
		Chunks:  make([]codectx.Chunk, 0, nc),
		Files:   make([]segment.File, 0, len(files)),
		GraphIn: make([]graph.FileInput, 0, len(old.GraphIn)+len(changed)),
	}
	var pieces, filePieces []*bm25.Index
	// The run of kept files being copied: old files fLo..fHi-1, their
	// chunks cLo..cHi-1 (-1 while the run has no chunk).
	fLo, fHi, cLo, cHi := -1, -1, -1, -1
	flushOld := func() error {
		if fLo < 0 {
			return nil
		}
		if cLo >= 0 {
			p, err := bm25.Slice(old.BM25, cLo, cHi)
			if err != nil {
				return err
			}
			pieces = append(pieces, p)
		}
		fp, err := bm25.Slice(old.FileBM25, fLo, fHi)
		if err != nil {
			return err
		}
		filePieces = append(filePieces, fp)
		fLo = -1
		return nil
	}
	var bs *builders // the new files since the last kept one
	flushNew := func() {
		if bs != nil {
			pieces, filePieces = append(pieces, bs.b.Build()), append(filePieces, bs.fb.Build())
			bs = nil
		}
	}
	next := 0
	for i, f := range files {
		if !keep[i] {
			if err := flushOld(); err != nil {
				return nil, nil, fmt.Errorf("%w: %v", errNoSplice, err)
			}
			if bs == nil {
				bs = newBuilders()
			}
			addParsed(sh, bs, f, results[next].Result)
			next++
			continue
		}
		oi, ok := at[f.Path]
		if !ok {
			continue // skipped by its parse: it stays so
		}
		flushNew()
		of := old.Files[oi]
		first := -1 // its first chunk
		for j, id := range of.Chunks {
			if id < 0 || id >= len(old.Chunks) || j > 0 && id != of.Chunks[j-1]+1 {
				return nil, nil, fmt.Errorf("%w: chunk ids of %s", errNoSplice, f.Path)
			}
		}
		if len(of.Chunks) > 0 {
			first = of.Chunks[0]
		}
		if fLo < 0 || oi != fHi || first >= 0 && cHi >= 0 && first != cHi {
			if err := flushOld(); err != nil {
				return nil, nil, fmt.Errorf("%w: %v", errNoSplice, err)
			}
			fLo, fHi, cLo, cHi = oi, oi, -1, -1
		}
		if first >= 0 && cHi < 0 {
			cLo, cHi = first, first
		}
		delta := len(sh.Chunks) - first
		nf := segment.File{Path: of.Path, Language: of.Language, Blob: of.Blob, Size: of.Size}
		for _, id := range of.Chunks {
			nf.Chunks = append(nf.Chunks, id+delta)
			sh.Chunks = append(sh.Chunks, old.Chunks[id])
		}
		if first >= 0 {
			cHi = first + len(of.Chunks)
		}
		fHi = oi + 1
		sh.Files = append(sh.Files, nf)
		if gi, ok := gin[f.Path]; ok {
			fin := old.GraphIn[gi]
			fin.Symbols = slices.Clone(fin.Symbols)
			for j := range fin.Symbols {
				fin.Symbols[j].ID += delta
			}
			sh.GraphIn = append(sh.GraphIn, fin)
		}
	}
	if err := flushOld(); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errNoSplice, err)
	}
	flushNew()
	sh.Stats.Files, sh.Stats.Chunks = len(sh.Files), len(sh.Chunks)
	if len(pieces) == 0 { // no chunk at all
		pieces = []*bm25.Index{bm25.NewBuilder().Build()}
	}
	if len(filePieces) == 0 {
		filePieces = []*bm25.Index{bm25.NewBuilder().Build()}
	}
	if sh.BM25, err = bm25.Concat(pieces); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errNoSplice, err)
	}
	if sh.FileBM25, err = bm25.Concat(filePieces); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errNoSplice, err)
	}
	return sh, results, nil
}

// interner copies strings out of the memory they point into, one copy per
// distinct string.
type interner map[string]string

func (in interner) str(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := in[s]; ok {
		return v
	}
	v := strings.Clone(s)
	in[v] = v
	return v
}

// strs interns ss in place.
func (in interner) strs(ss []string) {
	for i, s := range ss {
		ss[i] = in.str(s)
	}
}

// files interns the package, imports and symbol strings of fs in place
// (their paths are the manifest's, or their own when decoded).
func (in interner) files(fs []graph.FileInput) {
	for i := range fs {
		f := &fs[i]
		f.Package = in.str(f.Package)
		in.strs(f.Imports)
		for j := range f.Symbols {
			s := &f.Symbols[j]
			s.Name = in.str(s.Name)
			in.strs(s.Calls)
			in.strs(s.Types)
		}
	}
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
func BuildShards(ctx context.Context, store *blob.Bucket, m *Manifest, prev []segment.ShardRef, so ShardOptions, parse ParseFunc, reused func([]source.File)) (*segment.ShardList, *Summary, ShardStats, error) {
	return BuildShardsFrom(ctx, store, m, Previous{Shards: prev}, so, parse, reused)
}

// ShardOptions is how BuildShards cuts a snapshot's index, and what it
// bounds.
type ShardOptions struct {
	// Bytes is the source size of a shard; 0 or less: DefaultShardBytes.
	Bytes int64
	// MaxChunks bounds the chunks of the snapshot (ChunkLimit: 0 is
	// MaxChunks, negative no bound).
	MaxChunks int
	// count, when set, is the running count of chunks that parse adds
	// each file's to, under the same bound (a parser's): the build sets
	// it to the chunks of the shards before each parse, so that parse
	// fails once they and its own are over the bound. Without it the
	// bound is checked as each shard is added.
	count *chunkCount
}

// Previous is the index a build starts from: the shards of the list HEAD
// names, and, to splice a changed shard from the stored one, the files of
// the manifest that list was built from and a loader of their cached
// parse results (Load reads the cache only, never parses).
type Previous struct {
	Shards []segment.ShardRef
	Files  []source.File // sorted by path, as a manifest's
	Load   ParseFunc
}

// rangeFiles returns the files of p.Files in the range of shard r, when
// they are the files that shard was built from (their digest is its
// digest); nil otherwise.
func (p Previous) rangeFiles(r int) []source.File {
	if p.Load == nil || p.Files == nil || r < 0 || r >= len(p.Shards) {
		return nil
	}
	lo := 0
	if r > 0 {
		first := p.Shards[r].First
		lo, _ = slices.BinarySearchFunc(p.Files, first, func(f source.File, t string) int { return strings.Compare(f.Path, t) })
	}
	hi := len(p.Files)
	if r+1 < len(p.Shards) {
		next := p.Shards[r+1].First
		hi, _ = slices.BinarySearchFunc(p.Files, next, func(f source.File, t string) int { return strings.Compare(f.Path, t) })
	}
	if lo > hi {
		return nil
	}
	files := p.Files[lo:hi]
	if shardDigest(files) != p.Shards[r].Digest {
		return nil
	}
	return files
}

// splice builds the shard of files from the stored shard of group g's
// previous range (spliceShard), or returns errNoSplice.
func (p Previous) splice(ctx context.Context, store *blob.Bucket, g group, files []source.File, parse ParseFunc) (*segment.Shard, []Parsed, error) {
	oldFiles := p.rangeFiles(g.prev)
	if oldFiles == nil {
		return nil, nil, errNoSplice
	}
	key := p.Shards[g.prev].Key
	data, release, err := readShard(ctx, store, key)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errNoSplice, err)
	}
	defer release()
	// The graph input kept from the build that wrote or reused the shard
	// (the previous one, mostly) is not decoded again.
	var old *segment.Shard
	if in := inputs.get(store, key); in != nil && len(data) == in.size {
		if sum, cerr := segment.CheckShard(data); cerr == nil && sum == in.sum {
			old, err = segment.LoadShardGraphIn(data, cloneGraphIn(in.graphIn))
		}
	}
	if old == nil {
		old, err = segment.LoadShard(data, true)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errNoSplice, err)
	}
	return spliceShard(ctx, old, oldFiles, files, parse, p.Load)
}

// readShard returns the stored shard at key and the end of its use: the
// pages this process maps already when the store keeps the shard as a
// local file that the query side maps (`codectx up`), so that checking an
// unchanged shard copies nothing into the heap; otherwise the shard read
// (a file mapped for the first time would be held until the process
// exits, deleted or not). Mapped data stays readable (mapfile): what
// aliases it may outlive release.
func readShard(ctx context.Context, store *blob.Bucket, key string) ([]byte, func(), error) {
	if p, ok, _ := store.LocalPath(key); ok && mapfile.IsMapped(p) {
		if f, err := mapfile.Open(p); err == nil {
			return f.Data(), f.Release, nil
		}
	}
	data, err := store.Get(ctx, key)
	return data, func() {}, err
}

// BuildShardsFrom is BuildShards starting from prev: a shard whose files
// changed is spliced from the stored shard of the same range when prev
// has its files (only the changed files' results are read and
// tokenized), else built from all its files' parse results; either way
// it is the same shard.
func BuildShardsFrom(ctx context.Context, store *blob.Bucket, m *Manifest, prevIx Previous, so ShardOptions, parse ParseFunc, reused func([]source.File)) (*segment.ShardList, *Summary, ShardStats, error) {
	prev := prevIx.Shards
	var ss ShardStats
	target := so.Bytes
	if target <= 0 {
		target = DefaultShardBytes
	}
	maxChunks := ChunkLimit(so.MaxChunks)
	st := &Summary{
		Tenant: m.Tenant, Repo: m.Repo, Commit: m.Commit,
		FilesByLanguage: map[string]int{}, ChunksByKind: map[string]int{},
		Edges: map[string]int{}, Skipped: map[string]int{}, Degraded: map[string]int{},
	}
	skipped, degraded := map[string]string{}, map[string]string{}
	for _, s := range m.Skipped {
		st.Skipped[s.Reason]++
		skipped[s.Path] = s.Reason
	}
	list := &segment.ShardList{History: m.History}
	gin := graph.Input{GoModule: m.GoModule, GoModules: m.GoModules}
	// The graph input outlives its shard until the graph is built at the
	// end (and in the input cache, beyond). A parsed file's names, calls,
	// types and imports are substrings of its whole text: kept as they
	// are, they would keep the text of every code file of the repository
	// live. They are copied out, once per distinct string.
	names := interner{}
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
		maps.Copy(skipped, s.SkippedFiles)
		maps.Copy(degraded, s.DegradedFiles)
	}
	var collected <-chan struct{} // closed when the last shard written is collected
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
		data, release, err := readShard(ctx, store, key)
		if err == nil {
			// Kept from an earlier build: checked, not decoded again.
			if in := inputs.get(store, key); in != nil && len(data) == in.size {
				if sum, cerr := segment.CheckShard(data); cerr == nil && sum == in.sum {
					sh = in.shard()
				}
			}
			if sh == nil {
				if sh, err = segment.LoadShard(data, false); err == nil {
					names.files(sh.GraphIn)
					inputs.put(store, key, newShardInput(sh, data))
				}
			}
			release()
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
			if collected != nil {
				<-collected
				collected = nil
			}
			var results []Parsed
			so.count.from(base)
			sh, results, err = prevIx.splice(ctx, store, g, files, parse)
			if err == nil {
				ss.Spliced++
				st.Reused += len(files) - len(results)
			} else if errors.Is(err, errNoSplice) {
				so.count.from(base) // what the splice parsed is parsed again
				if results, err = parse(ctx, files); err != nil {
					return nil, nil, ss, err
				}
				sh = assembleShard(files, results)
			} else {
				return nil, nil, ss, err
			}
			for _, p := range results {
				if p.Reused {
					st.Reused++
				} else {
					st.Parsed++
				}
			}
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
			names.files(sh.GraphIn)
			inputs.put(store, key, newShardInput(sh, data))
			// Collect a big shard just written before the next is built:
			// the collector's next goal then starts from what the build
			// keeps (the graph input), not from this shard's peak. A small
			// one is not worth a full cycle of the process's heap (in `up`
			// the Temporal server's too) on every push. The collection
			// runs beside what follows (the next shard's read and, after
			// the last shard, the graph build) and the next shard built
			// waits for it: a push that rebuilds one shard then pays for
			// one collection beside its graph build instead of one in its
			// way and the pacer's during its next splice.
			sh.Chunks, sh.Files, sh.BM25, sh.FileBM25 = nil, nil, nil, nil
			if len(data) >= collectShardBytes {
				collected = collect()
			}
			data = nil
		}
		list.Shards = append(list.Shards, segment.ShardRef{Key: key, First: g.first, Digest: digest, Files: sh.Stats.Files, Chunks: sh.Stats.Chunks, Bytes: size})
		add(sh, base)
		st.SegmentBytes += size
		// Checked as shards are added: the build holds past a bound at
		// most one shard's chunks.
		if err := checkChunks(st.Chunks, maxChunks); err != nil {
			return nil, nil, ss, fmt.Errorf("index: %s: %w", m.Repo, err)
		}
	}
	ss.Shards = len(list.Shards)
	names = nil
	list.Graph = buildGraph(store, m.Tenant, m.Repo, gin)
	gs := list.Graph.Stats()
	st.Edges["import"] = gs.ImportEdges
	st.Edges["call"] = gs.CallEdges
	st.Edges["type"] = gs.TypeEdges
	list.Meta = segment.Meta{Tenant: m.Tenant, Repo: m.Repo, Commit: m.Commit, Built: time.Now().UTC().Format(time.RFC3339), Skipped: st.Skipped, Degraded: st.Degraded,
		SkippedFiles: segment.Listed(skipped), DegradedFiles: segment.Listed(degraded)}
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
	// Prev, when set, is a segment joined before (the repository's
	// previous snapshot): the shards the list shares with it are taken
	// from it as they are loaded there, not read again
	// (segment.Joiner.Reuse).
	Prev *segment.Segment
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
	l, err := loadList(store, key, data)
	if err != nil {
		return nil, err
	}
	data = nil
	j := segment.NewJoiner(l)
	j.Reuse(opt.Prev)
	for _, ref := range l.Shards {
		if j.AddReused() {
			continue
		}
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
	if err := CheckSourceBytes(snap.Files, opt.Chunk, opt.maxSourceBytes()); err != nil {
		return nil, nil, fmt.Errorf("index: %s: %w", name, err)
	}
	m, err := ReadManifest(ctx, snap, opt.Tenant, name, opt.HistoryLimit)
	if err != nil {
		return nil, nil, err
	}
	p := newParser(store, snap, name, opt, start)
	defer p.stop()
	list, st, ss, err := BuildShards(ctx, shardStore, m, nil, p.shards(), p.parse, p.skip)
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
