package main

import (
	"io"
	"log/slog"
	"runtime/debug"
	"testing"
)

// TestBudget checks how a process budget is shared out: the cache gets the
// budget less its reserve, the Go memory limit what the process's file
// pages leave (never below a quarter).
func TestBudget(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		mem, file, cache, limit int64
	}{
		{1024 * mib, 128 * mib, 640 * mib, 896 * mib},
		{1024 * mib, 538 * mib, 640 * mib, 486 * mib},
		{1024 * mib, 1000 * mib, 640 * mib, 256 * mib}, // floor: a quarter
		{4096 * mib, 2048 * mib, 3328 * mib, 2048 * mib},
		{256 * mib, 0, 64 * mib, 256 * mib},
	} {
		if got := cacheShare(tc.mem); got != tc.cache {
			t.Errorf("cacheShare(%d MiB) = %d MiB, want %d", tc.mem/mib, got/mib, tc.cache/mib)
		}
		if got := heapLimit(tc.mem, tc.file); got != tc.limit {
			t.Errorf("heapLimit(%d MiB, %d MiB) = %d MiB, want %d", tc.mem/mib, tc.file/mib, got/mib, tc.limit/mib)
		}
	}
	for _, tc := range []struct {
		status string
		want   int64
		ok     bool
	}{
		{"Name:\tx\nRssAnon:\t   13664 kB\nRssFile:\t  158380 kB\nRssShmem:\t0 kB\n", 158380 << 10, true},
		{"RssFile:\t12 MB\n", 0, false},
		{"RssFile:\t-5 kB\n", 0, false},
		{"RssFile:\n", 0, false},
		{"VmRSS:\t1 kB\n", 0, false},
	} {
		if got, ok := parseRssFile([]byte(tc.status)); got != tc.want || ok != tc.ok {
			t.Errorf("parseRssFile(%q) = %d, %v, want %d, %v", tc.status, got, ok, tc.want, tc.ok)
		}
	}
	if n, ok := rssFile(); ok && n <= 0 {
		t.Errorf("RssFile of this process: %d", n)
	}
	if got := fileBytes(1 << 40); got != 1<<40 && got != binaryReserve+1<<40 {
		t.Errorf("fileBytes(1 TiB mapped) = %d, want at least the mapped bytes", got)
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	t.Setenv("GOMEMLIMIT", "")
	if c, f := budget(log, 0, 300*mib); c != 300*mib || f != nil {
		t.Errorf("no budget: cache %d, follow %v", c, f != nil)
	}
	c, f := budget(log, 1024*mib, 300*mib)
	if c != 640*mib || f == nil {
		t.Fatalf("1 GiB budget: cache %d MiB, follow %v", c/mib, f != nil)
	}
	if got, want := debug.SetMemoryLimit(-1), heapLimit(1024*mib, fileBytes(0)); got > want || got < want-64*mib {
		t.Errorf("limit %d MiB, want about %d", got/mib, want/mib)
	}
	f(600 * mib)
	if got := debug.SetMemoryLimit(-1); got > 424*mib {
		t.Errorf("limit with 600 MiB mapped: %d MiB, want at most 424", got/mib)
	}
	t.Setenv("GOMEMLIMIT", "2GiB")
	if c, f := budget(log, 1024*mib, 300*mib); c != 640*mib || f != nil {
		t.Errorf("GOMEMLIMIT set: cache %d MiB, follow %v", c/mib, f != nil)
	}
}
