//go:build darwin || freebsd

package mapfile

// inProcess is not known here: Resident falls back to the page cache.
func inProcess([]byte) (int64, bool) { return 0, false }
