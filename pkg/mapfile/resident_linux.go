package mapfile

import (
	"encoding/binary"
	"os"
	"sync"
	"unsafe"
)

var pagemap = sync.OnceValue(func() *os.File {
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return nil
	}
	return f
})

// inProcess counts the pages of b present in this process's page table
// (/proc/self/pagemap, bit 63 of each page's entry): what b adds to the
// resident set. A page of the file in the page cache but not touched
// through this mapping since it was last dropped is not counted.
func inProcess(b []byte) (int64, bool) {
	pm := pagemap()
	if pm == nil || len(b) == 0 {
		return 0, pm != nil
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	first, last := start/page, (start+uintptr(len(b))-1)/page
	buf := make([]byte, 8*min(last-first+1, 4096))
	var n int64
	for vpn := first; vpn <= last; {
		k := min(last-vpn+1, uintptr(len(buf)/8))
		if _, err := pm.ReadAt(buf[:8*k], int64(vpn*8)); err != nil {
			return 0, false
		}
		for i := range k {
			if binary.LittleEndian.Uint64(buf[8*i:])&(1<<63) != 0 {
				n += int64(page)
			}
		}
		vpn += k
	}
	return min(n, int64(len(b))), true
}
