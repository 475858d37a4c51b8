//go:build !unix

package local

import (
	"io/fs"
	"os"
	"syscall"
)

// renameFile renames like os.Rename but refuses to replace a directory.
func renameFile(tmp, path string) error {
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		return &fs.PathError{Op: "rename", Path: path, Err: syscall.EISDIR}
	}
	return os.Rename(tmp, path)
}
