//go:build !linux

package main

// dropBinaryPages does nothing where /proc/self/smaps is not there.
func dropBinaryPages() (int64, error) { return 0, nil }
