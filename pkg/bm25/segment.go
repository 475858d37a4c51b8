package bm25

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Segment layout (version 1), all integers uvarints unless noted:
//
//	magic "CXBM" | version byte 1
//	N (docs) | NumFields | N*NumFields doc lengths, doc-major
//	T (terms) | P (postings bytes)
//	T entries: shared-prefix length with the previous term, suffix length,
//	           suffix bytes, df, postings length
//	P bytes of postings, in term order; per posting
//	           uvarint(docGap<<NumFields | fieldMask) then one tf per mask bit
//	CRC-32C (Castagnoli) of everything before it, 4 bytes little-endian
const (
	magic   = "CXBM"
	version = 1
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every Load error about malformed data.
var ErrCorrupt = errors.New("bm25: corrupt segment")

// MarshalBinary encodes the index as a compact segment.
func (ix *Index) MarshalBinary() ([]byte, error) {
	if len(ix.parts) > 0 {
		j, err := Concat(ix.parts)
		if err != nil {
			return nil, err
		}
		ix = j
	}
	size := len(magic) + 1 + 3*binary.MaxVarintLen64 + len(ix.lens)*2 +
		len(ix.terms) + len(ix.df)*6 + len(ix.postings) + 4
	out := make([]byte, 0, size)
	out = append(out, magic...)
	out = append(out, version)
	out = binary.AppendUvarint(out, uint64(ix.n))
	out = binary.AppendUvarint(out, uint64(NumFields))
	for _, l := range ix.lens {
		out = binary.AppendUvarint(out, uint64(l))
	}
	out = binary.AppendUvarint(out, uint64(len(ix.df)))
	out = binary.AppendUvarint(out, uint64(len(ix.postings)))
	var prev []byte
	for i := range ix.df {
		t := ix.term(i)
		p := commonPrefix(prev, t)
		out = binary.AppendUvarint(out, uint64(p))
		out = binary.AppendUvarint(out, uint64(len(t)-p))
		out = append(out, t[p:]...)
		out = binary.AppendUvarint(out, uint64(ix.df[i]))
		out = binary.AppendUvarint(out, uint64(ix.postOff[i+1]-ix.postOff[i]))
		prev = t
	}
	out = append(out, ix.postings...)
	return appendCRC(out), nil
}

// appendCRC appends the checksum of b to b.
func appendCRC(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Load decodes a segment written by MarshalBinary. The postings are not
// copied: data must not be modified while the Index is in use. A truncated
// or corrupt segment returns an error wrapping ErrCorrupt. Postings are
// covered by the checksum and decoded defensively at search time.
func Load(data []byte) (*Index, error) {
	hdr := len(magic) + 1
	if len(data) < hdr+4 {
		return nil, fmt.Errorf("%w: %d bytes is too short", ErrCorrupt, len(data))
	}
	if string(data[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: bad magic %q", ErrCorrupt, data[:len(magic)])
	}
	if v := data[len(magic)]; v != version {
		return nil, fmt.Errorf("%w: unsupported version %d", ErrCorrupt, v)
	}
	body := data[:len(data)-4]
	want := binary.LittleEndian.Uint32(data[len(data)-4:])
	if got := crc32.Checksum(body, crcTable); got != want {
		return nil, fmt.Errorf("%w: checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	r := reader{b: body[hdr:]}
	ix, err := r.index()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return ix, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("bad %s varint", what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a count of items each taking at least minBytes, so that a
// corrupt count cannot make us allocate more than the input justifies.
func (r *reader) count(what string, minBytes int) int {
	v := r.uvarint(what)
	if r.err == nil && v > uint64(len(r.b)/minBytes) {
		r.err = fmt.Errorf("%s %d exceeds the %d bytes left", what, v, len(r.b))
		return 0
	}
	return int(v)
}

func (r *reader) bytes(n uint64, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%s of %d bytes exceeds the %d left", what, n, len(r.b))
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

func (r *reader) index() (*Index, error) {
	ix := &Index{}
	ix.n = r.count("doc count", int(NumFields))
	if nf := r.uvarint("field count"); r.err == nil && nf != uint64(NumFields) {
		return nil, fmt.Errorf("%d fields, want %d", nf, NumFields)
	}
	if r.err != nil {
		return nil, r.err
	}
	if ix.n > 1<<31-1 {
		return nil, fmt.Errorf("doc count %d too large", ix.n)
	}
	ix.lens = make([]uint32, ix.n*int(NumFields))
	for i := range ix.lens {
		v := r.uvarint("doc length")
		if v > 1<<32-1 {
			return nil, fmt.Errorf("doc length %d too large", v)
		}
		ix.lens[i] = uint32(v)
	}
	nt := r.count("term count", 4)
	np := r.uvarint("postings length")
	if r.err != nil {
		return nil, r.err
	}
	if np > uint64(len(r.b)) || np > 1<<32-1 {
		return nil, fmt.Errorf("postings length %d exceeds the %d bytes left", np, len(r.b))
	}
	ix.termOff = make([]uint32, 0, nt+1)
	ix.postOff = make([]uint32, 0, nt+1)
	ix.df = make([]uint32, 0, nt)
	var arena []byte
	var prev []byte
	var post uint64
	for i := 0; i < nt; i++ {
		p := r.uvarint("prefix length")
		s := r.uvarint("suffix length")
		suf := r.bytes(s, "term suffix")
		df := r.uvarint("doc freq")
		pl := r.uvarint("postings length")
		if r.err != nil {
			return nil, fmt.Errorf("term %d: %w", i, r.err)
		}
		if p > uint64(len(prev)) {
			return nil, fmt.Errorf("term %d: prefix %d longer than previous term", i, p)
		}
		if df == 0 || df > uint64(ix.n) {
			return nil, fmt.Errorf("term %d: doc freq %d out of range", i, df)
		}
		start := len(arena)
		arena = append(arena, prev[:p]...)
		arena = append(arena, suf...)
		if len(arena) > 1<<32-1 {
			return nil, fmt.Errorf("term table too large")
		}
		term := arena[start:]
		if i > 0 && bytes.Compare(prev, term) >= 0 {
			return nil, fmt.Errorf("term %d: terms out of order", i)
		}
		if pl == 0 || pl > np-post {
			return nil, fmt.Errorf("term %d: postings length %d out of range", i, pl)
		}
		ix.termOff = append(ix.termOff, uint32(start))
		ix.postOff = append(ix.postOff, uint32(post))
		ix.df = append(ix.df, uint32(df))
		post += pl
		prev = term
	}
	if post != np {
		return nil, fmt.Errorf("postings lengths sum to %d, want %d", post, np)
	}
	ix.termOff = append(ix.termOff, uint32(len(arena)))
	ix.postOff = append(ix.postOff, uint32(post))
	ix.terms = arena
	ix.postings = r.bytes(np, "postings")
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%d trailing bytes", len(r.b))
	}
	ix.computeAvg()
	return ix, nil
}
