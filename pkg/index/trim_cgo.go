//go:build cgo && linux

package index

/*
#ifdef __GLIBC__
#include <malloc.h>
static void trim_c_heap(void) { malloc_trim(0); }
#else
static void trim_c_heap(void) {}
#endif
*/
import "C"

// trimCHeap gives the free pages of the C heap back to the system. The
// parser's trees and stacks (tree-sitter, in C) are freed file by file,
// but glibc keeps the freed pages of its per-thread arenas, out of reach
// of the Go memory limit.
func trimCHeap() { C.trim_c_heap() }
