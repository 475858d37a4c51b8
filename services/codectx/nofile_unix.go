//go:build unix

package main

import "syscall"

// noFileLimit is the process's soft RLIMIT_NOFILE (Go raises it to the
// hard limit at start on Linux), or fallbackNoFile when it cannot be read.
func noFileLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur == 0 {
		return fallbackNoFile
	}
	return int(min(r.Cur, 1<<30))
}
