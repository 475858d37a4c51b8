package main

import (
	"os"
	"sort"
	"testing"
)

// TestDropBinaryPages drops the resident pages of the test binary's code
// and read-only data and checks that they were resident before, that
// fewer are after, and that the program still runs (its code and data
// fault back in): sorting and a map read after the drop give the answers
// they gave before.
func TestDropBinaryPages(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Skipf("no /proc/self/exe: %v", err)
	}
	resident := func() (ro, rw int64) {
		maps, err := binaryMappings(exe)
		if err != nil {
			t.Fatal(err)
		}
		if len(maps) == 0 {
			t.Fatalf("no mapping of %s in smaps", exe)
		}
		for _, m := range maps {
			if m.perms == "r-xp" || m.perms == "r--p" {
				ro += m.rss
			} else {
				rw += m.rss
			}
		}
		return ro, rw
	}
	words := []string{"pear", "fig", "apple", "kiwi"}
	before, _ := resident()
	dropped, err := dropBinaryPages()
	if err != nil {
		t.Fatal(err)
	}
	after, _ := resident()
	t.Logf("read-only pages of the binary: %d KB resident, %d KB dropped, %d KB after", before>>10, dropped>>10, after>>10)
	if before == 0 || dropped == 0 || after >= before {
		t.Fatalf("resident %d bytes before, %d dropped, %d after: want some dropped", before, dropped, after)
	}
	sort.Strings(words)
	if got := map[string]int{"a": 1}["a"]; got != 1 || words[0] != "apple" || words[3] != "pear" {
		t.Fatalf("after the drop: %v, %d", words, got)
	}
}
