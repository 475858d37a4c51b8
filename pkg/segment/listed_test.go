package segment_test

import (
	"fmt"
	"strings"
	"testing"

	"codectx/pkg/codectx"
	"codectx/pkg/segment"
)

// TestListedBounds: the meta names at most MaxListed files, of paths at
// most MaxListedBytes long in all, none longer than MaxListedPath. A
// listing skips a tree entry of a name of megabytes (path_too_long, or
// quoted as bad_name), and a 236 KB repository of 16 such names made a
// status reply of 50 MB.
func TestListedBounds(t *testing.T) {
	long := strings.Repeat("a", segment.MaxListedPath+1)
	many := func(n, size int) map[string]string {
		m := map[string]string{}
		for i := range n {
			p := fmt.Sprintf("%08d", i)
			m[p+strings.Repeat("x", size-len(p))] = codectx.SkipBinary
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		in     map[string]string
		listed int
	}{
		{"none", nil, 0},
		{"short", map[string]string{"a.png": codectx.SkipBinary, "b.min.js": codectx.SkipMinified}, 2},
		{"long path", map[string]string{long: "path_too_long", "b.png": codectx.SkipBinary, "\"" + long + "\"": "bad_name"}, 1},
		{"past the count", many(segment.MaxListed+5, 10), segment.MaxListed},
		{"past the bytes", many(2000, segment.MaxListedPath), segment.MaxListedBytes / segment.MaxListedPath},
	} {
		got := segment.Listed(tc.in)
		n := 0
		for i, f := range got {
			n += len(f.Path)
			if len(f.Path) > segment.MaxListedPath || f.Reason != tc.in[f.Path] || i > 0 && got[i-1].Path >= f.Path {
				t.Errorf("%s: %d: %.20q (%s): too long, of another reason or out of order", tc.name, i, f.Path, f.Reason)
			}
		}
		if len(got) != tc.listed || n > segment.MaxListedBytes {
			t.Errorf("%s: listed %d files of %d bytes, want %d of at most %d", tc.name, len(got), n, tc.listed, segment.MaxListedBytes)
		}
	}
}

// TestHeapSizeCountsListed: the files a meta names are counted in the
// segment's heap size, which the segment cache's budget bounds: they
// were not, and a cached segment held megabytes the cache did not see.
func TestHeapSizeCountsListed(t *testing.T) {
	plain := sample()
	named := sample()
	byPath := map[string]string{}
	for i := range 1000 {
		byPath[fmt.Sprintf("img/%04d.png", i)+strings.Repeat("x", 1000)] = codectx.SkipBinary
	}
	named.Meta.SkippedFiles = segment.Listed(byPath)
	if d := named.HeapSize() - plain.HeapSize(); d < 1000*1000 {
		t.Errorf("1000 named files of 1 KB paths add %d bytes to the heap size, want at least 1 MB", d)
	}
}
