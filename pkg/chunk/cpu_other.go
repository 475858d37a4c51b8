//go:build !linux

package chunk

import "time"

// threadCPU cannot read a thread's CPU here: the clock alone bounds a parse.
func threadCPU() (time.Duration, bool) { return 0, false }
