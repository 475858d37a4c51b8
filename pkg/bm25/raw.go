package bm25

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unsafe"
)

// The in-place layout (AppendRaw, LoadRaw) is for an index used where it
// lies, in a read-only memory mapping: every array is little-endian and
// 4-byte aligned, so that LoadRaw aliases them instead of decoding.
//
//	header, 8 uint32: "CXBR" | version 1 | N | NumFields | T (terms) |
//	                  term bytes | postings bytes | 0
//	lens     N*NumFields uint32, doc-major
//	termOff  T+1 uint32
//	df       T uint32
//	postOff  T+1 uint32
//	terms    term bytes, then zeros to a multiple of 4
//	postings postings bytes (the encoding of Builder's postings)
//
// There is no checksum: the container holding the bytes checks them.
const (
	rawMagic   = "CXBR"
	rawVersion = 1
	rawHeader  = 8 * 4
)

// littleEndian is true on machines whose uint32 arrays are laid out as
// the in-place format's.
var littleEndian = func() bool {
	x := uint32(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// RawSize is the length AppendRaw adds.
func (ix *Index) RawSize() int {
	if len(ix.parts) > 0 {
		j, _ := Concat(ix.parts)
		return j.RawSize()
	}
	return rawHeader + 4*(len(ix.lens)+len(ix.termOff)+len(ix.df)+len(ix.postOff)) + pad4(len(ix.terms)) + len(ix.postings)
}

func pad4(n int) int { return (n + 3) &^ 3 }

// AppendRaw appends the index in the in-place layout. For the arrays to
// be aligned in memory, the offset where it starts must be a multiple of
// 4 in a buffer (or file mapping) that is.
func (ix *Index) AppendRaw(dst []byte) ([]byte, error) {
	if len(ix.parts) > 0 {
		j, err := Concat(ix.parts)
		if err != nil {
			return nil, err
		}
		ix = j
	}
	if ix.n > 1<<31-1 || len(ix.terms) > 1<<32-1 || len(ix.postings) > 1<<32-1 {
		return nil, fmt.Errorf("bm25: index too large for the in-place layout")
	}
	u := binary.LittleEndian.AppendUint32
	dst = append(dst, rawMagic...)
	for _, v := range []int{rawVersion, ix.n, int(NumFields), len(ix.df), len(ix.terms), len(ix.postings), 0} {
		dst = u(dst, uint32(v))
	}
	for _, a := range [][]uint32{ix.lens, ix.termOff, ix.df, ix.postOff} {
		for _, v := range a {
			dst = u(dst, v)
		}
	}
	dst = append(dst, ix.terms...)
	dst = append(dst, make([]byte, pad4(len(ix.terms))-len(ix.terms))...)
	dst = append(dst, ix.postings...)
	return dst, nil
}

// LoadRaw returns the index laid out in data by AppendRaw. Its arrays
// alias data when data is 4-byte aligned and the machine little-endian
// (they are copied otherwise): data must not change, and must stay
// readable, while the index is in use. Offsets, term order and document
// frequencies are checked (a pass over the term table, not the postings,
// which are decoded defensively at search time); a malformed layout
// returns an error wrapping ErrCorrupt, never a panic.
func LoadRaw(data []byte) (*Index, error) {
	if len(data) < rawHeader || string(data[:4]) != rawMagic {
		return nil, fmt.Errorf("%w: not an in-place index", ErrCorrupt)
	}
	h := make([]uint64, 8)
	for i := range h {
		h[i] = uint64(binary.LittleEndian.Uint32(data[4*i:]))
	}
	if h[1] != rawVersion {
		return nil, fmt.Errorf("%w: in-place version %d", ErrCorrupt, h[1])
	}
	n, nf, nt, tb, pb := h[2], h[3], h[4], h[5], h[6]
	if nf != uint64(NumFields) {
		return nil, fmt.Errorf("%w: %d fields, want %d", ErrCorrupt, nf, NumFields)
	}
	words := n*nf + (nt + 1) + nt + (nt + 1)
	if n > 1<<31-1 || nt > 1<<31-1 || uint64(len(data)) != rawHeader+4*words+uint64(pad4(int(tb)))+pb {
		return nil, fmt.Errorf("%w: in-place index of %d bytes does not match its header", ErrCorrupt, len(data))
	}
	arr, aliased := u32s(data[rawHeader : rawHeader+4*words])
	ix := &Index{n: int(n), raw: aliased}
	ix.lens, arr = arr[:n*nf], arr[n*nf:]
	ix.termOff, arr = arr[:nt+1], arr[nt+1:]
	ix.df, arr = arr[:nt], arr[nt:]
	ix.postOff = arr[:nt+1]
	at := rawHeader + 4*words
	ix.terms = data[at : at+tb : at+tb]
	at += uint64(pad4(int(tb)))
	ix.postings = data[at : at+pb : at+pb]
	if !aliased { // the arrays were copied: the bytes need not be kept
		ix.terms = bytes.Clone(ix.terms)
		ix.postings = bytes.Clone(ix.postings)
	}
	if err := ix.checkRaw(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	ix.computeAvg()
	return ix, nil
}

// u32s returns b as little-endian uint32s, and whether they alias b
// (when it is aligned on a little-endian machine) or are a copy.
func u32s(b []byte) ([]uint32, bool) {
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4), true
	}
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out, false
}

// checkRaw validates what searches index with: offsets within their
// arrays and ascending, terms strictly sorted, each term with postings and
// a document frequency in 1..N.
func (ix *Index) checkRaw() error {
	nt := len(ix.df)
	if ix.termOff[0] != 0 || ix.postOff[0] != 0 || int(ix.termOff[nt]) != len(ix.terms) || int(ix.postOff[nt]) != len(ix.postings) {
		return fmt.Errorf("offset tables do not span their arrays")
	}
	for i := 0; i < nt; i++ {
		if ix.termOff[i] > ix.termOff[i+1] || ix.postOff[i] >= ix.postOff[i+1] {
			return fmt.Errorf("term %d: offsets out of order", i)
		}
		if ix.df[i] == 0 || int(ix.df[i]) > ix.n {
			return fmt.Errorf("term %d: doc freq %d out of range", i, ix.df[i])
		}
	}
	for i := 1; i < nt; i++ { // offsets are in range now
		if i > 0 && bytes.Compare(ix.term(i-1), ix.term(i)) >= 0 {
			return fmt.Errorf("term %d: terms out of order", i)
		}
	}
	return nil
}

// Raw reports whether the index's arrays alias the bytes given to LoadRaw
// (for a Multi index: whether all its parts do); a misaligned input is
// copied instead.
func (ix *Index) Raw() bool {
	for _, p := range ix.parts {
		if !p.raw {
			return false
		}
	}
	return ix.raw || len(ix.parts) > 0
}

// HeapSize is the part of Size held in the Go heap (not aliasing the
// bytes given to LoadRaw).
func (ix *Index) HeapSize() int64 {
	if len(ix.parts) > 0 {
		var n int64
		for _, p := range ix.parts {
			n += p.HeapSize()
		}
		return n
	}
	if ix.raw {
		return 0
	}
	return ix.Size()
}

// DerivedSize is the heap the index built since it was loaded: the norm
// tables of its searches (4 bytes a document and field), which live as
// long as the index.
func (ix *Index) DerivedSize() int64 {
	var n int64
	if t := ix.norm.Load(); t != nil {
		n += 4 * int64(len(t.f))
		for _, p := range t.parts {
			n += 4 * int64(len(p))
		}
	}
	for _, p := range ix.parts {
		n += p.DerivedSize()
	}
	return n
}
