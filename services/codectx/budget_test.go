package main

import (
	"io"
	"log/slog"
	"runtime/debug"
	"testing"
)

// TestBudget checks how a process budget is shared out: the cache gets the
// budget less its reserve, the Go memory limit what the binary and the
// cache's mapped pages leave, and both stay within the budget together.
func TestBudget(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		mem, mapped, cache, limit int64
	}{
		{1024 * mib, 0, 640 * mib, 896 * mib},
		{1024 * mib, 538 * mib, 640 * mib, 358 * mib},
		{1024 * mib, 1000 * mib, 640 * mib, 256 * mib}, // floor: a quarter
		{4096 * mib, 2048 * mib, 3328 * mib, 1920 * mib},
		{256 * mib, 0, 64 * mib, 128 * mib},
	} {
		if got := cacheShare(tc.mem); got != tc.cache {
			t.Errorf("cacheShare(%d MiB) = %d MiB, want %d", tc.mem/mib, got/mib, tc.cache/mib)
		}
		if got := heapLimit(tc.mem, tc.mapped); got != tc.limit {
			t.Errorf("heapLimit(%d MiB, %d MiB) = %d MiB, want %d", tc.mem/mib, tc.mapped/mib, got/mib, tc.limit/mib)
		}
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
	if got := debug.SetMemoryLimit(-1); got != 896*mib {
		t.Errorf("limit %d MiB, want 896", got/mib)
	}
	f(500 * mib)
	if got := debug.SetMemoryLimit(-1); got != 396*mib {
		t.Errorf("limit with 500 MiB mapped: %d MiB, want 396", got/mib)
	}
	t.Setenv("GOMEMLIMIT", "2GiB")
	if c, f := budget(log, 1024*mib, 300*mib); c != 640*mib || f != nil {
		t.Errorf("GOMEMLIMIT set: cache %d MiB, follow %v", c/mib, f != nil)
	}
}
