package mapfile

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestReleaseThenRead checks that a mapping stays readable after its last
// user released it (pages dropped, faulted back from the file) and after
// the file was deleted, and that the same file is mapped once.
func TestReleaseThenRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	want := bytes.Repeat([]byte("0123456789abcdef"), 3<<10)
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(f.Data()[16:32]) // a copy
	alias := f.Data()[16:32]
	g, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if g != f {
		t.Fatalf("the same file was mapped twice")
	}
	g.Release()
	f.Release()
	f.Release() // one too many: ignored
	if !bytes.Equal(f.Data(), want) || string(alias) != s {
		t.Fatalf("content changed after release")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.Data(), want) {
		t.Fatalf("content changed after delete")
	}
	if f.Len() != int64(len(want)) || f.Resident() > f.Len() {
		t.Fatalf("len %d resident %d", f.Len(), f.Resident())
	}
	// A new file at the path is a new mapping.
	if err := os.WriteFile(path, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if h == f || string(h.Data()) != "new" {
		t.Fatalf("replaced file: %q", h.Data())
	}
	if _, err := Open(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("opened a missing file")
	}
	if _, err := Open(dir); err == nil {
		t.Fatal("mapped a directory")
	}
}

// TestResidentDrop checks that reading a mapping makes its pages resident
// and Drop gives them back, the content unchanged.
func TestResidentDrop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	want := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	if !f.Mapped() {
		t.Skip("no mmap on this system")
	}
	f.Drop()
	if r := f.Resident(); r > f.Len()/2 && runtime.GOOS == "linux" {
		t.Errorf("after Drop: %d of %d bytes resident", r, f.Len())
	}
	if !bytes.Equal(f.Data(), want) { // reads every page
		t.Fatal("content changed after Drop")
	}
	if r := f.Resident(); r < f.Len()/2 { // all, unless the kernel reclaimed some since
		t.Errorf("after reading all: %d of %d bytes resident", r, f.Len())
	}
	f.Drop()
	if r := f.Resident(); r > f.Len()/2 && runtime.GOOS == "linux" {
		t.Errorf("after the second Drop: %d of %d bytes resident", r, f.Len())
	}
	if f.Data()[len(want)/2] != want[len(want)/2] { // one page back
		t.Fatal("content changed")
	}
	if r := f.Resident(); runtime.GOOS == "linux" && (r == 0 || r > f.Len()/2) {
		t.Errorf("one page read: %d of %d bytes resident", r, f.Len())
	}
}
