// Package index builds the index of one repository snapshot: it reads the
// snapshot's files, chunks them by symbol (reusing parse results cached by
// git blob hash), builds the BM25 postings, the symbol table and the code
// graph, and publishes one immutable segment plus a HEAD pointer to a blob
// store. It is the library path behind `codectx index` and the graph-build
// worker of the pipeline.
package index

import (
	"context"
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
	Progress     func(Progress)
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
	SegmentBytes    int            `json:"segment_bytes"`
	Seconds         float64        `json:"seconds"`
	MBPerSecond     float64        `json:"mb_per_second"`
}

// Keys of the blob store layout. Every key starts with the tenant, except
// the parse cache, which is keyed by content only and shared.
func parseKey(lang codectx.Language, blobHash string) string {
	return "parse/v" + chunk.Version + "/" + string(lang) + "/" + blobHash[:2] + "/" + blobHash
}

// SegmentKey is where the segment of tenant/repo at commit is stored.
func SegmentKey(tenant, repo, commit string) string {
	return "segments/" + tenant + "/" + repo + "/" + commit + ".seg"
}

// HeadKey is the per-repo HEAD pointer, the only mutable object.
func HeadKey(tenant, repo string) string { return "heads/" + tenant + "/" + repo }

// Head is the content of a HEAD pointer.
type Head struct {
	Commit  string `json:"commit"`
	Segment string `json:"segment"`
	Built   string `json:"built"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)

// ValidName reports whether a tenant or repository name is usable in keys.
func ValidName(s string) bool {
	return s != "" && len(s) <= 200 && nameRE.MatchString(s) && !strings.Contains(s, "..")
}

// Build indexes the repository at location and publishes its segment.
func Build(ctx context.Context, store *blob.Bucket, location string, opt Options) (*Summary, error) {
	start := time.Now()
	if opt.Tenant == "" {
		opt.Tenant = DefaultTenant
	}
	snap, err := source.Open(ctx, location, source.Options{CacheDir: opt.CacheDir, Rev: opt.Rev})
	if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", location, err)
	}
	defer snap.Close()
	name := opt.Name
	if name == "" {
		name = snap.Repo
	}
	if !ValidName(opt.Tenant) || !ValidName(name) {
		return nil, fmt.Errorf("index: invalid tenant %q or repository name %q (use letters, digits, . _ - and /)", opt.Tenant, name)
	}
	seg, st, err := BuildSegment(ctx, store, snap, name, opt)
	if err != nil {
		return nil, err
	}
	data, err := seg.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("index: encode segment: %w", err)
	}
	commit := snap.Commit
	if commit == "" {
		commit = "worktree-" + codectx.HashText(manifestOf(snap))[:12]
	}
	key := SegmentKey(opt.Tenant, name, commit)
	if err := Publish(ctx, store, opt.Tenant, name, commit, key, data); err != nil {
		return nil, err
	}
	st.SegmentKey = key
	st.SegmentBytes = len(data)
	st.Seconds = time.Since(start).Seconds()
	if st.Seconds > 0 {
		st.MBPerSecond = float64(st.Bytes) / 1e6 / st.Seconds
	}
	return st, nil
}

func manifestOf(snap *source.Snapshot) string {
	var b strings.Builder
	for _, f := range snap.Files {
		b.WriteString(f.Path)
		b.WriteByte(0)
		b.WriteString(f.Blob)
		b.WriteByte('\n')
	}
	return b.String()
}

// Publish writes the segment, then moves the repo's HEAD pointer to it in
// one write. The segment is written before the pointer, so a reader never
// sees a pointer to a missing or partial segment.
func Publish(ctx context.Context, store *blob.Bucket, tenant, repo, commit, key string, data []byte) error {
	if err := store.Put(ctx, key, data); err != nil {
		return fmt.Errorf("index: write segment: %w", err)
	}
	head, err := json.Marshal(Head{Commit: commit, Segment: key, Built: time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	hk := HeadKey(tenant, repo)
	for attempt := 0; attempt < 5; attempt++ {
		old, err := store.Get(ctx, hk)
		if errors.Is(err, blob.ErrNotFound) {
			old = nil
		} else if err != nil {
			return fmt.Errorf("index: read head: %w", err)
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
	if err != nil {
		return h, fmt.Errorf("index: repository %s/%s has no published index: %w", tenant, repo, err)
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
	data, err := store.Get(ctx, h.Segment)
	if err != nil {
		return nil, fmt.Errorf("index: read segment %s: %w", h.Segment, err)
	}
	return segment.Load(data)
}

type parsed struct {
	file   source.File
	lang   codectx.Language
	res    chunk.Result
	reused bool
	err    error
}

// BuildSegment parses the snapshot (reusing cached parse results) and
// assembles its segment without publishing it.
func BuildSegment(ctx context.Context, store *blob.Bucket, snap *source.Snapshot, name string, opt Options) (*segment.Segment, *Summary, error) {
	start := time.Now()
	if opt.Tenant == "" {
		opt.Tenant = DefaultTenant
	}
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	st := &Summary{
		Tenant: opt.Tenant, Repo: name, Commit: snap.Commit,
		FilesByLanguage: map[string]int{}, ChunksByKind: map[string]int{},
		Edges: map[string]int{}, Skipped: map[string]int{}, Degraded: map[string]int{},
	}
	for _, s := range snap.Skipped {
		st.Skipped[s.Reason]++
	}

	results := make([]parsed, len(snap.Files))
	var next, done atomic.Int64
	var bytesDone atomic.Int64
	var wg sync.WaitGroup
	stopProgress := make(chan struct{})
	if opt.Progress != nil {
		go func() {
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					opt.Progress(Progress{Done: int(done.Load()), Total: len(snap.Files), Bytes: bytesDone.Load(), Elapsed: time.Since(start)})
				case <-stopProgress:
					return
				}
			}
		}()
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(snap.Files) || ctx.Err() != nil {
					return
				}
				results[i] = parseOne(ctx, store, snap, snap.Files[i], opt.Chunk)
				bytesDone.Add(snap.Files[i].Size)
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stopProgress)
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if opt.Progress != nil {
		opt.Progress(Progress{Done: len(snap.Files), Total: len(snap.Files), Bytes: bytesDone.Load(), Elapsed: time.Since(start)})
	}

	var (
		files  []segment.File
		chunks []codectx.Chunk
		gin    graph.Input
	)
	for _, p := range results {
		if p.err != nil {
			return nil, nil, p.err
		}
		st.Bytes += p.file.Size
		if p.reused {
			st.Reused++
		} else {
			st.Parsed++
		}
		if p.res.Skip != "" {
			st.Skipped[p.res.Skip]++
			continue
		}
		if p.res.Degraded != "" {
			st.Degraded[p.res.Degraded]++
		}
		st.Files++
		st.FilesByLanguage[string(p.res.Language)]++
		f := segment.File{Path: p.file.Path, Language: p.res.Language, Blob: p.file.Blob, Size: p.file.Size}
		fin := graph.FileInput{Path: p.file.Path, Language: p.res.Language, Package: p.res.Package, Imports: p.res.Imports}
		for _, c := range p.res.Chunks {
			c.Path = p.file.Path
			id := len(chunks)
			chunks = append(chunks, c)
			f.Chunks = append(f.Chunks, id)
			st.ChunksByKind[string(c.Kind)]++
			if c.Kind != codectx.KindWindow {
				fin.Symbols = append(fin.Symbols, graph.SymbolInput{ID: id, Name: c.Name, Kind: c.Kind, Calls: c.Calls, Types: c.Types})
			}
		}
		files = append(files, f)
		if isCode(p.res.Language) {
			gin.Files = append(gin.Files, fin)
		}
		if p.file.Path == "go.mod" {
			if data, err := snap.Read(p.file); err == nil {
				gin.GoModule = goModulePath(data)
			}
		}
	}
	st.Chunks = len(chunks)

	b := bm25.NewBuilder()
	for _, c := range chunks {
		b.Add(DocOf(c))
	}
	ix := b.Build()
	g := graph.Build(gin)
	gs := g.Stats()
	st.Edges["import"] = gs.ImportEdges
	st.Edges["call"] = gs.CallEdges
	st.Edges["type"] = gs.TypeEdges

	var hist []segment.Commit
	limit := opt.HistoryLimit
	if limit == 0 {
		limit = 500
	}
	if snap.Commit != "" && limit > 0 {
		cs, err := snap.History(ctx, limit)
		if err != nil {
			return nil, nil, fmt.Errorf("index: history: %w", err)
		}
		for _, c := range cs {
			hist = append(hist, segment.Commit{Hash: c.Hash, Author: c.Author, When: c.When.UTC().Format(time.RFC3339), Message: c.Message, Files: c.Files})
		}
	}
	meta := segment.Meta{Tenant: opt.Tenant, Repo: name, Commit: snap.Commit, Built: time.Now().UTC().Format(time.RFC3339), Skipped: st.Skipped, Degraded: st.Degraded}
	seg := segment.New(meta, files, chunks, ix, g, hist)
	st.Seconds = time.Since(start).Seconds()
	return seg, st, nil
}

// DocOf is the BM25 document of a chunk. The body field holds the body
// without the signature/doc prefix duplication being significant; the path
// field holds the file path, so path words ("session", "utils") match.
func DocOf(c codectx.Chunk) bm25.Doc {
	var d bm25.Doc
	d.Fields[bm25.FieldName] = c.Name
	d.Fields[bm25.FieldSignature] = c.Signature
	d.Fields[bm25.FieldDoc] = c.Doc
	d.Fields[bm25.FieldBody] = c.Body
	d.Fields[bm25.FieldPath] = c.Path
	return d
}

func isCode(l codectx.Language) bool {
	switch l {
	case codectx.Go, codectx.Python, codectx.TypeScript, codectx.TSX, codectx.JavaScript, codectx.Java, codectx.Rust:
		return true
	}
	return false
}

func goModulePath(data []byte) string {
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "module ") {
			return strings.Trim(strings.TrimSpace(strings.TrimPrefix(line, "module")), `"`)
		}
	}
	return ""
}

func parseOne(ctx context.Context, store *blob.Bucket, snap *source.Snapshot, f source.File, opt chunk.Options) parsed {
	p := parsed{file: f}
	max := opt.MaxFileSize
	if max <= 0 {
		max = 1 << 20
	}
	if f.Size > max {
		p.res = chunk.Result{Language: chunk.Detect(f.Path, nil), Skip: codectx.SkipTooLarge}
		return p
	}
	lang := chunk.Detect(f.Path, nil)
	key := parseKey(lang, f.Blob)
	if data, err := store.Get(ctx, key); err == nil {
		if json.Unmarshal(data, &p.res) == nil {
			p.reused = true
			return p
		}
	}
	content, err := snap.Read(f)
	if err != nil {
		p.err = fmt.Errorf("index: read %s: %w", f.Path, err)
		return p
	}
	p.res = chunk.Parse(ctx, f.Path, content, opt)
	for i := range p.res.Chunks {
		p.res.Chunks[i].Path = "" // cached by content: the path is set on use
	}
	if data, err := json.Marshal(p.res); err == nil {
		// A failed cache write only costs a re-parse next time.
		_ = store.Put(ctx, key, data)
	}
	return p
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
	fmt.Fprintf(&b, "  files     %d (%s)\n", s.Files, formatCounts(s.FilesByLanguage))
	fmt.Fprintf(&b, "  chunks    %d (%s)\n", s.Chunks, formatCounts(s.ChunksByKind))
	fmt.Fprintf(&b, "  edges     %s\n", formatCounts(s.Edges))
	fmt.Fprintf(&b, "  parsed    %d, reused %d from cache\n", s.Parsed, s.Reused)
	if len(s.Skipped) > 0 {
		fmt.Fprintf(&b, "  skipped   %s\n", formatCounts(s.Skipped))
	}
	if len(s.Degraded) > 0 {
		fmt.Fprintf(&b, "  degraded  %s\n", formatCounts(s.Degraded))
	}
	fmt.Fprintf(&b, "  bytes     %.2f MB source, %.2f MB segment\n", float64(s.Bytes)/1e6, float64(s.SegmentBytes)/1e6)
	fmt.Fprintf(&b, "  time      %.2f s (%.1f MB/s)\n", s.Seconds, s.MBPerSecond)
	fmt.Fprintf(&b, "  segment   %s\n", s.SegmentKey)
	return b.String()
}

func formatCounts(m map[string]int) string {
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

var _ = path.Base
