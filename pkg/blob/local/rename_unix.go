//go:build unix

package local

import (
	"os"
	"syscall"
)

// renameFile renames tmp over path, a file, in one system call: rename(2)
// itself refuses to replace a directory with a file (EISDIR), where
// os.Rename would first stat path for its own check.
func renameFile(tmp, path string) error {
	if err := syscall.Rename(tmp, path); err != nil {
		return &os.LinkError{Op: "rename", Old: tmp, New: path, Err: err}
	}
	return nil
}
