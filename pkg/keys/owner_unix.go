//go:build unix

package keys

import (
	"io/fs"
	"syscall"
)

// owner is the uid owning the file fi describes; -1 if unknown.
func owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// noFollow makes an open fail on a symbolic link.
const noFollow = syscall.O_NOFOLLOW
