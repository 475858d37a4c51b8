// Package index builds the index of one repository snapshot: it reads the
// snapshot's files, chunks them by symbol (reusing parse results cached by
// git blob hash), builds the BM25 postings, the symbol table and the code
// graph, and publishes one immutable segment plus a HEAD pointer to a blob
// store. It is the library path behind `codectx index` and the graph-build
// worker of the pipeline.
package index

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/bm25"
	"codectx/pkg/chunk"
	"codectx/pkg/codectx"
	"codectx/pkg/graph"
	"codectx/pkg/segment"
	"codectx/pkg/source"
	"codectx/pkg/tokenize"
)

// DefaultTenant is the tenant of the single-user embedded mode.
const DefaultTenant = "default"

// Options configure a build.
type Options struct {
	Tenant       string        // default DefaultTenant
	Name         string        // repository name; default derived from the location
	Rev          string        // revision; default HEAD
	CacheDir     string        // where clone URLs are cloned
	Chunk        chunk.Options // size cap, parse timeout
	Workers      int           // parse goroutines; default GOMAXPROCS
	HistoryLimit int           // commits of history kept in the segment; default 500
	// ShardBytes is the source size of a shard (default DefaultShardBytes);
	// negative builds one segment instead of shards.
	ShardBytes int64
	// MaxSourceBytes bounds the source bytes of the snapshot
	// (SourceBytes): past it the build fails with ErrSourceTooLarge
	// before anything is parsed. 0: DefaultMaxSourceBytes; negative: no
	// bound.
	MaxSourceBytes int64
	// MaxChunks bounds the chunks of the snapshot: past it the build
	// fails with ErrTooManyChunks. 0: the constant MaxChunks; negative: no
	// bound.
	MaxChunks int
	Progress  func(Progress)
}

// Progress is reported while files are parsed.
type Progress struct {
	Done, Total int
	Bytes       int64
	Elapsed     time.Duration
}

// Summary describes a finished build.
type Summary struct {
	Tenant          string         `json:"tenant"`
	Repo            string         `json:"repo"`
	Commit          string         `json:"commit"`
	Files           int            `json:"files"`
	FilesByLanguage map[string]int `json:"files_by_language"`
	Chunks          int            `json:"chunks"`
	ChunksByKind    map[string]int `json:"chunks_by_kind"`
	Edges           map[string]int `json:"edges"`
	Skipped         map[string]int `json:"skipped"`
	Degraded        map[string]int `json:"degraded"`
	Parsed          int            `json:"parsed"`
	Reused          int            `json:"reused"`
	Bytes           int64          `json:"bytes"`
	SegmentKey      string         `json:"segment"`
	SegmentBytes    int            `json:"segment_bytes"` // a sharded index: its shards and shard list
	Shards          int            `json:"shards,omitempty"`
	ShardsWritten   int            `json:"shards_written,omitempty"` // by this build; the others were reused
	Seconds         float64        `json:"seconds"`
	MBPerSecond     float64        `json:"mb_per_second"`
}

// Keys of the blob store layout. Every key names the tenant.

// ParseKey is where the parse result of the blob at path is cached for
// tenant. The cache is per tenant: a result is reused only within the
// tenant that parsed it, so reuse counts (and timings) never tell one
// tenant that a file exists in another's code. Tenant names hold no "/"
// and no "@", so "@"+tenant is one unambiguous element (the library
// build's empty tenant is "@").
//
// The key holds the path (hashed) besides the content: a result depends on
// it (a Rust module's name, a non-code chunk's name, a name that marks a
// file generated), and keyed by content alone one path's result was
// served for another's (an app.js skipped as another path's minified
// copy). A renamed or copied file is parsed again.
func ParseKey(tenant, path, blobHash string) string {
	sum := sha256.Sum256([]byte(path))
	return "parse/v" + chunk.Version + "/@" + tenant + "/" + string(chunk.Detect(path, nil)) + "/" + blobHash[:2] + "/" + blobHash + "." + hex.EncodeToString(sum[:8])
}

// ContentKey is where the text of a parsed file was kept, by its git blob
// hash, beside parse-cache entries of the older forms (entries now carry
// the text: ReadContent). It lives under parse/ so the store-wide
// parse-cache GC collects it with the rest. It is shared by content: it is
// read only for a blob of the reader's own segment, and nothing reports
// whether it was already there.
func ContentKey(blobHash string) string {
	return "parse/content/" + blobHash[:2] + "/" + blobHash
}

// ReadContent returns the text of an indexed file of tenant's: the one its
// parse-cache entry carries, or, for an entry of an older form, the one
// kept at ContentKey. A torn entry's text is not served.
func ReadContent(ctx context.Context, store *blob.Bucket, tenant, path, blobHash string) ([]byte, error) {
	if len(blobHash) < 3 {
		return nil, fmt.Errorf("index: bad blob hash %q", blobHash)
	}
	data, err := store.Get(ctx, ParseKey(tenant, path, blobHash))
	if err == nil {
		if text, ok := entryText(data); ok {
			return text, nil
		}
	} else if !errors.Is(err, blob.ErrNotFound) {
		return nil, err
	}
	return store.Get(ctx, ContentKey(blobHash))
}

// RepoPrefix is the prefix of the objects of tenant/repo under root
// ("segments/", "heads/", ...): root, tenant, repo and an "@" element. No
// name contains "@", so the objects of one repository are never a prefix
// or a parent of another's ("org" and "org/app" both publish) and a tenant
// (no "/") never runs into another.
func RepoPrefix(root, tenant, repo string) string {
	return root + tenant + "/" + repo + "/@/"
}

// SegmentKey is where the segment of tenant/repo at commit is stored.
func SegmentKey(tenant, repo, commit string) string {
	return RepoPrefix("segments/", tenant, repo) + commit + ".seg"
}

// HeadKey is the per-repo HEAD pointer, the only mutable object.
func HeadKey(tenant, repo string) string { return RepoPrefix("heads/", tenant, repo) + "HEAD" }

// legacyHeadKey is where HEAD was before RepoPrefix: read as a fallback,
// removed by the next publish (on the local store it would be a file where
// the new key needs a directory).
func legacyHeadKey(tenant, repo string) string { return "heads/" + tenant + "/" + repo }

// DropLegacyHead removes a HEAD pointer written under the old layout, before
// a publish writes the new one.
func DropLegacyHead(ctx context.Context, store *blob.Bucket, tenant, repo string) error {
	ok, err := store.Exists(ctx, legacyHeadKey(tenant, repo))
	if err != nil || !ok {
		return err
	}
	return store.Delete(ctx, legacyHeadKey(tenant, repo))
}

// Head is the content of a HEAD pointer.
type Head struct {
	Commit  string `json:"commit"`
	Segment string `json:"segment"`
	Built   string `json:"built"`
	// Complete is set when no file of the snapshot was left out of the
	// segment. A HEAD that is not complete (files left out as bad, or
	// written before this field existed) is indexed again when its commit
	// is asked for, rather than skipped as already indexed.
	Complete bool `json:"complete,omitempty"`
	// Previous is the last other commit HEAD pointed at before this one
	// (kept by GC beside HEAD, for queries still reading it).
	Previous string `json:"previous,omitempty"`
}

// NextHead is the HEAD that replaces old (nil: none) with h, carrying the
// previous commit: old's, or old's own previous when old is of h's commit.
func NextHead(old []byte, h Head) Head {
	var o Head
	if old != nil && json.Unmarshal(old, &o) == nil {
		h.Previous = o.Commit
		if o.Commit == h.Commit {
			h.Previous = o.Previous
		}
	}
	return h
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)

// ValidName reports whether a repository name is usable in keys: elements
// of letters, digits, ".", "_" and "-" separated by "/", none empty, "."
// or "..", and no ".." anywhere.
func ValidName(s string) bool {
	if s == "" || len(s) > 200 || !nameRE.MatchString(s) || strings.Contains(s, "..") {
		return false
	}
	for _, el := range strings.Split(s, "/") {
		if el == "." {
			return false
		}
	}
	return true
}

// ValidTenant reports whether a tenant name is usable: a ValidName of one
// element (no "/"), so that a tenant and a repository never run together
// into another tenant's names.
func ValidTenant(s string) bool {
	return ValidName(s) && !strings.Contains(s, "/")
}

// Build indexes the repository at location and publishes its segment.
func Build(ctx context.Context, store *blob.Bucket, location string, opt Options) (*Summary, error) {
	start := time.Now()
	if opt.Tenant == "" {
		opt.Tenant = DefaultTenant
	}
	snap, err := source.Open(ctx, location, source.Options{CacheDir: opt.CacheDir, Tenant: opt.Tenant, Rev: opt.Rev})
	if err != nil {
		return nil, fmt.Errorf("index: %w", err) // it names the location, redacted
	}
	defer snap.Close()
	name := opt.Name
	if name == "" {
		name = snap.Repo
	}
	switch {
	case !ValidTenant(opt.Tenant):
		return nil, fmt.Errorf("index: invalid tenant %q (use letters, digits, . _ -)", opt.Tenant)
	case !ValidName(name) && opt.Name == "":
		// The name was taken from the location ("dir with space"): the
		// caller never gave one, so say where it came from.
		return nil, fmt.Errorf("index: the repository name %q, taken from the location, is not usable (use letters, digits, . _ - and /; no empty, . or .. element): give a name (--name)", name)
	case !ValidName(name):
		return nil, fmt.Errorf("index: invalid repository name %q (use letters, digits, . _ - and /; no empty, . or .. element)", name)
	}
	if snap.Commit == "" {
		// A plain directory has no commit: name the snapshot by its content.
		snap.Commit = snap.ContentName()
	}
	commit := snap.Commit
	var st *Summary
	var data []byte
	if opt.ShardBytes < 0 {
		seg, sum, err := BuildSegment(ctx, store, snap, name, opt)
		if err != nil {
			return nil, err
		}
		if data, err = seg.MarshalBinary(); err != nil {
			return nil, fmt.Errorf("index: encode segment: %w", err)
		}
		st = sum
		st.SegmentBytes = len(data)
	} else {
		// (BuildSegment checks its own.)
		if err := CheckSourceBytes(snap.Files, opt.Chunk, opt.maxSourceBytes()); err != nil {
			return nil, fmt.Errorf("index: %s: %w", name, err)
		}
		m, err := ReadManifest(ctx, snap, opt.Tenant, name, opt.HistoryLimit)
		if err != nil {
			return nil, err
		}
		p := newParser(store, snap, name, opt, start)
		defer p.stop()
		prev := PreviousShards(ctx, store, opt.Tenant, name)
		list, sum, ss, err := BuildShards(ctx, store, m, prev, p.shards(), func(ctx context.Context, files []source.File) ([]Parsed, error) {
			return p.parse(ctx, files)
		}, p.skip)
		if err != nil {
			return nil, err
		}
		p.stop()
		if data, err = list.MarshalBinary(); err != nil {
			return nil, fmt.Errorf("index: encode shard list: %w", err)
		}
		st = sum
		st.SegmentBytes += len(data)
		st.Shards, st.ShardsWritten = ss.Shards, ss.Written
	}
	key := SegmentKey(opt.Tenant, name, commit)
	if err := Publish(ctx, store, opt.Tenant, name, commit, key, data); err != nil {
		return nil, err
	}
	st.SegmentKey = key
	st.Seconds = time.Since(start).Seconds()
	if st.Seconds > 0 {
		st.MBPerSecond = float64(st.Bytes) / 1e6 / st.Seconds
	}
	return st, nil
}

// Publish writes the segment, then moves the repo's HEAD pointer to it in
// one write. The segment is written before the pointer, so a reader never
// sees a pointer to a missing or partial segment.
func Publish(ctx context.Context, store *blob.Bucket, tenant, repo, commit, key string, data []byte) error {
	if err := store.Put(ctx, key, data); err != nil {
		return fmt.Errorf("index: write segment: %w", err)
	}
	h := Head{Commit: commit, Segment: key, Built: time.Now().UTC().Format(time.RFC3339), Complete: true}
	hk := HeadKey(tenant, repo)
	if err := DropLegacyHead(ctx, store, tenant, repo); err != nil {
		return fmt.Errorf("index: move head: %w", err)
	}
	for attempt := 0; attempt < 5; attempt++ {
		old, err := store.Get(ctx, hk)
		if errors.Is(err, blob.ErrNotFound) {
			old = nil
		} else if err != nil {
			return fmt.Errorf("index: read head: %w", err)
		}
		head, err := json.Marshal(NextHead(old, h))
		if err != nil {
			return err
		}
		err = store.Swap(ctx, hk, old, head)
		if err == nil {
			return nil
		}
		if !errors.Is(err, blob.ErrConflict) {
			return fmt.Errorf("index: move head: %w", err)
		}
	}
	return fmt.Errorf("index: move head of %s: too many concurrent updates", repo)
}

// ReadHead returns the HEAD pointer of tenant/repo.
func ReadHead(ctx context.Context, store *blob.Bucket, tenant, repo string) (Head, error) {
	var h Head
	data, err := store.Get(ctx, HeadKey(tenant, repo))
	if errors.Is(err, blob.ErrNotFound) {
		data, err = store.Get(ctx, legacyHeadKey(tenant, repo))
	}
	if errors.Is(err, blob.ErrNotFound) {
		return h, fmt.Errorf("index: repository %s/%s has no published index: %w", tenant, repo, err)
	}
	if err != nil {
		// Not "no published index": the store did not say (it is down,
		// slow or refusing), and the repository may well have one.
		return h, fmt.Errorf("index: read HEAD of %s/%s: %w", tenant, repo, err)
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return h, fmt.Errorf("index: head of %s: %w", repo, err)
	}
	return h, nil
}

// LoadHead loads the segment HEAD points at.
func LoadHead(ctx context.Context, store *blob.Bucket, tenant, repo string) (*segment.Segment, error) {
	h, err := ReadHead(ctx, store, tenant, repo)
	if err != nil {
		return nil, err
	}
	return LoadSegment(ctx, store, h.Segment)
}

// Manifest is what a snapshot contributes to its segment besides parse
// results: the file list, the skipped entries, the Go module path and the
// recent history. The snapshot stage of the pipeline writes it; the graph
// stage assembles the segment from it and the cached parse results.
type Manifest struct {
	Tenant string `json:"tenant"`
	Repo   string `json:"repo"`
	Commit string `json:"commit"`
	// Tree is the hash of the git tree the files were listed from ("" for
	// a plain directory, or a manifest from before it was recorded): the
	// next snapshot lists its unchanged subtrees from this manifest.
	Tree     string           `json:"tree,omitempty"`
	Files    []source.File    `json:"files"`
	Skipped  []source.Skipped `json:"skipped,omitempty"`
	GoModule string           `json:"go_module,omitempty"`
	// GoModules maps the directory of each nested go.mod to its module path.
	GoModules map[string]string `json:"go_modules,omitempty"`
	History   []segment.Commit  `json:"history,omitempty"`
	// HistoryLimit is the limit History was read with (0 in a manifest
	// from before it was recorded): a later snapshot reads the commits
	// from this one back from History only when it knows it.
	HistoryLimit int `json:"history_limit,omitempty"`
}

// Listing is the listing the manifest was made from, for listing a later
// snapshot from it (source.Options.Base); nil without a tree.
func (m *Manifest) Listing() *source.Listing {
	if m == nil || m.Tree == "" {
		return nil
	}
	return &source.Listing{Tree: m.Tree, Files: m.Files, Skipped: m.Skipped}
}

// ReadManifest reads the manifest of a snapshot.
func ReadManifest(ctx context.Context, snap *source.Snapshot, tenant, name string, historyLimit int) (*Manifest, error) {
	return ReadManifestFrom(ctx, snap, tenant, name, historyLimit, nil)
}

// historyBase is the history of prev for source.Snapshot.HistoryFrom, nil
// when prev says too little (no tree, no limit, a date it did not write).
func historyBase(prev *Manifest) *source.HistoryBase {
	if prev == nil || prev.Tree == "" || prev.HistoryLimit == 0 {
		return nil
	}
	b := &source.HistoryBase{Commit: prev.Commit, Tree: prev.Tree, Limit: prev.HistoryLimit, Commits: make([]source.Commit, len(prev.History))}
	for i, c := range prev.History {
		when, err := time.Parse(time.RFC3339, c.When)
		if err != nil {
			return nil
		}
		b.Commits[i] = source.Commit{Hash: c.Hash, Author: c.Author, Message: c.Message, When: when, Files: c.Files}
	}
	return b
}

// ReadManifestFrom is ReadManifest reading the history from prev, the
// manifest of an earlier snapshot of the repository, where the commits are
// the same (source.Snapshot.HistoryFrom): the manifest is ReadManifest's.
func ReadManifestFrom(ctx context.Context, snap *source.Snapshot, tenant, name string, historyLimit int, prev *Manifest) (*Manifest, error) {
	m := &Manifest{Tenant: tenant, Repo: name, Commit: snap.Commit, Tree: snap.Tree, Files: snap.Files, Skipped: snap.Skipped}
	for _, f := range snap.Files {
		if f.Path != "go.mod" && !strings.HasSuffix(f.Path, "/go.mod") {
			continue
		}
		if f.Size > maxGoModSize {
			// Not read: a blob's size is the repository's to choose.
			continue
		}
		data, err := snap.Read(f)
		if err != nil {
			continue
		}
		mod := goModulePath(data)
		if mod == "" {
			continue
		}
		if f.Path == "go.mod" {
			m.GoModule = mod
			continue
		}
		if m.GoModules == nil {
			m.GoModules = map[string]string{}
		}
		m.GoModules[path.Dir(f.Path)] = mod
	}
	if historyLimit == 0 {
		historyLimit = 500
	}
	if snap.Commit != "" && historyLimit > 0 {
		m.HistoryLimit = historyLimit
		cs, err := snap.HistoryFrom(ctx, historyLimit, historyBase(prev))
		if err != nil {
			return nil, fmt.Errorf("index: history: %w", err)
		}
		for _, c := range cs {
			m.History = append(m.History, segment.Commit{Hash: c.Hash, Author: c.Author, When: c.When.UTC().Format(time.RFC3339), Message: c.Message, Files: c.Files})
		}
	}
	return m, nil
}

// Parsed is the parse result of one file.
type Parsed struct {
	Result chunk.Result
	Reused bool // found in the parse cache
}

// BuildSegment parses the snapshot (reusing cached parse results) and
// assembles its segment without publishing it.
func BuildSegment(ctx context.Context, store *blob.Bucket, snap *source.Snapshot, name string, opt Options) (*segment.Segment, *Summary, error) {
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
	// The parser counts every file's chunks: past the bound it fails.
	results, err := p.parse(ctx, snap.Files)
	if err != nil {
		return nil, nil, err
	}
	seg, st := Assemble(m, results)
	st.Seconds = time.Since(start).Seconds()
	return seg, st, nil
}

// parser parses files of a snapshot (of the repository name) with
// opt.Workers goroutines, reporting progress over all of the snapshot's
// files and counting their chunks against opt.MaxChunks.
type parser struct {
	store           *blob.Bucket
	snap            *source.Snapshot
	name            string
	opt             Options
	start           time.Time
	done, bytesDone atomic.Int64
	count           chunkCount
	stopProgress    chan struct{}
	stopOnce        sync.Once
}

func newParser(store *blob.Bucket, snap *source.Snapshot, name string, opt Options, start time.Time) *parser {
	p := &parser{store: store, snap: snap, name: name, opt: opt, start: start, stopProgress: make(chan struct{})}
	p.count.limit = ChunkLimit(opt.MaxChunks)
	if opt.Progress != nil {
		go func() {
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					opt.Progress(p.progress())
				case <-p.stopProgress:
					return
				}
			}
		}()
	}
	return p
}

// shards is how a sharded build through p cuts and bounds the snapshot:
// the build keeps p's count of chunks (ShardOptions.count).
func (p *parser) shards() ShardOptions {
	return ShardOptions{Bytes: p.opt.ShardBytes, MaxChunks: p.opt.MaxChunks, count: &p.count}
}

func (p *parser) progress() Progress {
	return Progress{Done: int(p.done.Load()), Total: len(p.snap.Files), Bytes: p.bytesDone.Load(), Elapsed: time.Since(p.start)}
}

// skip counts files as done without parsing them (a reused shard's).
func (p *parser) skip(files []source.File) {
	for _, f := range files {
		p.bytesDone.Add(f.Size)
	}
	p.done.Add(int64(len(files)))
}

// stop ends the progress reports with a last one.
func (p *parser) stop() {
	p.stopOnce.Do(func() {
		close(p.stopProgress)
		if p.opt.Progress != nil && p.done.Load() == int64(len(p.snap.Files)) {
			p.opt.Progress(p.progress())
		}
	})
}

func (p *parser) parse(ctx context.Context, files []source.File) ([]Parsed, error) {
	workers := p.opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	results := make([]Parsed, len(files))
	errs := make([]error, len(files))
	// Cancelled with the error of the file whose chunks put the count over
	// the bound: the parses under way stop (a cancelled parse is not
	// cached) and no other starts.
	wctx, over := context.WithCancelCause(ctx)
	defer over(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(files) || wctx.Err() != nil {
					return
				}
				f := files[i]
				results[i], errs[i] = ParseFile(wctx, p.store, p.opt.Tenant, f, func() ([]byte, error) { return p.snap.Read(f) }, p.opt.Chunk)
				if errs[i] == nil {
					if err := p.count.add(results[i].Result); err != nil {
						over(fmt.Errorf("index: %s: %w", p.name, err))
					}
				}
				p.bytesDone.Add(f.Size)
				p.done.Add(1)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := context.Cause(wctx); err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	// The cache entries were written without an fsync each: make them
	// durable at once, before a shard or segment names them.
	if err := p.store.Sync(ctx); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	return results, nil
}

// LoadParsed returns the cached parse results of the manifest's files, for
// the graph stage of the pipeline. A missing result is an error naming the
// file: the parse stage has not finished it.
func LoadParsed(ctx context.Context, store *blob.Bucket, m *Manifest) ([]Parsed, error) {
	return LoadParsedFiles(ctx, store, m.Tenant, m.Files)
}

// LoadParsedFiles is LoadParsed for some files of tenant's snapshot.
func LoadParsedFiles(ctx context.Context, store *blob.Bucket, tenant string, files []source.File) ([]Parsed, error) {
	out := make([]Parsed, len(files))
	for i, f := range files {
		if tooLarge(f, chunk.Options{}) {
			out[i] = Parsed{Result: chunk.Result{Language: chunk.Detect(f.Path, nil), Skip: codectx.SkipTooLarge}}
			continue
		}
		key := ParseKey(tenant, f.Path, f.Blob)
		data, err := store.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("index: parse result of %s: %w", f.Path, err)
		}
		if err := decodeParsed(data, &out[i].Result); err != nil {
			// Torn by a crash: deleted, so the next plan parses it again.
			if derr := store.Delete(ctx, key); derr != nil {
				err = errors.Join(err, derr)
			}
			return nil, fmt.Errorf("index: parse result of %s: %w", f.Path, err)
		}
		out[i].Reused = true
	}
	return out, nil
}

// Assemble builds the segment of a manifest from the parse results of its
// files (results[i] belongs to m.Files[i]).
func Assemble(m *Manifest, results []Parsed) (*segment.Segment, *Summary) {
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
	n := 0
	for _, p := range results {
		if p.Result.Skip == "" {
			n += len(p.Result.Chunks)
		}
	}
	files := make([]segment.File, 0, len(results))
	chunks := make([]codectx.Chunk, 0, n) // sized once: a repository's chunks are most of the memory
	gin := graph.Input{GoModule: m.GoModule, GoModules: m.GoModules}
	for i, p := range results {
		file := m.Files[i]
		st.Bytes += file.Size
		if p.Reused {
			st.Reused++
		} else {
			st.Parsed++
		}
		if p.Result.Skip != "" {
			st.Skipped[p.Result.Skip]++
			skipped[file.Path] = p.Result.Skip
			continue
		}
		if p.Result.Degraded != "" {
			st.Degraded[p.Result.Degraded]++
			degraded[file.Path] = p.Result.Degraded
		}
		st.Files++
		st.FilesByLanguage[string(p.Result.Language)]++
		f := segment.File{Path: file.Path, Language: p.Result.Language, Blob: file.Blob, Size: file.Size}
		fin := graph.FileInput{Path: file.Path, Language: p.Result.Language, Package: p.Result.Package, Imports: p.Result.Imports}
		for _, c := range p.Result.Chunks {
			c.Path = file.Path
			id := len(chunks)
			chunks = append(chunks, c)
			f.Chunks = append(f.Chunks, id)
			st.ChunksByKind[string(c.Kind)]++
			if c.Kind != codectx.KindWindow {
				fin.Symbols = append(fin.Symbols, graph.SymbolInput{ID: id, Name: c.Name, Kind: c.Kind, Calls: c.Calls, Types: c.Types})
			}
		}
		files = append(files, f)
		if isCode(p.Result.Language) {
			gin.Files = append(gin.Files, fin)
		}
	}
	st.Chunks = len(chunks)
	// Each chunk is tokenized once; its tokens feed both the chunk index
	// and the whole-file index.
	bs := newBuilders()
	for _, f := range files {
		// A file's chunks are consecutive in chunks.
		if len(f.Chunks) == 0 {
			bs.add(f.Path, nil)
			continue
		}
		bs.add(f.Path, chunks[f.Chunks[0]:f.Chunks[len(f.Chunks)-1]+1])
	}
	g := graph.Build(gin)
	gs := g.Stats()
	st.Edges["import"] = gs.ImportEdges
	st.Edges["call"] = gs.CallEdges
	st.Edges["type"] = gs.TypeEdges
	meta := segment.Meta{Tenant: m.Tenant, Repo: m.Repo, Commit: m.Commit, Built: time.Now().UTC().Format(time.RFC3339), Skipped: st.Skipped, Degraded: st.Degraded,
		SkippedFiles: segment.Listed(skipped), DegradedFiles: segment.Listed(degraded)}
	return segment.New(meta, files, chunks, bs.b.Build(), bs.fb.Build(), g, m.History), st
}

// Tokens are the BM25 fields of a chunk: name, signature, doc comment,
// body and file path, each tokenized identifier-aware.
func Tokens(c codectx.Chunk) [bm25.NumFields][]string {
	var t [bm25.NumFields][]string
	t[bm25.FieldName] = tokenize.Tokens(c.Name)
	t[bm25.FieldSignature] = tokenize.Tokens(c.Signature)
	t[bm25.FieldDoc] = tokenize.Tokens(c.Doc)
	t[bm25.FieldBody] = tokenize.Tokens(c.Body)
	t[bm25.FieldPath] = tokenize.Tokens(c.Path)
	return t
}

func isCode(l codectx.Language) bool {
	switch l {
	case codectx.Go, codectx.Python, codectx.TypeScript, codectx.TSX, codectx.JavaScript, codectx.Java, codectx.Rust:
		return true
	}
	return false
}

// maxGoModSize is the size of the largest go.mod ReadManifest reads for
// its module path; go.mod files are a few KiB.
const maxGoModSize = 1 << 20

func goModulePath(data []byte) string {
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "module ") {
			return strings.Trim(strings.TrimSpace(strings.TrimPrefix(line, "module")), `"`)
		}
	}
	return ""
}

func tooLarge(f source.File, opt chunk.Options) bool {
	max := opt.MaxFileSize
	if max <= 0 {
		max = 1 << 20
	}
	return f.Size > max
}

// ParseFile chunks one file, or returns its cached parse result. The result
// is cached under the tenant and the file's blob hash, so a redelivered or repeated parse
// rewrites the same object; the entry carries the file's text (ReadContent).
// read is called on a cache miss, or when the text kept beside an entry of
// an older form is missing or torn. Parse workers of the pipeline call this
// too. The entry is stored without an fsync (blob PutCache; a torn entry
// is a miss): Sync the store before writing what names it.
func ParseFile(ctx context.Context, store *blob.Bucket, tenant string, f source.File, read func() ([]byte, error), opt chunk.Options) (Parsed, error) {
	lang := chunk.Detect(f.Path, nil)
	if tooLarge(f, opt) {
		// Not read at all: the size from the tree is enough.
		return Parsed{Result: chunk.Result{Language: lang, Skip: codectx.SkipTooLarge}}, nil
	}
	key := ParseKey(tenant, f.Path, f.Blob)
	if data, err := store.Get(ctx, key); err == nil {
		var p Parsed
		if decodeParsed(data, &p.Result) == nil {
			p.Reused = true
			// An entry of an older form keeps the text beside it: results
			// cached before file texts were kept have none yet, and a crash
			// can lose or tear a text written without an fsync.
			if p.Result.Skip == "" && len(f.Blob) > 2 && !hasText(data) && !contentKept(ctx, store, f.Blob) {
				if content, err := read(); err == nil {
					if err := store.PutCache(ctx, ContentKey(f.Blob), content); err != nil {
						return Parsed{}, fmt.Errorf("index: keep text of %s: %w", f.Path, err)
					}
				}
			}
			return p, nil
		}
	}
	content, err := read()
	if err != nil {
		return Parsed{}, fmt.Errorf("index: read %s: %w", f.Path, err)
	}
	res := chunk.Parse(ctx, f.Path, content, opt)
	if err := ctx.Err(); err != nil {
		// A cancelled parse degrades to windows: never cache that.
		return Parsed{}, err
	}
	var text []byte
	if res.Skip == "" && len(f.Blob) > 2 {
		text = content // the entry carries the text `read` serves
	}
	for i := range res.Chunks {
		res.Chunks[i].Path = "" // cached by content: the path is set on use
	}
	if err := store.PutCache(ctx, key, encodeParsed(res, text)); err != nil {
		return Parsed{}, fmt.Errorf("index: cache parse result of %s: %w", f.Path, err)
	}
	return Parsed{Result: res}, nil
}

// WriteProgress renders progress as one updating terminal line.
func WriteProgress(w io.Writer) func(Progress) {
	return func(p Progress) {
		mbs := 0.0
		if s := p.Elapsed.Seconds(); s > 0 {
			mbs = float64(p.Bytes) / 1e6 / s
		}
		fmt.Fprintf(w, "\rparsing %d/%d files  %.1f MB  %.1f MB/s ", p.Done, p.Total, float64(p.Bytes)/1e6, mbs)
		if p.Done == p.Total {
			fmt.Fprintln(w)
		}
	}
}

// FormatSummary renders a summary for humans.
func FormatSummary(s *Summary) string {
	var b strings.Builder
	commit := s.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	fmt.Fprintf(&b, "indexed %s@%s (tenant %s)\n", s.Repo, commit, s.Tenant)
	fmt.Fprintf(&b, "  files     %d (%s)\n", s.Files, FormatCounts(s.FilesByLanguage))
	fmt.Fprintf(&b, "  chunks    %d (%s)\n", s.Chunks, FormatCounts(s.ChunksByKind))
	fmt.Fprintf(&b, "  edges     %s\n", FormatCounts(s.Edges))
	fmt.Fprintf(&b, "  parsed    %d, reused %d from cache\n", s.Parsed, s.Reused)
	if len(s.Skipped) > 0 {
		fmt.Fprintf(&b, "  skipped   %s\n", FormatCounts(s.Skipped))
	}
	if len(s.Degraded) > 0 {
		fmt.Fprintf(&b, "  degraded  %s\n", FormatCounts(s.Degraded))
	}
	fmt.Fprintf(&b, "  bytes     %.2f MB source, %.2f MB segment\n", float64(s.Bytes)/1e6, float64(s.SegmentBytes)/1e6)
	fmt.Fprintf(&b, "  time      %.2f s (%.1f MB/s)\n", s.Seconds, s.MBPerSecond)
	fmt.Fprintf(&b, "  segment   %s\n", s.SegmentKey)
	if s.Shards > 0 {
		fmt.Fprintf(&b, "  shards    %d (%d written, %d reused)\n", s.Shards, s.ShardsWritten, s.Shards-s.ShardsWritten)
	}
	return b.String()
}

// Total is the sum of a count map's values (files skipped, by reason).
func Total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// FormatCounts renders counts by name, largest first: "go 469, text 42".
func FormatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
