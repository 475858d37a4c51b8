package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"codectx/pkg/bm25"
	"codectx/pkg/codectx"
	"codectx/pkg/graph"
	"codectx/pkg/mapfile"
)

// A repository's index at a commit is either one segment (the format
// above) or a shard list: a small object naming immutable shards, each
// holding the files of one range of paths with their chunks and BM25
// postings, plus what spans shards (the graph, the history). The object at
// a segment key is either; Open-style loaders tell them apart by magic.
//
// A shard's chunk and document ids are local (0..n-1). Joined in list
// order, shard i's ids are offset by the chunks (files) of the shards
// before it: the joined segment is the one a single build of the same
// files in the same order gives, byte for byte in its indexes (BM25 counts
// and lengths are sums over shards, see bm25.Concat), so every score is.
const (
	shardMagic = "CTXSHD1\n"
	listMagic  = "CTXSET1\n"
)

// Section tags of shards and shard lists (besides those of segments).
const (
	tagGraphIn = 9  // a shard's graph input: its code files, symbols with local ids
	tagShards  = 10 // a shard list's shards
	tagStats   = 11 // a shard's counts
)

// ShardStats counts what a shard holds, for build summaries.
type ShardStats struct {
	Files           int            `json:"files"` // indexed files (with chunks or without)
	Chunks          int            `json:"chunks"`
	Bytes           int64          `json:"bytes"` // source bytes of all its files, skipped ones too
	FilesByLanguage map[string]int `json:"files_by_language,omitempty"`
	ChunksByKind    map[string]int `json:"chunks_by_kind,omitempty"`
	Skipped         map[string]int `json:"skipped,omitempty"` // files its parse skipped, by reason
	Degraded        map[string]int `json:"degraded,omitempty"`
	// SkippedFiles and DegradedFiles give the reason of each file Skipped
	// and Degraded count, by path (a shard built before they were kept
	// has none).
	SkippedFiles  map[string]string `json:"skipped_files,omitempty"`
	DegradedFiles map[string]string `json:"degraded_files,omitempty"`
}

// Shard is one immutable part of a sharded index: the files of a range of
// paths, their chunks, the chunk and whole-file BM25 indexes over them and
// the graph input the snapshot's graph is built from.
type Shard struct {
	Stats    ShardStats
	Files    []File // chunk ids local to the shard
	Chunks   []codectx.Chunk
	BM25     *bm25.Index
	FileBM25 *bm25.Index
	GraphIn  []graph.FileInput // symbol ids local to the shard
}

// ShardRef names one shard in a shard list.
type ShardRef struct {
	Key    string `json:"key"`
	First  string `json:"first"`  // the range starts at this path ("" for the first shard)
	Digest string `json:"digest"` // of the shard's inputs (its files' paths, blobs and sizes, parser version)
	Files  int    `json:"files"`
	Chunks int    `json:"chunks"`
	Bytes  int    `json:"bytes"` // encoded size
}

// ShardList is a sharded index of one snapshot.
type ShardList struct {
	Meta    Meta
	Shards  []ShardRef
	History []Commit
	Graph   *graph.Graph // over the joined ids
}

// IsShardList reports whether data is an encoded shard list.
func IsShardList(data []byte) bool { return bytes.HasPrefix(data, []byte(listMagic)) }

type sectionWriter struct{ buf bytes.Buffer }

func newSectionWriter(magic string) *sectionWriter {
	w := &sectionWriter{}
	w.buf.WriteString(magic)
	return w
}

func (w *sectionWriter) put(tag int, data []byte) {
	var hdr [2 * binary.MaxVarintLen64]byte
	n := binary.PutUvarint(hdr[:], uint64(tag))
	n += binary.PutUvarint(hdr[n:], uint64(len(data)))
	w.buf.Write(hdr[:n])
	w.buf.Write(data)
}

func (w *sectionWriter) bytes() []byte {
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], crc32.Checksum(w.buf.Bytes(), crcTable))
	w.buf.Write(sum[:])
	return w.buf.Bytes()
}

// MarshalBinary encodes the shard in the in-place format (CTXSHD2).
func (s *Shard) MarshalBinary() ([]byte, error) { return s.marshalInPlace() }

// MarshalV1 encodes the shard in the format before the in-place one
// (CTXSHD1, chunks as gzip-compressed JSON), which is still read: for
// tests of stores written before.
func (s *Shard) MarshalV1() ([]byte, error) {
	w := newSectionWriter(shardMagic)
	for _, sec := range []struct {
		tag  int
		data func() ([]byte, error)
	}{
		{tagStats, func() ([]byte, error) { return gzipJSON(s.Stats) }},
		{tagGraphIn, func() ([]byte, error) { return gzipJSONList(s.GraphIn) }},
		{tagFiles, func() ([]byte, error) { return gzipJSONList(s.Files) }},
		{tagChunks, func() ([]byte, error) { return gzipJSONList(s.Chunks) }},
		{tagBM25, s.BM25.MarshalBinary},
		{tagFileBM25, s.FileBM25.MarshalBinary},
	} {
		data, err := sec.data()
		if err != nil {
			return nil, fmt.Errorf("segment: encode shard section %d: %w", sec.tag, err)
		}
		w.put(sec.tag, data)
	}
	return w.bytes(), nil
}

// walkShard calls fn for each section of a shard in either format.
func walkShard(data []byte, fn func(tag int, payload []byte) error) error {
	if IsInPlaceShard(data) {
		return walkInPlace(data, fn)
	}
	return walkMagic(data, shardMagic, fn)
}

// LoadShard decodes a shard. With full false only its counts, files and
// graph input are decoded (what a build that reuses the shard needs). A
// full in-place shard's chunk strings and BM25 arrays alias data, which
// must then not change.
func LoadShard(data []byte, full bool) (*Shard, error) {
	return loadShard(data, full, nil)
}

// LoadShardGraphIn is LoadShard(data, true) with the shard's graph input
// given instead of decoded from data: the input a build kept of this
// shard (the caller checks it is this shard's, by its checksum).
func LoadShardGraphIn(data []byte, graphIn []graph.FileInput) (*Shard, error) {
	return loadShard(data, true, graphIn)
}

func loadShard(data []byte, full bool, graphIn []graph.FileInput) (*Shard, error) {
	s := &Shard{}
	err := walkShard(data, func(tag int, p []byte) error {
		var err error
		switch tag {
		case tagChunksRaw:
			if full {
				s.Chunks, err = decodeChunksRaw(p, nil)
			}
		case tagStats:
			err = gunzipJSON(p, &s.Stats)
		case tagGraphIn:
			if graphIn != nil {
				s.GraphIn = graphIn
			} else {
				s.GraphIn, err = gunzipJSONList[graph.FileInput](p)
			}
		case tagFiles:
			s.Files, err = gunzipJSONList[File](p)
		case tagChunks:
			if full {
				s.Chunks, err = gunzipJSONList[codectx.Chunk](p)
			}
		case tagBM25:
			if full {
				s.BM25, err = loadBM25(data, p)
			}
		case tagFileBM25:
			if full {
				s.FileBM25, err = loadBM25(data, p)
			}
		}
		if err != nil {
			return fmt.Errorf("segment: shard section %d: %w", tag, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.Stats.Files != len(s.Files) {
		return nil, fmt.Errorf("%w: shard has %d files, counts say %d", ErrCorrupt, len(s.Files), s.Stats.Files)
	}
	if !full {
		return s, nil
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

// loadBM25 loads a shard's BM25 section p: aliased when the shard is in
// place, decoded from a copy (so the rest of the shard's bytes can go)
// otherwise.
func loadBM25(shard, p []byte) (*bm25.Index, error) {
	if IsInPlaceShard(shard) {
		return bm25.LoadRaw(p)
	}
	return bm25.Load(bytes.Clone(p))
}

// check validates a fully decoded shard: counts and ids in range.
func (s *Shard) check() error {
	if s.Stats.Files != len(s.Files) || s.BM25 == nil || s.FileBM25 == nil || s.BM25.NumDocs() != len(s.Chunks) || s.FileBM25.NumDocs() != len(s.Files) || s.Stats.Chunks != len(s.Chunks) {
		return fmt.Errorf("%w: shard document counts do not match", ErrCorrupt)
	}
	for _, f := range s.Files {
		for _, id := range f.Chunks {
			if id < 0 || id >= len(s.Chunks) {
				return fmt.Errorf("%w: shard chunk id out of range", ErrCorrupt)
			}
		}
	}
	return nil
}

// MarshalBinary encodes the shard list.
func (l *ShardList) MarshalBinary() ([]byte, error) {
	w := newSectionWriter(listMagic)
	for _, sec := range []struct {
		tag  int
		data func() ([]byte, error)
	}{
		{tagMeta, func() ([]byte, error) { return gzipJSON(l.Meta) }},
		{tagShards, func() ([]byte, error) { return gzipJSONList(l.Shards) }},
		{tagHistory, func() ([]byte, error) { return gzipJSONList(l.History) }},
		{tagGraph, l.Graph.MarshalBinary},
	} {
		data, err := sec.data()
		if err != nil {
			return nil, fmt.Errorf("segment: encode shard list section %d: %w", sec.tag, err)
		}
		w.put(sec.tag, data)
	}
	return w.bytes(), nil
}

// LoadShardList decodes a shard list. With full false the graph and the
// history are not decoded (what GC and a build that plans shards need).
func LoadShardList(data []byte, full bool) (*ShardList, error) {
	return loadShardList(data, full, graph.Load)
}

// LoadShardListWith is LoadShardList in full with the graph section
// decoded by loadGraph (which may give a graph it has for those bytes).
func LoadShardListWith(data []byte, loadGraph func(section []byte) (*graph.Graph, error)) (*ShardList, error) {
	return loadShardList(data, true, loadGraph)
}

// GraphSection returns the graph section of a shard list: the bytes
// LoadShardListWith gives its loadGraph.
func GraphSection(data []byte) ([]byte, error) {
	var sec []byte
	err := walkMagic(data, listMagic, func(tag int, p []byte) error {
		if tag == tagGraph {
			sec = p
		}
		return nil
	})
	if err == nil && sec == nil {
		err = fmt.Errorf("%w: shard list without a graph", ErrCorrupt)
	}
	return sec, err
}

func loadShardList(data []byte, full bool, loadGraph func([]byte) (*graph.Graph, error)) (*ShardList, error) {
	l := &ShardList{}
	err := walkMagic(data, listMagic, func(tag int, p []byte) error {
		var err error
		switch tag {
		case tagMeta:
			err = gunzipJSON(p, &l.Meta)
		case tagShards:
			l.Shards, err = gunzipJSONList[ShardRef](p)
		case tagHistory:
			if full {
				l.History, err = gunzipJSONList[Commit](p)
			}
		case tagGraph:
			if full {
				l.Graph, err = loadGraph(p)
			}
		}
		if err != nil {
			return fmt.Errorf("segment: shard list section %d: %w", tag, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if full && l.Graph == nil {
		return nil, fmt.Errorf("%w: shard list without a graph", ErrCorrupt)
	}
	return l, nil
}

// Join assembles the segment of a shard list from its shards (loaded in
// full, in list order). Chunk and file ids are offset shard by shard and
// the BM25 indexes searched as one (bm25.Multi), so the segment answers
// as the one a single build gives. The shards' memory may be reused: do not use them after.
func Join(l *ShardList, shards []*Shard) (*Segment, error) {
	j := NewJoiner(l)
	for _, sh := range shards {
		if err := j.add(sh, false); err != nil {
			return nil, err
		}
	}
	return j.Segment()
}

// Joiner assembles the segment of a shard list shard by shard, decoding
// each shard's chunk records and files straight into the joined lists.
// An in-place shard (CTXSHD2) is used where it lies: its chunk strings and
// BM25 arrays alias its bytes, which the segment then holds (a heap
// buffer, or a mapping given to AddFile). An old shard (CTXSHD1) is
// decoded into the heap, holding one shard's bytes at a time.
type Joiner struct {
	l       *ShardList
	s       *Segment
	ix, fix []*bm25.Index
	next    int
	fresh   []*mapfile.File // the mappings this join read (checked), not taken from prev
	prev    *Segment
	reuse   map[string]*shardPart // of prev, by shard key
	// lentFiles are the ranges of the joined Files taken from prev.
	lentFiles [][2]int
}

// shardPart is where one shard lies in a joined segment, and what of it a
// later join takes for the same shard (same key, so the same bytes): its
// chunk and file ranges, BM25 indexes, symbol table (base: chunks) and
// the mapping or heap bytes its chunks alias.
type shardPart struct {
	key               string
	chunkBase, chunks int
	fileBase, files   int
	bm25, fileBM25    *bm25.Index
	syms              symPart
	aliased           bool          // the chunks' strings alias the shard's bytes
	file              *mapfile.File // the mapping (or heap copy) holding them, if any
	held              int64         // bytes of the shard held in the heap for them
}

// NewJoiner starts joining the shards of l.
func NewJoiner(l *ShardList) *Joiner {
	nc, nf := 0, 0
	for _, r := range l.Shards {
		nc += r.Chunks
		nf += r.Files
	}
	s := &Segment{Meta: l.Meta, Graph: l.Graph, History: l.History}
	// The counts come from the list, checked against each shard as it is
	// added: a corrupt list must not make us allocate without bound.
	if nc > 0 && nc < 1<<26 {
		s.Chunks = make([]codectx.Chunk, 0, nc)
	}
	if nf > 0 && nf < 1<<24 {
		s.Files = make([]File, 0, nf)
	}
	return &Joiner{l: l, s: s}
}

// Reuse makes the join take the shards it shares with prev, a segment
// joined before (the repository's previous snapshot: most of its shards
// are unchanged), from prev instead of reading them: AddReused. Such a
// shard's chunks, files, BM25 indexes and symbol table are those prev
// decoded and checked, shared (all are read-only), its mapping held once
// more; the joined segment answers as one joined from the shards' bytes.
func (j *Joiner) Reuse(prev *Segment) {
	if prev == nil || len(prev.parts) == 0 {
		return
	}
	j.prev, j.reuse = prev, make(map[string]*shardPart, len(prev.parts))
	for i := range prev.parts {
		j.reuse[prev.parts[i].key] = &prev.parts[i]
	}
}

// AddReused adds the next shard of the list from the segment given to
// Reuse when that holds it (the same key, with the counts the list names)
// and reports whether it did; if not, add the shard from its bytes.
func (j *Joiner) AddReused() bool {
	if j.next >= len(j.l.Shards) {
		return false
	}
	ref := j.l.Shards[j.next]
	p := j.reuse[ref.Key]
	if p == nil || p.chunks != ref.Chunks || p.files != ref.Files {
		return false
	}
	base, fbase := len(j.s.Chunks), len(j.s.Files)
	j.s.Chunks = append(j.s.Chunks, j.prev.Chunks[p.chunkBase:p.chunkBase+p.chunks]...)
	files := j.prev.Files[p.fileBase : p.fileBase+p.files]
	n := 0
	for _, f := range files {
		n += len(f.Chunks)
	}
	ids := make([]int, 0, n)
	for _, f := range files {
		start := len(ids)
		for _, id := range f.Chunks {
			ids = append(ids, id-p.chunkBase+base)
		}
		f.Chunks = ids[start:len(ids):len(ids)]
		j.s.Files = append(j.s.Files, f)
	}
	j.ix = append(j.ix, p.bm25)
	j.fix = append(j.fix, p.fileBM25)
	q := *p
	q.chunkBase, q.fileBase = base, fbase
	q.syms.base = base
	if q.aliased {
		j.s.aliased = append(j.s.aliased, [2]int{base, len(j.s.Chunks)})
	}
	if q.file != nil {
		q.file.Acquire()
		j.s.maps = append(j.s.maps, q.file)
	}
	j.s.heldHeap += q.held
	j.s.parts = append(j.s.parts, q)
	j.lentFiles = append(j.lentFiles, [2]int{fbase, len(j.s.Files)})
	j.next++
	return true
}

// AddFile adds the next shard from a file mapping: the segment holds one
// use of it (Segment.Release gives it back).
func (j *Joiner) AddFile(f *mapfile.File) error {
	if err := j.addData(f.Data(), f); err != nil {
		f.Release()
		return err
	}
	return nil
}

// Add adds the next shard of the list from its encoded bytes: kept by the
// segment for an in-place shard (they must not change), not kept for an
// old one.
func (j *Joiner) Add(data []byte) error { return j.addData(data, nil) }

func (j *Joiner) addData(data []byte, f *mapfile.File) error {
	if j.next >= len(j.l.Shards) {
		return fmt.Errorf("segment: join: more shards than the list's %d", len(j.l.Shards))
	}
	ref := j.l.Shards[j.next]
	base := len(j.s.Chunks)
	sh := &Shard{}
	err := walkShard(data, func(tag int, p []byte) error {
		var err error
		switch tag {
		case tagStats:
			err = gunzipJSON(p, &sh.Stats)
		case tagFiles:
			sh.Files, err = gunzipJSONList[File](p)
		case tagChunks:
			j.s.Chunks, err = gunzipJSONAppend(p, j.s.Chunks)
		case tagChunksRaw:
			j.s.Chunks, err = decodeChunksRaw(p, j.s.Chunks)
		case tagBM25:
			sh.BM25, err = loadBM25(data, p)
		case tagFileBM25:
			sh.FileBM25, err = loadBM25(data, p)
		}
		if err != nil {
			return fmt.Errorf("segment: shard %s section %d: %w", ref.Key, tag, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sh.Chunks = j.s.Chunks[base:]
	if err := sh.check(); err != nil {
		j.s.Chunks = j.s.Chunks[:base]
		return fmt.Errorf("shard %s: %w", ref.Key, err)
	}
	if err := j.add(sh, true); err != nil {
		j.s.Chunks = j.s.Chunks[:base]
		return err
	}
	part := &j.s.parts[len(j.s.parts)-1]
	if IsInPlaceShard(data) {
		j.s.aliased = append(j.s.aliased, [2]int{base, len(j.s.Chunks)})
		part.aliased = true
		if f != nil && f.Mapped() {
			j.s.maps = append(j.s.maps, f)
			j.fresh = append(j.fresh, f)
		} else {
			j.s.heldHeap += int64(len(data))
			part.held = int64(len(data))
			if f != nil {
				j.s.maps = append(j.s.maps, f) // a heap copy: counted as heap
			}
		}
		part.file = f
	} else if f != nil {
		f.Release() // decoded: the file is not used
	}
	return nil
}

// add appends a decoded shard; with inPlace its chunks already end the
// joined list (Add decodes them there).
func (j *Joiner) add(sh *Shard, inPlace bool) error {
	if j.next >= len(j.l.Shards) {
		return fmt.Errorf("segment: join: more shards than the list's %d", len(j.l.Shards))
	}
	ref := j.l.Shards[j.next]
	if len(sh.Chunks) != ref.Chunks || len(sh.Files) != ref.Files {
		return fmt.Errorf("%w: shard %s holds %d chunks and %d files, the list says %d and %d",
			ErrCorrupt, ref.Key, len(sh.Chunks), len(sh.Files), ref.Chunks, ref.Files)
	}
	j.next++
	if inPlace {
		j.s.Chunks = j.s.Chunks[:len(j.s.Chunks)-len(sh.Chunks)]
	}
	base := len(j.s.Chunks)
	for _, f := range sh.Files {
		for k := range f.Chunks {
			f.Chunks[k] += base
		}
		j.s.Files = append(j.s.Files, f)
	}
	if inPlace {
		j.s.Chunks = j.s.Chunks[:base+len(sh.Chunks)]
	} else {
		j.s.Chunks = append(j.s.Chunks, sh.Chunks...)
	}
	j.ix = append(j.ix, sh.BM25)
	j.fix = append(j.fix, sh.FileBM25)
	syms := buildSymbols(j.s.Chunks[base:])
	syms.base = base
	j.s.parts = append(j.s.parts, shardPart{
		key: ref.Key, chunkBase: base, chunks: len(sh.Chunks), fileBase: len(j.s.Files) - len(sh.Files), files: len(sh.Files),
		bm25: sh.BM25, fileBM25: sh.FileBM25, syms: syms,
	})
	sh.Chunks, sh.Files = nil, nil
	return nil
}

// Segment returns the joined segment once every shard was added.
func (j *Joiner) Segment() (*Segment, error) {
	if j.next != len(j.l.Shards) {
		return nil, fmt.Errorf("segment: join: %d of %d shards added", j.next, len(j.l.Shards))
	}
	s := j.s
	s.BM25, s.FileBM25 = bm25.Multi(j.ix), bm25.Multi(j.fix)
	j.ix, j.fix = nil, nil
	s.syms = make([]symPart, len(s.parts))
	for i, p := range s.parts {
		s.syms[i] = p.syms
	}
	s.index()
	// The checksums, the chunk records and the symbol table read every
	// page of the shards this join mapped: drop them, so that the process
	// holds only the pages its queries read (the page cache keeps them).
	// The shards taken from prev were not read; their pages are those
	// prev's queries read, which this segment's will read too.
	for _, f := range j.fresh {
		f.Drop()
	}
	if len(j.lentFiles) > 0 {
		j.prev.memoMu.Lock()
		memo := make(map[string]any, len(j.prev.memo))
		for k, v := range j.prev.memo {
			memo[k] = v
		}
		j.prev.memoMu.Unlock()
		if len(memo) > 0 {
			s.lent = &lent{memo: memo, files: j.lentFiles}
		}
	}
	j.prev, j.reuse, j.lentFiles = nil, nil, nil
	return s, nil
}

// Release gives back the mappings of the shards added so far, when the
// join is abandoned (an error); a finished join's segment holds them.
func (j *Joiner) Release() { j.s.Release() }

func walkMagic(data []byte, want string, fn func(tag int, payload []byte) error) error {
	if !bytes.HasPrefix(data, []byte(want)) {
		return fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	return walkBody(data, len(want), fn)
}

// CheckShard verifies a shard's magic and checksum without decoding it
// and returns the checksum: what a build that kept the shard's counts and
// graph input from an earlier read checks before naming it again.
func CheckShard(data []byte) (uint32, error) {
	if err := walkShard(data, func(int, []byte) error { return nil }); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(data[len(data)-4:]), nil
}
