//go:build !unix

package local

import "os"

// lockFile only opens name: without flock, compare-and-swap is atomic within
// one process but not across processes.
func lockFile(name string) (unlock func(), err error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}
