package main

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// deltaBaseRepo writes a bare repository whose one file, main.go, is a
// blob of a few bytes stored as a delta against a blob of baseSize zero
// bytes that no tree names: a pack of a few hundred KiB. The pack is built
// by hand and indexed by `git index-pack`, so the test process never
// holds the base.
func deltaBaseRepo(t *testing.T, baseSize int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "delta.git")
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	small := []byte("package main\n\nfunc main() {}\n")
	var p bytes.Buffer
	p.WriteString("PACK")
	binary.Write(&p, binary.BigEndian, uint32(2))
	binary.Write(&p, binary.BigEndian, uint32(2))
	header := func(typ byte, n uint64) {
		c := typ<<4 | byte(n&0x0f)
		for n >>= 4; n > 0; n >>= 7 {
			p.WriteByte(c | 0x80)
			c = byte(n & 0x7f)
		}
		p.WriteByte(c)
	}
	header(3, uint64(baseSize)) // the base blob
	zw, _ := zlib.NewWriterLevel(&p, zlib.BestCompression)
	io.Copy(zw, io.LimitReader(zeros{}, int64(baseSize)))
	zw.Close()
	delta := []byte{}
	for _, n := range []uint64{uint64(baseSize), uint64(len(small))} {
		for ; n >= 0x80; n >>= 7 {
			delta = append(delta, byte(n)|0x80)
		}
		delta = append(delta, byte(n))
	}
	delta = append(append(delta, byte(len(small))), small...)
	off := p.Len()
	header(6, uint64(len(delta))) // OBJ_OFS_DELTA against the base at 12
	rel := uint64(off - 12)
	enc := []byte{byte(rel & 0x7f)}
	for rel >>= 7; rel > 0; rel >>= 7 {
		rel--
		enc = append([]byte{0x80 | byte(rel&0x7f)}, enc...)
	}
	p.Write(enc)
	zw, _ = zlib.NewWriterLevel(&p, zlib.BestCompression)
	zw.Write(delta)
	zw.Close()
	sum := sha1.Sum(p.Bytes())
	p.Write(sum[:])
	pack := filepath.Join(dir, "objects", "pack", "pack-"+hex.EncodeToString(sum[:])+".pack")
	if err := os.WriteFile(pack, p.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "index-pack", pack).CombinedOutput(); err != nil {
		t.Fatalf("git index-pack: %v\n%s", err, out)
	}
	st := repo.Storer
	h := plumbing.ComputeHash(plumbing.BlobObject, small)
	tree := putObject(t, st, &object.Tree{Entries: []object.TreeEntry{{Name: "main.go", Mode: filemode.Regular, Hash: h}}})
	sig := object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}
	c := putObject(t, st, &object.Commit{Author: sig, Committer: sig, Message: "delta\n", TreeHash: tree})
	if err := st.SetReference(plumbing.NewHashReference("refs/heads/master", c)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func vmHWM() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:"))
		}
	}
	return "?"
}

// TestSecurityDeltaBaseUp: beta indexes a repository whose one 29-byte
// file is a delta against a 64 MiB blob (a 64 KiB pack) through a running
// `codectx up`; acme's repository answers meanwhile and afterwards. The
// indexer shared by every tenant must not inflate the base for a file
// far under the size cap.
func TestSecurityDeltaBaseUp(t *testing.T) {
	const baseSize = 64 << 20
	s := startSecureUp(t)
	dir := deltaBaseRepo(t, baseSize)
	fi, _ := os.ReadDir(filepath.Join(dir, "objects", "pack"))
	for _, f := range fi {
		info, _ := f.Info()
		t.Logf("%s: %d bytes", f.Name(), info.Size())
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	hwm := vmHWM()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := s.client(api.AllTenants)
	if _, err := cl.Index(ctx, api.IndexRequest{Tenant: tenantB, Repo: "delta", Location: dir}); err != nil {
		t.Fatal(err)
	}
	s.assertServes(t) // meanwhile
	st := s.waitSettledAs(t, api.AllTenants, tenantB, "delta")
	runtime.ReadMemStats(&after)
	t.Logf("beta/delta: %+v", st)
	t.Logf("allocated %d MiB while indexing; VmHWM %s -> %s", (after.TotalAlloc-before.TotalAlloc)>>20, hwm, vmHWM())
	s.assertServes(t) // afterwards
	if a := after.TotalAlloc - before.TotalAlloc; a > 2*baseSize {
		t.Errorf("indexing a repository of one 29-byte file allocated %d MiB", a>>20)
	}
}
