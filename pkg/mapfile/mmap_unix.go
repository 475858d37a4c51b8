//go:build linux || darwin || freebsd

package mapfile

import (
	"io/fs"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func identity(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), uint64(st.Ino)}, true
}

func mapFile(fd *os.File, size int64) (*File, error) {
	if size == 0 {
		return &File{data: []byte{}}, nil
	}
	if int64(int(size)) != size {
		return nil, syscall.EFBIG
	}
	data, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return &File{data: data[:size:size], mapped: true}, nil
}

func dontNeed(b []byte) { _ = unix.Madvise(b, unix.MADV_DONTNEED) }

func resident(b []byte) int64 {
	if len(b) == 0 {
		return 0
	}
	if n, ok := inProcess(b); ok {
		return n
	}
	page := os.Getpagesize()
	vec := make([]byte, (len(b)+page-1)/page)
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if e != 0 {
		return int64(len(b))
	}
	var n int64
	for _, v := range vec {
		if v&1 != 0 {
			n += int64(page)
		}
	}
	return min(n, int64(len(b)))
}
