package graph

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Binary layout (all integers uvarint unless noted):
//
//	magic "CXGR" | version u16 LE |
//	nFiles, then per file: len, bytes (sorted, distinct) |
//	nSyms, then per symbol: id (first: zigzag varint; then uvarint delta
//	from the previous id, ids strictly increasing), file index |
//	nFileEdges, then per edge: from, to, kind |
//	nSymEdges, then per edge: from, to, kind |
//	imports, unresolved, ambiguous, ambiguousTypes |
//	CRC32 (IEEE) of everything before, u32 LE
//
// Edge lists are sorted by (from, to, kind); from is delta-coded.
const (
	magic   = "CXGR"
	version = 1
)

// ErrCorrupt is wrapped by every Load error about malformed data.
var ErrCorrupt = errors.New("graph: corrupt encoding")

// MarshalBinary encodes the graph compactly; Load reverses it.
func (g *Graph) MarshalBinary() ([]byte, error) {
	buf := make([]byte, 0, 64+len(g.files)*24+len(g.symIDs)*4+(len(g.fedges)+len(g.sedges))*4)
	buf = append(buf, magic...)
	buf = binary.LittleEndian.AppendUint16(buf, version)
	u := func(v uint64) { buf = binary.AppendUvarint(buf, v) }

	u(uint64(len(g.files)))
	for _, p := range g.files {
		u(uint64(len(p)))
		buf = append(buf, p...)
	}
	u(uint64(len(g.symIDs)))
	for i, id := range g.symIDs {
		if i == 0 {
			buf = binary.AppendVarint(buf, int64(id))
		} else {
			u(uint64(id) - uint64(g.symIDs[i-1]))
		}
		u(uint64(g.symFile[i]))
	}
	for _, es := range [][]rawEdge{g.fedges, g.sedges} {
		u(uint64(len(es)))
		last := int32(0)
		for _, e := range es {
			u(uint64(e.from - last))
			last = e.from
			u(uint64(e.to))
			u(uint64(e.kind))
		}
	}
	s := g.stats
	for _, v := range []int{s.Imports, s.Unresolved, s.Ambiguous, s.AmbiguousTypes} {
		u(uint64(v))
	}
	return appendCRC(buf), nil
}

func appendCRC(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// Load decodes a graph written by MarshalBinary. Malformed input (bad
// magic, unknown version, checksum mismatch, truncation, out-of-range
// indexes) returns an error wrapping ErrCorrupt; it never panics.
func Load(data []byte) (*Graph, error) {
	if len(data) < len(magic)+2+4 {
		return nil, fmt.Errorf("load graph: %d bytes: %w", len(data), ErrCorrupt)
	}
	if string(data[:4]) != magic {
		return nil, fmt.Errorf("load graph: bad magic: %w", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint16(data[4:6]); v != version {
		return nil, fmt.Errorf("load graph: version %d, want %d: %w", v, version, ErrCorrupt)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, fmt.Errorf("load graph: checksum mismatch: %w", ErrCorrupt)
	}
	r := &reader{buf: body[6:]}
	g := &Graph{}

	nf := r.count(1)
	g.files = make([]string, 0, nf)
	for i := 0; i < nf && r.err == nil; i++ {
		p := r.str()
		if r.err == nil && i > 0 && p <= g.files[i-1] {
			r.fail("file paths not sorted")
		}
		g.files = append(g.files, p)
	}
	ns := r.count(2)
	g.symIDs = make([]int, 0, ns)
	g.symFile = make([]int32, 0, ns)
	prev := int64(0)
	for i := 0; i < ns && r.err == nil; i++ {
		if i == 0 {
			prev = r.varint()
		} else {
			d := r.uvarint()
			next := int64(uint64(prev) + d)
			if r.err == nil && (d == 0 || next <= prev) {
				r.fail("symbol ids not increasing")
			}
			prev = next
		}
		f := r.index(nf)
		g.symIDs = append(g.symIDs, int(prev))
		g.symFile = append(g.symFile, f)
	}
	g.fedges = r.edges(nf)
	g.sedges = r.edges(ns)
	imports, unres, amb, ambT := r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint()
	if r.err == nil && len(r.buf) != 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, fmt.Errorf("load graph: %w", r.err)
	}
	g.stats = Stats{Imports: int(imports), Unresolved: int(unres), Ambiguous: int(amb), AmbiguousTypes: int(ambT)}
	g.finish()
	return g, nil
}

type reader struct {
	buf []byte
	err error
}

func (r *reader) fail(msg string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: %w", msg, ErrCorrupt)
	}
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf)
	if n <= 0 || n > 1 && r.buf[n-1] == 0 { // overflow, truncation, non-minimal
		r.fail("bad uvarint")
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.buf)
	if n <= 0 || n > 1 && r.buf[n-1] == 0 {
		r.fail("bad varint")
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

// count reads an element count; each element takes at least minBytes, so a
// count the remaining input cannot hold is corrupt (and never allocated).
func (r *reader) count(minBytes int) int {
	v := r.uvarint()
	if r.err == nil && v > uint64(len(r.buf)/minBytes) {
		r.fail("count exceeds input")
		return 0
	}
	return int(v)
}

func (r *reader) str() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.buf)) {
		r.fail("string exceeds input")
		return ""
	}
	s := string(r.buf[:n])
	r.buf = r.buf[n:]
	return s
}

func (r *reader) index(n int) int32 {
	v := r.uvarint()
	if r.err == nil && v >= uint64(n) {
		r.fail("index out of range")
		return 0
	}
	return int32(v)
}

func (r *reader) edges(n int) []rawEdge {
	ne := r.count(3)
	es := make([]rawEdge, 0, ne)
	last := uint64(0)
	for i := 0; i < ne && r.err == nil; i++ {
		last += r.uvarint()
		if r.err == nil && last >= uint64(n) {
			r.fail("edge source out of range")
		}
		to := r.index(n)
		kv := r.uvarint()
		k := EdgeKind(kv)
		if r.err == nil && (kv > 255 || !k.valid()) {
			r.fail("bad edge kind")
		}
		e := rawEdge{from: int32(last), to: to, kind: k}
		if r.err == nil && (e.from == e.to || i > 0 && cmpEdge(es[i-1], e) >= 0) {
			r.fail("edges not sorted and distinct")
		}
		es = append(es, e)
	}
	return es
}
