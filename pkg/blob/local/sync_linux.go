//go:build linux

package local

import (
	"os"

	"golang.org/x/sys/unix"
)

// writeBack: PutCache skips the fsyncs, Sync flushes them with one syncfs.
const writeBack = true

// syncFS flushes the file system holding dir (syncfs: this one file system,
// not every mounted one).
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
