//go:build !cgo || !linux

package index

// trimCHeap does nothing without glibc's malloc_trim.
func trimCHeap() {}
