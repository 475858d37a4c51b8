package query_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"codectx/pkg/query"
)

// A query of the 8 KB cap made of one endless qualified name ("A.A.A...")
// costs about what its length says in every arm: 8x the input within a
// generous 30x of the time, not the square. Timed against itself in one
// run, so the machine's speed cancels out.
func TestHostileSymbolQueryLinear(t *testing.T) {
	eng := &query.Engine{Seg: fixture(t)}
	cost := func(n int) time.Duration {
		q := strings.Repeat("A.", n/2)
		best := time.Duration(1 << 62)
		for range 3 {
			t0 := time.Now()
			if _, err := eng.Query(context.Background(), query.Request{Query: q, Budget: 2000, Route: true}); err != nil {
				t.Fatal(err)
			}
			best = min(best, time.Since(t0))
		}
		return best
	}
	small, large := cost(1000), cost(8000)
	ratio := float64(large) / float64(max(small, 100*time.Microsecond))
	t.Logf("1 KB %v, 8 KB %v: ratio %.1f", small, large, ratio)
	if ratio > 30 {
		t.Errorf("8 KB of A. took %v, 1 KB %v: ratio %.0f, want about 8 (linear)", large, small, ratio)
	}
}
