// Package segment defines the immutable index segment of one repository
// snapshot: the chunks with their text, the identifier-aware BM25 postings,
// the symbol table, the code graph and the recent history. A segment is
// written once as bytes (to a blob store, under a temp name renamed into
// place) and loaded read-only by any query replica.
//
// Layout: an 8-byte magic, then sections, each a uvarint tag, a uvarint
// length and the payload, and finally a CRC-32 (Castagnoli) of everything
// before it. Chunk metadata and history are gzip-compressed JSON; BM25 and
// graph sections are the compact binary forms of their packages.
package segment

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"codectx/pkg/bm25"
	"codectx/pkg/codectx"
	"codectx/pkg/graph"
	"codectx/pkg/mapfile"
)

const magic = "CTXSEG1\n"

// Section tags.
const (
	tagMeta     = 1
	tagFiles    = 2
	tagChunks   = 3
	tagBM25     = 4
	tagGraph    = 5
	tagSymbols  = 6
	tagHistory  = 7
	tagFileBM25 = 8
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is returned for a segment that fails its checksum or framing.
var ErrCorrupt = errors.New("segment: corrupt")

// Meta describes the snapshot a segment was built from.
type Meta struct {
	Tenant   string         `json:"tenant"`
	Repo     string         `json:"repo"`
	Commit   string         `json:"commit"`
	Built    string         `json:"built"` // RFC 3339
	Skipped  map[string]int `json:"skipped,omitempty"`
	Degraded map[string]int `json:"degraded,omitempty"`
	// SkippedFiles and DegradedFiles name the files Skipped and Degraded
	// count, in path order, at most MaxListed of each (an index built
	// before they were kept has none).
	SkippedFiles  []FileReason `json:"skipped_files,omitempty"`
	DegradedFiles []FileReason `json:"degraded_files,omitempty"`
}

// FileReason is a file the index left out, or cut into line windows, and
// why (a codectx.Skip* or degrade reason).
type FileReason struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// MaxListed bounds the files a snapshot's meta names as skipped, and as
// degraded, and MaxListedBytes the bytes of their paths: the counts stay
// whole past them. A path longer than MaxListedPath (a file's longest,
// source.MaxPathBytes) is not named: a listing skips a tree entry of a
// name of megabytes as path_too_long, or quoted as bad_name, and 10,000
// of them made a meta, and every status reply, of hundreds of megabytes.
const (
	MaxListed      = 10000
	MaxListedPath  = 4096
	MaxListedBytes = 4 << 20
)

// Listed gives the files of byPath (path to reason) in path order, at
// most MaxListed of paths MaxListedBytes long in all, none longer than
// MaxListedPath.
func Listed(byPath map[string]string) []FileReason {
	if len(byPath) == 0 {
		return nil
	}
	out := make([]FileReason, 0, min(len(byPath), MaxListed))
	n := 0
	for _, p := range slices.Sorted(maps.Keys(byPath)) {
		if len(p) > MaxListedPath {
			continue
		}
		if n += len(p); len(out) == MaxListed || n > MaxListedBytes {
			break
		}
		out = append(out, FileReason{Path: p, Reason: byPath[p]})
	}
	return out
}

// Why gives the reason a file of the meta's lists was left out (skipped)
// or cut into line windows; ok is false when neither list names it.
func (m *Meta) Why(path string) (reason string, skipped, ok bool) {
	for _, l := range []struct {
		files   []FileReason
		skipped bool
	}{{m.SkippedFiles, true}, {m.DegradedFiles, false}} {
		i, found := slices.BinarySearchFunc(l.files, path, func(f FileReason, p string) int { return strings.Compare(f.Path, p) })
		if found {
			return l.files[i].Reason, l.skipped, true
		}
	}
	return "", false, false
}

// File is one indexed file of the snapshot.
type File struct {
	Path     string           `json:"path"`
	Language codectx.Language `json:"language"`
	Blob     string           `json:"blob"`
	Size     int64            `json:"size"`
	Chunks   []int            `json:"chunks"` // chunk ids, in line order
}

// Commit is one entry of the snapshot's recent history.
type Commit struct {
	Hash    string   `json:"hash"`
	Author  string   `json:"author"`
	When    string   `json:"when"` // RFC 3339
	Message string   `json:"message"`
	Files   []string `json:"files"`
}

// Segment is a loaded, read-only index of one snapshot.
type Segment struct {
	Meta     Meta
	Files    []File
	Chunks   []codectx.Chunk // chunk id = position
	BM25     *bm25.Index     // one document per chunk, doc id = chunk id
	FileBM25 *bm25.Index     // one document per file, doc id = position in Files
	Graph    *graph.Graph    // symbol ids = chunk ids
	History  []Commit

	syms   []symPart // the symbol table: one part per shard of a joined segment
	byPath map[string]int
	parts  []shardPart // of a joined segment: where each shard lies in it

	memoMu    sync.Mutex
	memo      map[string]any
	memoBytes atomic.Int64 // heapOf the memo values
	lent      *lent        // of a segment joined with shards of another (Joiner.Reuse): for MemoFrom

	heapOnce sync.Once
	heapBase int64 // HeapSize without what searchers derive later

	// Of a segment joined from in-place shards: the chunk id ranges whose
	// strings alias shard bytes, the shard files it maps and the bytes of
	// the shards it holds in the heap instead.
	aliased  [][2]int
	maps     []*mapfile.File
	heldHeap int64
	release  sync.Once

	residentAt atomic.Int64 // when ResidentSizeEvery last measured (Unix ns)
}

// Release gives back the segment's use of the shard files it maps: once
// no loaded segment uses a file, its pages are dropped from memory (see
// package mapfile; strings still pointing into it stay readable, paged
// back in from the file). The segment stays usable. A cache calls it on
// eviction.
func (s *Segment) Release() {
	s.release.Do(func() {
		for _, f := range s.maps {
			f.Release()
		}
		s.memoMu.Lock()
		s.lent = nil // an evicted segment lends no more
		s.memoMu.Unlock()
	})
}

// MappedSize is the length of the shard files the segment maps: the most
// its mappings can add to the resident set (ResidentSize is what they do
// now).
func (s *Segment) MappedSize() int64 {
	var n int64
	for _, f := range s.maps {
		if f.Mapped() {
			n += f.Len()
		}
	}
	return n
}

// ResidentSize is the part of the mapped shard files in this process's
// resident set now (see mapfile.File.Resident): the pages queries read
// since the segment was loaded, or since the files were last released.
func (s *Segment) ResidentSize() int64 {
	var n int64
	for _, f := range s.maps {
		if f.Mapped() {
			n += f.Resident()
		}
	}
	return n
}

// ResidentSizeEvery is ResidentSize measured at most once per every (a
// read of the page table per mapped shard, too dear for every query): it
// returns -1, "as last measured", between measures and to a caller racing
// one. The first call measures.
func (s *Segment) ResidentSizeEvery(every time.Duration) int64 {
	now := time.Now().UnixNano()
	last := s.residentAt.Load()
	if last != 0 && now-last < int64(every) || !s.residentAt.CompareAndSwap(last, now) {
		return -1
	}
	return s.ResidentSize()
}

// InPlace reports whether any of the segment's chunks alias shard bytes.
func (s *Segment) InPlace() bool { return len(s.aliased) > 0 }

// Memo returns the value build derives from the segment, building it on the
// first call for key and sharing it afterwards. Searchers keep per-segment
// tables here (a file-name index, tokenized history) instead of rebuilding
// them for every query; build must only read the segment. The value's
// heap is estimated once built and counted in HeapSize.
func (s *Segment) Memo(key string, build func() any) any {
	return s.MemoFrom(key, func(any, func(string) bool) any { return build() })
}

// lent is what a segment joined with shards taken from another (Joiner.Reuse)
// keeps of that one for MemoFrom: its memo values when the join ran, and
// the ranges of this segment's files that came from its shards. Each value
// is dropped once its key is built here, so no chain of snapshots is kept.
type lent struct {
	memo  map[string]any
	files [][2]int // ranges of Files taken from the other segment's shards
}

// MemoFrom is Memo for a table that can be built in part from the same
// table of the segment this one was joined from, when it was joined with
// shards of another (Joiner.Reuse) that had built it: build gets that
// value (nil if none) and same, which reports whether the file at a path
// came from a shard the two share, so that its entries of the old table
// are its entries of the new one (the same bytes: the same path, content,
// chunks and names). build must give what it gives with old nil.
func (s *Segment) MemoFrom(key string, build func(old any, same func(path string) bool) any) any {
	s.memoMu.Lock()
	defer s.memoMu.Unlock()
	if v, ok := s.memo[key]; ok {
		return v
	}
	if s.memo == nil {
		s.memo = map[string]any{}
	}
	var old any
	same := func(string) bool { return false }
	if l := s.lent; l != nil {
		old = l.memo[key]
		s.unlend(key)
		same = func(p string) bool {
			i, ok := s.byPath[p]
			for _, r := range l.files {
				if ok && i >= r[0] && i < r[1] {
					return true
				}
			}
			return false
		}
	}
	v := build(old, same)
	s.memo[key] = v
	s.memoBytes.Add(s.heapOf(v))
	return v
}

// unlend drops the lent value of key (built here now). Called with
// s.memoMu held.
func (s *Segment) unlend(key string) {
	if s.lent != nil {
		delete(s.lent.memo, key)
		if len(s.lent.memo) == 0 {
			s.lent = nil
		}
	}
}

// MemoGrew counts n more bytes in HeapSize for a memo value that grows
// after it was built (a table filled as queries ask for its entries).
func (s *Segment) MemoGrew(n int64) { s.memoBytes.Add(n) }

// New assembles a segment from its parts and derives the symbol table.
func New(meta Meta, files []File, chunks []codectx.Chunk, ix, fileIx *bm25.Index, g *graph.Graph, hist []Commit) *Segment {
	s := &Segment{Meta: meta, Files: files, Chunks: chunks, BM25: ix, FileBM25: fileIx, Graph: g, History: hist}
	s.syms = []symPart{buildSymbols(chunks)}
	s.index()
	return s
}

func (s *Segment) index() {
	s.byPath = make(map[string]int, len(s.Files))
	for i, f := range s.Files {
		s.byPath[f.Path] = i
	}
}

// Size estimates the bytes a loaded segment holds in memory: HeapSize
// plus MappedSize (all of the mapped shards counted, as if resident). The
// API's segment cache is bounded by this.
func (s *Segment) Size() int64 { return s.HeapSize() + s.MappedSize() }

// HeapSize estimates the bytes a loaded segment holds in the Go heap: its
// chunks, files, symbol table, history, BM25 indexes and graph (strings at
// their length plus a header, maps at about 48 bytes an entry), the bytes
// of in-place shards held as heap buffers, and what searchers derived from
// it since (Memo tables, BM25 norm tables), so it grows as the segment is
// queried; strings and arrays aliasing a mapping are not counted. The
// walk over the segment is done once (a loaded segment does not change),
// later calls are cheap.
func (s *Segment) HeapSize() int64 {
	s.heapOnce.Do(func() { s.heapBase = s.baseHeap() })
	n := s.heapBase + s.memoBytes.Load()
	for _, ix := range []*bm25.Index{s.BM25, s.FileBM25} {
		if ix != nil {
			n += ix.DerivedSize()
		}
	}
	return n
}

func (s *Segment) baseHeap() int64 {
	const str, slice, entry = 16, 24, 48
	strs := func(ss []string) int64 {
		n := int64(slice)
		for _, x := range ss {
			n += str + int64(len(x))
		}
		return n
	}
	n := int64(unsafe.Sizeof(Segment{}))
	n += int64(unsafe.Sizeof(codectx.Chunk{})) * int64(len(s.Chunks))
	r := 0 // the next aliased range
	for id, c := range s.Chunks {
		for r < len(s.aliased) && id >= s.aliased[r][1] {
			r++
		}
		if r < len(s.aliased) && id >= s.aliased[r][0] {
			// Aliased strings: only their headers are in the heap.
			n += str * int64(len(c.Calls)+len(c.Imports)+len(c.Types))
			continue
		}
		n += int64(len(c.Path) + len(c.Language) + len(c.Kind) + len(c.Name) + len(c.Signature) + len(c.Doc) + len(c.Body) + len(c.Hash))
		n += strs(c.Calls) + strs(c.Imports) + strs(c.Types) - 3*slice
	}
	n += s.heldHeap
	n += int64(unsafe.Sizeof(File{})+entry) * int64(len(s.Files))
	for _, f := range s.Files {
		n += int64(len(f.Path)+len(f.Language)+len(f.Blob)) + 8*int64(len(f.Chunks))
	}
	for _, p := range s.syms {
		for i, name := range p.names {
			n += str + slice + int64(len(name)) + 8*int64(len(p.ids[i]))
		}
	}
	for _, c := range s.History {
		n += int64(unsafe.Sizeof(Commit{})) + int64(len(c.Hash)+len(c.Author)+len(c.When)+len(c.Message)) + strs(c.Files)
	}
	for _, f := range slices.Concat(s.Meta.SkippedFiles, s.Meta.DegradedFiles) {
		n += int64(unsafe.Sizeof(FileReason{})) + int64(len(f.Path)+len(f.Reason))
	}
	for _, ix := range []*bm25.Index{s.BM25, s.FileBM25} {
		if ix != nil {
			n += ix.HeapSize()
		}
	}
	if s.Graph != nil {
		n += s.Graph.Size()
	}
	return n
}

// File returns the file with the given path.
func (s *Segment) File(path string) (File, bool) {
	i, ok := s.byPath[path]
	if !ok {
		return File{}, false
	}
	return s.Files[i], true
}

// FileIndex is the position of path in Files (and its document in
// FileBM25).
func (s *Segment) FileIndex(path string) (int, bool) {
	i, ok := s.byPath[path]
	return i, ok
}

// ShortName is the last component of a qualified name:
// "(*Router).Mount" -> "Mount", "Flask.add_url_rule" -> "add_url_rule",
// "Deserializer::deserialize_any" -> "deserialize_any".
func ShortName(name string) string {
	if i := strings.LastIndex(name, "::"); i >= 0 {
		name = name[i+2:]
	}
	if i := strings.LastIndexAny(name, ".)"); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// NormalizeName lowercases a qualified name and drops receiver decoration, so
// "(*Router).Mount" and "Router.Mount" meet.
func NormalizeName(name string) string {
	return strings.ToLower(nameReplacer.Replace(name))
}

// PlainName is NormalizeName without the lowercasing: receiver
// decoration dropped, "::", "#" and ".#" written ".". "(*Router).Mount"
// -> "Router.Mount", "Cache.#drop" -> "Cache.drop". Two names Lookup
// joins are spelled alike, case and all, when their PlainNames are equal.
func PlainName(name string) string { return nameReplacer.Replace(name) }

// nameReplacer is built once: building it (a generic replacer's tables)
// cost more than the replacing, and NormalizeName runs for every symbol of
// a segment when it is loaded. A JavaScript private member is named
// "Cache.#drop": ".#", tried before "#", makes it the "cache.drop" that
// "Cache#drop" (Javadoc's way) and "Cache.drop" look up.
var nameReplacer = strings.NewReplacer("(*", "", "(", "", ")", "", "::", ".", ".#", ".", "#", ".")

// symPart is the symbol table of a range of chunks (the whole segment, or
// one shard of a joined segment): the sorted lowercased names (qualified
// and short) and, for each, its chunk ids in ascending order, local to the
// range (base is the range's first chunk id). A joined segment keeps one
// per shard, so that the next snapshot's join takes an unchanged shard's
// table as it is; a name in several shards has its ids in each, and the
// parts in order give them in ascending order.
type symPart struct {
	base  int
	names []string
	ids   [][]int
}

// buildSymbols is the symbol table of chunks (ids local to them).
func buildSymbols(chunks []codectx.Chunk) symPart {
	m := map[string][]int{}
	for id, c := range chunks {
		if c.Name == "" || c.Kind == codectx.KindWindow {
			continue
		}
		full := NormalizeName(c.Name)
		m[full] = append(m[full], id)
		short := strings.ToLower(ShortName(c.Name))
		if strings.HasPrefix(short, "#") {
			// A JavaScript private name: kept as Lookup normalizes "#drop"
			// (unreachable as it was).
			short = NormalizeName(short)
		}
		if short != full && short != "" {
			m[short] = append(m[short], id)
		}
	}
	p := symPart{names: make([]string, 0, len(m))}
	for k := range m {
		p.names = append(p.names, k)
	}
	sort.Strings(p.names)
	p.ids = make([][]int, len(p.names))
	for i, k := range p.names {
		p.ids[i] = m[k]
	}
	return p
}

// Lookup returns the chunk ids whose qualified or short name equals name,
// compared case-insensitively after NormalizeName, in ascending order. The
// slice may be shared: do not change it.
func (s *Segment) Lookup(name string) []int {
	key := NormalizeName(name)
	var out []int
	for i := range s.syms {
		p := &s.syms[i]
		k := sort.SearchStrings(p.names, key)
		if k == len(p.names) || p.names[k] != key {
			continue
		}
		if p.base == 0 && out == nil {
			out = p.ids[k] // ids as they are: the first part's, or a single segment's
			continue
		}
		out = slices.Clip(out) // never append into a shared table
		for _, id := range p.ids[k] {
			out = append(out, p.base+id)
		}
	}
	return out
}

// HasSymbol reports whether name names a symbol of the snapshot.
func (s *Segment) HasSymbol(name string) bool { return len(s.Lookup(name)) > 0 }

// LookupPrefix returns ids of symbols whose normalised name starts with
// prefix (at most limit names are visited, in sorted order).
func (s *Segment) LookupPrefix(prefix string, limit int) []int {
	key := NormalizeName(prefix)
	pos := make([]int, len(s.syms))
	for i, p := range s.syms {
		pos[i] = sort.SearchStrings(p.names, key)
	}
	var out []int
	for ; limit > 0; limit-- {
		// The least next name with the prefix among the parts.
		next, found := "", false
		for i, p := range s.syms {
			if k := pos[i]; k < len(p.names) && strings.HasPrefix(p.names[k], key) && (!found || p.names[k] < next) {
				next, found = p.names[k], true
			}
		}
		if !found {
			break
		}
		for i, p := range s.syms {
			if k := pos[i]; k < len(p.names) && p.names[k] == next {
				for _, id := range p.ids[k] {
					out = append(out, p.base+id)
				}
				pos[i]++
			}
		}
	}
	return out
}

// symbolTable is the symbol table as one sorted list (ids of the whole
// segment): what a segment's encoding holds.
func (s *Segment) symbolTable() (names []string, ids [][]int) {
	if len(s.syms) == 1 && s.syms[0].base == 0 {
		return s.syms[0].names, s.syms[0].ids
	}
	m := map[string][]int{}
	for _, p := range s.syms {
		for k, name := range p.names {
			for _, id := range p.ids[k] {
				m[name] = append(m[name], p.base+id)
			}
		}
	}
	names = make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	ids = make([][]int, len(names))
	for i, k := range names {
		ids[i] = m[k]
	}
	return names, ids
}

// MarshalBinary encodes the segment.
func (s *Segment) MarshalBinary() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(magic)
	put := func(tag int, data []byte) {
		var hdr [2 * binary.MaxVarintLen64]byte
		n := binary.PutUvarint(hdr[:], uint64(tag))
		n += binary.PutUvarint(hdr[n:], uint64(len(data)))
		buf.Write(hdr[:n])
		buf.Write(data)
	}
	for _, sec := range []struct {
		tag  int
		data func() ([]byte, error)
	}{
		{tagMeta, func() ([]byte, error) { return gzipJSON(s.Meta) }},
		{tagFiles, func() ([]byte, error) { return gzipJSONList(s.Files) }},
		{tagChunks, func() ([]byte, error) { return gzipJSONList(s.Chunks) }},
		{tagHistory, func() ([]byte, error) { return gzipJSONList(s.History) }},
	} {
		data, err := sec.data()
		if err != nil {
			return nil, fmt.Errorf("segment: encode section %d: %w", sec.tag, err)
		}
		put(sec.tag, data)
	}
	names, ids := s.symbolTable()
	syms, err := gzipJSON(struct {
		Names []string
		IDs   [][]int
	}{names, ids})
	if err != nil {
		return nil, fmt.Errorf("segment: encode symbols: %w", err)
	}
	put(tagSymbols, syms)
	if s.BM25 != nil {
		data, err := s.BM25.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("segment: encode bm25: %w", err)
		}
		put(tagBM25, data)
	}
	if s.FileBM25 != nil {
		data, err := s.FileBM25.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("segment: encode file bm25: %w", err)
		}
		put(tagFileBM25, data)
	}
	if s.Graph != nil {
		data, err := s.Graph.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("segment: encode graph: %w", err)
		}
		put(tagGraph, data)
	}
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], crc32.Checksum(buf.Bytes(), crcTable))
	buf.Write(sum[:])
	return buf.Bytes(), nil
}

func walk(data []byte, fn func(tag int, payload []byte) error) error {
	if len(data) < len(magic)+4 || string(data[:len(magic)]) != magic {
		return fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	return walkBody(data, len(magic), fn)
}

// walkBody checks the checksum of data and calls fn for each section after
// the magic of length skip.
func walkBody(data []byte, skip int, fn func(tag int, payload []byte) error) error {
	if len(data) < skip+4 {
		return fmt.Errorf("%w: too short", ErrCorrupt)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	p := body[skip:]
	for len(p) > 0 {
		tag, n := binary.Uvarint(p)
		if n <= 0 {
			return fmt.Errorf("%w: bad section tag", ErrCorrupt)
		}
		p = p[n:]
		size, n := binary.Uvarint(p)
		if n <= 0 || size > uint64(len(p)-n) {
			return fmt.Errorf("%w: bad section length", ErrCorrupt)
		}
		p = p[n:]
		if err := fn(int(tag), p[:size]); err != nil {
			return err
		}
		p = p[size:]
	}
	return nil
}

// Load decodes a segment written by MarshalBinary.
func Load(data []byte) (*Segment, error) {
	s := &Segment{}
	var syms struct {
		Names []string
		IDs   [][]int
	}
	err := walk(data, func(tag int, p []byte) error {
		var err error
		switch tag {
		case tagMeta:
			err = gunzipJSON(p, &s.Meta)
		case tagFiles:
			s.Files, err = gunzipJSONList[File](p)
		case tagChunks:
			s.Chunks, err = gunzipJSONList[codectx.Chunk](p)
		case tagHistory:
			s.History, err = gunzipJSONList[Commit](p)
		case tagSymbols:
			err = gunzipJSON(p, &syms)
		// The indexes keep their postings as slices of the bytes they are
		// given: a copy of the section lets the rest of data go.
		case tagBM25:
			s.BM25, err = bm25.Load(bytes.Clone(p))
		case tagFileBM25:
			s.FileBM25, err = bm25.Load(bytes.Clone(p))
		case tagGraph:
			s.Graph, err = graph.Load(p)
		}
		if err != nil {
			return fmt.Errorf("segment: section %d: %w", tag, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.BM25 == nil || s.Graph == nil {
		return nil, fmt.Errorf("%w: missing bm25 or graph section", ErrCorrupt)
	}
	if s.BM25.NumDocs() != len(s.Chunks) || (s.FileBM25 != nil && s.FileBM25.NumDocs() != len(s.Files)) {
		return nil, fmt.Errorf("%w: bm25 document count does not match", ErrCorrupt)
	}
	if len(syms.Names) != len(syms.IDs) {
		return nil, fmt.Errorf("%w: symbol table", ErrCorrupt)
	}
	for _, ids := range syms.IDs {
		for _, id := range ids {
			if id < 0 || id >= len(s.Chunks) {
				return nil, fmt.Errorf("%w: symbol id out of range", ErrCorrupt)
			}
		}
	}
	for _, f := range s.Files {
		for _, id := range f.Chunks {
			if id < 0 || id >= len(s.Chunks) {
				return nil, fmt.Errorf("%w: chunk id out of range", ErrCorrupt)
			}
		}
	}
	s.syms = []symPart{{names: syms.Names, ids: syms.IDs}}
	s.index()
	return s, nil
}

func gzipJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err := json.NewEncoder(zw).Encode(v); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gzipJSONList encodes a list as gzip-compressed JSON one element at a
// time, so the uncompressed JSON of the whole list (several times the
// source of a big repository) is never held in memory. The bytes are an
// ordinary JSON array (elements on lines of their own).
func gzipJSONList[T any](list []T) ([]byte, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	enc := json.NewEncoder(zw)
	if list == nil {
		io.WriteString(zw, "null")
	} else {
		io.WriteString(zw, "[")
		for i := range list {
			if i > 0 {
				io.WriteString(zw, ",")
			}
			if err := enc.Encode(&list[i]); err != nil {
				return nil, err
			}
		}
		io.WriteString(zw, "]")
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gunzipJSONAppend decodes a JSON array (or null) like gunzipJSONList,
// appending its elements to out.
func gunzipJSONAppend[T any](p []byte, out []T) ([]T, error) {
	zr, err := gzip.NewReader(bytes.NewReader(p))
	if err != nil {
		return out, err
	}
	defer zr.Close()
	dec := json.NewDecoder(zr)
	tok, err := dec.Token()
	if err != nil {
		return out, err
	}
	if tok == nil {
		return out, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return out, fmt.Errorf("want a JSON array, got %v", tok)
	}
	for dec.More() {
		out = append(out, *new(T))
		if err := dec.Decode(&out[len(out)-1]); err != nil {
			return out, err
		}
	}
	if _, err := dec.Token(); err != nil { // ']'
		return out, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return out, fmt.Errorf("data after the JSON array")
	}
	return out, nil
}

// gunzipJSONList decodes a JSON array (or null) from gzip-compressed p one
// element at a time, holding only one element's JSON at once.
func gunzipJSONList[T any](p []byte) ([]T, error) {
	return gunzipJSONAppend[T](p, nil)
}

func gunzipJSON(p []byte, v any) error {
	zr, err := gzip.NewReader(bytes.NewReader(p))
	if err != nil {
		return err
	}
	defer zr.Close()
	data, err := io.ReadAll(zr)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}
