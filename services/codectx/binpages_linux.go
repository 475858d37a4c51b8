package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// dropBinaryPages gives back the pages of this executable's code and
// read-only data that are mapped into the process, and returns how many
// bytes of them were resident. The binary links the whole service (about
// 930 packages); their initialization alone maps some 130 MB of it, most
// of which a command such as index never touches again. The pages stay in
// the page cache: those the command runs fault back in from there. Only
// mappings of the executable that are read-only and hold no private
// (copied-on-write) page are dropped, so no content is lost.
func dropBinaryPages() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	maps, err := binaryMappings(exe)
	if err != nil {
		return 0, err
	}
	var dropped int64
	for _, m := range maps {
		if m.anon != 0 || m.rss == 0 || (m.perms != "r-xp" && m.perms != "r--p") {
			continue
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, syscall.MADV_DONTNEED); errno != 0 {
			return dropped, fmt.Errorf("madvise %x-%x: %w", m.start, m.end, errno)
		}
		dropped += m.rss
	}
	return dropped, nil
}

// mapping is one line of /proc/self/smaps with its sizes in bytes.
type mapping struct {
	start, end uintptr
	perms      string
	rss, anon  int64
}

// binaryMappings lists the mappings of the file at path.
func binaryMappings(path string) ([]mapping, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mapping
	var cur *mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fs[0], "-"); ok && !strings.HasSuffix(fs[0], ":") && len(fs) >= 5 {
			cur = nil
			if len(fs) < 6 || strings.Join(fs[5:], " ") != path {
				continue
			}
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil || end <= start {
				return nil, fmt.Errorf("smaps: bad range %q", fs[0])
			}
			out = append(out, mapping{start: uintptr(start), end: uintptr(end), perms: fs[1]})
			cur = &out[len(out)-1]
			continue
		}
		if cur == nil || len(fs) < 2 {
			continue
		}
		var dst *int64
		switch fs[0] {
		case "Rss:":
			dst = &cur.rss
		case "Anonymous:":
			dst = &cur.anon
		default:
			continue
		}
		kb, err := strconv.ParseInt(fs[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("smaps: %s %q", fs[0], fs[1])
		}
		*dst = kb << 10
	}
	return out, sc.Err()
}
