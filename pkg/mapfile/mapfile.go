// Package mapfile maps immutable files read-only into memory, so that an
// index can be searched where it lies: a cold file costs page-ins, not a
// decode into heap structures.
//
// Memory safety: strings and slices handed out by readers alias the
// mapping, and may be kept by anything (a response being written, a
// session store, a memo table), so a mapping is never unmapped. Instead,
// when its last user releases it (a cache evicting the index), its pages
// are dropped with madvise(MADV_DONTNEED): the memory is reclaimed, and a
// later read of an aliased string faults the page back in from the file.
// The files must be immutable and replaced only by rename (every blob
// store driver writes a temp file and renames it into place): a file
// truncated in place would turn such a read into SIGBUS. A file deleted
// while mapped stays readable (Linux keeps the inode), at a cost: its
// disk space, and the mapping's address space, are held until the process
// exits. Open maps a file (an inode) once per process and shares the
// mapping afterwards, so the address space is bounded by the distinct
// files opened since start (Stats counts them).
//
// On systems without mmap support here, Open reads the file into the heap.
package mapfile

import (
	"fmt"
	"os"
	"sync"
)

// File is one mapped file, shared by everyone who opened it.
type File struct {
	data   []byte
	mapped bool // false: data was read into the heap

	mu    sync.Mutex
	users int
}

type fileID struct{ dev, ino uint64 }

var reg = struct {
	sync.Mutex
	m     map[fileID]*File
	bytes int64
}{m: map[fileID]*File{}}

// Open maps the file at path read-only, or returns the mapping of the same
// file (inode) opened before, and counts one more user of it.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("mapfile: %s is not a regular file", path)
	}
	id, ok := identity(fi)
	reg.Lock()
	defer reg.Unlock()
	if f := reg.m[id]; ok && f != nil && int64(len(f.data)) == fi.Size() {
		f.Acquire()
		return f, nil
	}
	f, err := mapFile(fd, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("mapfile: map %s: %w", path, err)
	}
	f.users = 1
	if ok && f.mapped {
		reg.m[id] = f
		reg.bytes += int64(len(f.data))
	}
	return f, nil
}

// IsMapped reports whether the file at path (its inode) is mapped by this
// process: deleting it then frees no disk space until the process exits.
func IsMapped(path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	id, ok := identity(fi)
	if !ok {
		return false
	}
	reg.Lock()
	defer reg.Unlock()
	return reg.m[id] != nil
}

// Data is the file's content. It stays readable for the life of the
// process; it must not be written.
func (f *File) Data() []byte { return f.data }

// Len is the file's length.
func (f *File) Len() int64 { return int64(len(f.data)) }

// Mapped reports whether Data is a memory mapping (false: a heap copy).
func (f *File) Mapped() bool { return f.mapped }

// Acquire counts one more user.
func (f *File) Acquire() {
	f.mu.Lock()
	f.users++
	f.mu.Unlock()
}

// Release counts one user less; the last one's release drops the pages
// from memory (they fault back in from the file if read again).
func (f *File) Release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.users <= 0 {
		return
	}
	f.users--
	if f.users == 0 && f.mapped {
		dontNeed(f.data)
	}
}

// Drop removes the mapping's pages from this process's resident set
// (madvise MADV_DONTNEED), whoever uses it: they stay in the page cache
// and fault back in when read. A loader calls it after checking a file,
// so that only the pages queries read count in the process. No-op for a
// heap copy.
func (f *File) Drop() {
	if f.mapped {
		dontNeed(f.data)
	}
}

// Resident is the number of the file's bytes the mapping adds to this
// process's resident set: on Linux the pages present in its page table
// (/proc/self/pagemap), elsewhere those in the page cache (mincore, an
// upper bound); for a heap copy, its length.
func (f *File) Resident() int64 {
	if !f.mapped {
		return int64(len(f.data))
	}
	return resident(f.data)
}

// Stats returns the number of files mapped since the process started and
// their total length (the address space held).
func Stats() (files int, bytes int64) {
	reg.Lock()
	defer reg.Unlock()
	return len(reg.m), reg.bytes
}
