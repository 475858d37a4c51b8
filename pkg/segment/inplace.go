package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"unsafe"

	"codectx/pkg/bm25"
	"codectx/pkg/codectx"
)

// The in-place shard format (CTXSHD2, what builds write since) is laid out
// to be used where it lies, typically a read-only memory mapping of the
// shard file (see package mapfile): its BM25 indexes are in bm25's
// in-place layout (arrays aliased, not decoded) and its chunks a table of
// fixed records whose strings (bodies, names, paths, calls...) point into
// one uncompressed arena, aliased as Go strings. Only the chunk records
// (the codectx.Chunk structs, with one string header per call, import and
// type name) and the small sections (counts, files, graph input: gzip
// JSON as in CTXSHD1) are decoded into the heap.
//
//	magic "CTXSHD2\n"
//	sections: tag uint32 | length uint32 | payload | zeros to a multiple of 8
//	CRC-32C (Castagnoli) of everything before it, uint32
//
// All integers are little-endian; every payload starts at a multiple of 8
// from the start of the file, so the arrays in it are aligned in a mapping
// (page-aligned) or a heap buffer. The checksum is verified when a shard
// is opened (a pass over its pages: a cold shard costs page-ins and a
// CRC, not a decode), and every offset is checked against its section, so
// a corrupt or truncated file is an error, never a panic.
//
// Chunks section (tagChunksRaw):
//
//	n | refs | arena bytes | record words (26), uint32 each
//	n records of 26 uint32: start line, end line, start byte, end byte,
//	  then (offset, length) in the arena of path, language, kind, name,
//	  signature, doc, body and hash, then (first ref, count) of calls,
//	  imports and types
//	refs (offset, length) pairs: the list elements, in order
//	arena: the strings' bytes (short strings stored once)
const (
	shardMagic2  = "CTXSHD2\n"
	tagChunksRaw = 12
	recWords     = 26
)

// alignedWriter writes the sections of an in-place shard.
type alignedWriter struct{ b []byte }

func (w *alignedWriter) header(tag, n int) {
	w.b = binary.LittleEndian.AppendUint32(w.b, uint32(tag))
	w.b = binary.LittleEndian.AppendUint32(w.b, uint32(n))
}

func (w *alignedWriter) pad() {
	for len(w.b)%8 != 0 {
		w.b = append(w.b, 0)
	}
}

// sectionSize is the bytes a section of n payload bytes takes: its
// header, the payload and the padding.
func sectionSize(n int) int { return 8 + (n+7)&^7 }

// marshalInPlace encodes the shard in the in-place format, into one
// buffer of the shard's size.
func (s *Shard) marshalInPlace() ([]byte, error) {
	type section struct {
		tag  int
		data []byte
	}
	var small []section
	for _, sec := range []struct {
		tag  int
		data func() ([]byte, error)
	}{
		{tagStats, func() ([]byte, error) { return gzipJSON(s.Stats) }},
		{tagGraphIn, func() ([]byte, error) { return gzipJSONList(s.GraphIn) }},
		{tagFiles, func() ([]byte, error) { return gzipJSONList(s.Files) }},
	} {
		data, err := sec.data()
		if err == nil && len(data) > 1<<32-1 {
			err = fmt.Errorf("%d bytes is too large", len(data))
		}
		if err != nil {
			return nil, fmt.Errorf("segment: encode shard section %d: %w", sec.tag, err)
		}
		small = append(small, section{sec.tag, data})
	}
	ct, err := newChunkTable(s.Chunks)
	if err != nil {
		return nil, fmt.Errorf("segment: encode shard section %d: %w", tagChunksRaw, err)
	}
	ixs := []struct {
		tag int
		ix  *bm25.Index
	}{{tagBM25, s.BM25}, {tagFileBM25, s.FileBM25}}
	size := len(shardMagic2) + 4
	for _, sec := range small {
		size += sectionSize(len(sec.data))
	}
	if ct.size() > 1<<32-1 {
		return nil, fmt.Errorf("segment: encode shard section %d: %d bytes is too large", tagChunksRaw, ct.size())
	}
	size += sectionSize(ct.size())
	rawSizes := make([]int, len(ixs))
	for i, sec := range ixs {
		n := sec.ix.RawSize()
		if n > 1<<32-1 {
			return nil, fmt.Errorf("segment: shard bm25 of %d bytes is too large", n)
		}
		rawSizes[i] = n
		size += sectionSize(n)
	}
	w := &alignedWriter{b: append(make([]byte, 0, size), shardMagic2...)}
	for _, sec := range small {
		w.header(sec.tag, len(sec.data))
		w.b = append(w.b, sec.data...)
		w.pad()
	}
	w.header(tagChunksRaw, ct.size())
	w.b = ct.appendTo(w.b)
	w.pad()
	for i, sec := range ixs {
		w.header(sec.tag, rawSizes[i])
		if w.b, err = sec.ix.AppendRaw(w.b); err != nil {
			return nil, fmt.Errorf("segment: encode shard section %d: %w", sec.tag, err)
		}
		w.pad()
	}
	return binary.LittleEndian.AppendUint32(w.b, crc32.Checksum(w.b, crcTable)), nil
}

// walkInPlace checks an in-place shard's checksum and framing and calls fn
// for each section (payloads alias data).
func walkInPlace(data []byte, fn func(tag int, payload []byte) error) error {
	if len(data) < len(shardMagic2)+4 || string(data[:len(shardMagic2)]) != shardMagic2 {
		return fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	end := len(data) - 4
	if crc32.Checksum(data[:end], crcTable) != binary.LittleEndian.Uint32(data[end:]) {
		return fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	for p := len(shardMagic2); p < end; {
		if end-p < 8 {
			return fmt.Errorf("%w: bad section header", ErrCorrupt)
		}
		tag := binary.LittleEndian.Uint32(data[p:])
		n := int(binary.LittleEndian.Uint32(data[p+4:]))
		p += 8
		if n > end-p {
			return fmt.Errorf("%w: bad section length", ErrCorrupt)
		}
		if err := fn(int(tag), data[p:p+n:p+n]); err != nil {
			return err
		}
		p += (n + 7) &^ 7
		if p > end {
			return fmt.Errorf("%w: bad section padding", ErrCorrupt)
		}
	}
	return nil
}

// maxSharedString is the longest string the chunk table stores once for
// all its uses; a longer one (a body) is stored at each use.
const maxSharedString = 256

// chunkTable is the in-place chunk table of a list of chunks, before it
// is laid out (appendTo).
type chunkTable struct {
	n     int
	recs  []uint32
	refs  []uint32
	arena []byte
}

// newChunkTable builds the chunk table of chunks.
func newChunkTable(chunks []codectx.Chunk) (*chunkTable, error) {
	nrefs, bytes := 0, 0
	for i := range chunks {
		c := &chunks[i]
		nrefs += len(c.Calls) + len(c.Imports) + len(c.Types)
		bytes += len(c.Body) + len(c.Doc) + len(c.Signature)
	}
	t := &chunkTable{n: len(chunks), recs: make([]uint32, 0, recWords*len(chunks)), refs: make([]uint32, 0, 2*nrefs), arena: make([]byte, 0, bytes+bytes/8)}
	seen := map[string]uint32{}
	at := func(s string) uint32 {
		if len(s) > maxSharedString {
			off := uint32(len(t.arena))
			t.arena = append(t.arena, s...)
			return off
		}
		off, ok := seen[s]
		if !ok {
			off = uint32(len(t.arena))
			t.arena = append(t.arena, s...)
			seen[s] = off
		}
		return off
	}
	for i := range chunks {
		c := &chunks[i]
		for _, v := range [...]int{c.StartLine, c.EndLine, c.StartByte, c.EndByte} {
			if v < 0 || v > 1<<32-1 {
				return nil, fmt.Errorf("chunk %d: position %d out of range", i, v)
			}
			t.recs = append(t.recs, uint32(v))
		}
		for _, s := range [...]string{c.Path, string(c.Language), string(c.Kind), c.Name, c.Signature, c.Doc, c.Body, c.Hash} {
			if len(s) == 0 {
				t.recs = append(t.recs, 0, 0)
				continue
			}
			t.recs = append(t.recs, at(s), uint32(len(s)))
		}
		for _, ss := range [...][]string{c.Calls, c.Imports, c.Types} {
			t.recs = append(t.recs, uint32(len(t.refs)/2), uint32(len(ss)))
			for _, s := range ss {
				t.refs = append(t.refs, at(s), uint32(len(s)))
			}
		}
		if len(t.arena) > 1<<32-1 {
			return nil, fmt.Errorf("chunk text of the shard exceeds 4 GiB")
		}
	}
	return t, nil
}

// size is the length appendTo adds.
func (t *chunkTable) size() int { return 16 + 4*(len(t.recs)+len(t.refs)) + len(t.arena) }

// appendTo appends the table: its counts, records, refs and arena.
func (t *chunkTable) appendTo(dst []byte) []byte {
	dst = slices.Grow(dst, t.size())
	u := binary.LittleEndian.AppendUint32
	for _, v := range [...]int{t.n, len(t.refs) / 2, len(t.arena), recWords} {
		dst = u(dst, uint32(v))
	}
	for _, v := range t.recs {
		dst = u(dst, v)
	}
	for _, v := range t.refs {
		dst = u(dst, v)
	}
	return append(dst, t.arena...)
}

// decodeChunksRaw appends the chunks of an in-place chunk table to out;
// their strings alias p.
func decodeChunksRaw(p []byte, out []codectx.Chunk) ([]codectx.Chunk, error) {
	if len(p) < 16 {
		return out, fmt.Errorf("%w: chunk table too short", ErrCorrupt)
	}
	le := binary.LittleEndian
	n, nrefs, na, words := uint64(le.Uint32(p)), uint64(le.Uint32(p[4:])), uint64(le.Uint32(p[8:])), le.Uint32(p[12:])
	if words != recWords || uint64(len(p)) != 16+4*recWords*n+8*nrefs+na {
		return out, fmt.Errorf("%w: chunk table of %d bytes does not match its header", ErrCorrupt, len(p))
	}
	recs := p[16 : 16+4*recWords*n]
	refs := p[16+4*recWords*n : 16+4*recWords*n+8*nrefs]
	arena := p[len(p)-int(na):]
	bad := false
	str := func(b []byte) string {
		off, l := uint64(le.Uint32(b)), uint64(le.Uint32(b[4:]))
		if off+l > uint64(len(arena)) {
			bad = true
			return ""
		}
		if l == 0 {
			return ""
		}
		return unsafe.String(&arena[off], int(l))
	}
	names := make([]string, nrefs)
	for i := range names {
		names[i] = str(refs[8*i:])
	}
	list := func(b []byte) []string {
		first, cnt := uint64(le.Uint32(b)), uint64(le.Uint32(b[4:]))
		if first+cnt > nrefs {
			bad = true
			return nil
		}
		if cnt == 0 {
			return nil
		}
		return names[first : first+cnt : first+cnt]
	}
	out = append(out, make([]codectx.Chunk, n)...)
	dst := out[len(out)-int(n):]
	for i := range dst {
		r := recs[4*recWords*i:]
		c := &dst[i]
		c.StartLine, c.EndLine = int(le.Uint32(r)), int(le.Uint32(r[4:]))
		c.StartByte, c.EndByte = int(le.Uint32(r[8:])), int(le.Uint32(r[12:]))
		s := r[16:]
		c.Path = str(s)
		c.Language = codectx.Language(str(s[8:]))
		c.Kind = codectx.Kind(str(s[16:]))
		c.Name = str(s[24:])
		c.Signature = str(s[32:])
		c.Doc = str(s[40:])
		c.Body = str(s[48:])
		c.Hash = str(s[56:])
		l := s[64:]
		c.Calls, c.Imports, c.Types = list(l), list(l[8:]), list(l[16:])
	}
	if bad {
		return out[:len(out)-int(n)], fmt.Errorf("%w: chunk table offset out of range", ErrCorrupt)
	}
	return out, nil
}

// IsInPlaceShard reports whether data is a shard in the in-place format.
func IsInPlaceShard(data []byte) bool {
	return len(data) >= len(shardMagic2) && string(data[:len(shardMagic2)]) == shardMagic2
}
