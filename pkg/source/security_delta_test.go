package source

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// packObject is one object of a hand-built pack: a blob, or an offset
// delta against the object base objects before it.
type packObject struct {
	blob  []byte
	delta []byte // delta instructions, with the source and target sizes
	base  int    // index of the delta's base
}

// leb128 appends the delta format's size varint.
func leb128(b []byte, n uint64) []byte {
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}

// writePack writes objs as one pack into repo's object store (go-git
// indexes it on Close).
func writePack(t *testing.T, repo *git.Repository, objs []packObject) {
	t.Helper()
	var p bytes.Buffer
	p.WriteString("PACK")
	binary.Write(&p, binary.BigEndian, uint32(2))
	binary.Write(&p, binary.BigEndian, uint32(len(objs)))
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = p.Len()
		typ, data := byte(3), o.blob // OBJ_BLOB
		if o.delta != nil {
			typ, data = 6, o.delta // OBJ_OFS_DELTA
		}
		n := uint64(len(data))
		c := typ<<4 | byte(n&0x0f)
		n >>= 4
		for n > 0 {
			p.WriteByte(c | 0x80)
			c, n = byte(n&0x7f), n>>7
		}
		p.WriteByte(c)
		if o.delta != nil {
			rel := uint64(offs[i] - offs[o.base])
			enc := []byte{byte(rel & 0x7f)}
			for rel >>= 7; rel > 0; rel >>= 7 {
				rel--
				enc = append([]byte{0x80 | byte(rel&0x7f)}, enc...)
			}
			p.Write(enc)
		}
		zw, _ := zlib.NewWriterLevel(&p, zlib.BestCompression)
		zw.Write(data)
		zw.Close()
	}
	sum := sha1.Sum(p.Bytes())
	p.Write(sum[:])
	w, err := repo.Storer.(storer.PackfileWriter).PackfileWriter()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(p.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// openOne commits a tree of the one file a.go (blob h) and opens it,
// after collecting what came before: it returns the snapshot (closed at
// the test's end) and allocated() before the open.
func openOne(t *testing.T, dir string, repo *git.Repository, h plumbing.Hash, msg string) (*Snapshot, uint64) {
	t.Helper()
	tree := store(t, repo.Storer, &object.Tree{Entries: []object.TreeEntry{{Name: "a.go", Mode: filemode.Regular, Hash: h}}})
	commitOn(t, repo, tree, msg)
	runtime.GC()
	runtime.GC()
	before := allocated()
	s, err := Open(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, before
}

func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestSecurityDeltaBase: a blob of a few bytes stored as a delta against
// a large base (a blob named by no tree) is listed at its own size, under
// every cap; reading it must not inflate the base.
func TestSecurityDeltaBase(t *testing.T) {
	const baseSize = 64 << 20
	dir, repo := hostileRepo(t)
	small := []byte("package p\n")
	d := leb128(leb128(nil, baseSize), uint64(len(small)))
	d = append(append(d, byte(len(small))), small...)
	writePack(t, repo, []packObject{{blob: make([]byte, baseSize)}, {delta: d, base: 0}})
	h := plumbing.ComputeHash(plumbing.BlobObject, small)
	s, before := openOne(t, dir, repo, h, "delta\n")
	t.Logf("files %v skipped %v, listing allocated %d MiB", s.Files, s.Skipped, (allocated()-before)>>20)
	for _, f := range s.Files {
		b, err := s.Read(f)
		t.Logf("read %s: %q %v", f.Path, b, err)
	}
	if a := allocated() - before; a > 16<<20 {
		t.Errorf("listing and reading a %d-byte file allocated %d MiB", len(small), a>>20)
	}
}

// TestSecurityDeltaStream: a delta whose own instructions are large (one
// insert after another, compressing a thousand to one) describes a file
// over the size cap; its size must be known without inflating them.
func TestSecurityDeltaStream(t *testing.T) {
	const target = 64 << 20
	dir, repo := hostileRepo(t)
	base := []byte("package p\n")
	d := leb128(leb128(nil, uint64(len(base))), target)
	chunk := append([]byte{127}, bytes.Repeat([]byte{'x'}, 127)...)
	left := target
	for left >= 127 {
		d = append(d, chunk...)
		left -= 127
	}
	d = append(append(d, byte(left)), bytes.Repeat([]byte{'x'}, left)...)
	writePack(t, repo, []packObject{{blob: base}, {delta: d, base: 0}})
	full := append([]byte(nil), bytes.Repeat([]byte{'x'}, target)...)
	h := plumbing.ComputeHash(plumbing.BlobObject, full)
	full = nil
	s, before := openOne(t, dir, repo, h, "stream\n")
	t.Logf("files %v skipped %v", s.Files, s.Skipped)
	if a := allocated() - before; a > 16<<20 {
		t.Errorf("listing a file of a %d MiB delta allocated %d MiB", target>>20, a>>20)
	}
}
