package query_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"codectx/pkg/query"
	"codectx/pkg/segment"
)

// A repository's commit messages are its own text, kept up to 64 KiB
// each for 500 commits, and the words of every one were held for the
// segment and scanned by each query's history arm. A history of 500
// messages of 64 KiB of distinct words (32 MB in all) cost the first
// history question 1.8 GB of allocations (1.9 s) and left 190 MB in the
// segment's memo; every later query of the repository then took 70-90 ms
// scanning them. Only each message's head is weighed now: the first
// question allocates 60 MB and the memo holds 6 MB, and the history still
// answers from the words at the head.
func TestHistoryMessagesBounded(t *testing.T) {
	seg := fixture(t)
	hist := make([]segment.Commit, 500)
	for i := range hist {
		var b strings.Builder
		b.WriteString("price: update the price table\n\n")
		for j := 0; b.Len() < 64<<10; j++ {
			fmt.Fprintf(&b, "w%dx%d ", i, j)
		}
		hist[i] = segment.Commit{Hash: fmt.Sprintf("%040x", i+1), Author: "Dev <dev@example.com>",
			When: "2026-01-01T00:00:00Z", Message: b.String(), Files: []string{"price/price.go"}}
	}
	seg.History = hist
	eng := &query.Engine{Seg: seg}
	heap := seg.HeapSize()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	resp, err := eng.Query(context.Background(), query.Request{Query: "what changed recently in the price table", Budget: 4000, Route: true})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&m1)
	if len(resp.Commits) == 0 {
		t.Fatalf("history question listed no commits (trigger %s)", resp.Trigger)
	}
	const maxAlloc, maxMemo = 256 << 20, 32 << 20
	if got := m1.TotalAlloc - m0.TotalAlloc; got > maxAlloc {
		t.Errorf("first history question allocated %d MB, want at most %d MB", got>>20, maxAlloc>>20)
	}
	if grew := seg.HeapSize() - heap; grew > maxMemo {
		t.Errorf("the segment holds %d MB more after a history question, want at most %d MB", grew>>20, maxMemo>>20)
	}
}
