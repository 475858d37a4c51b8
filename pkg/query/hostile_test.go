package query

import (
	"strings"
	"testing"
)

// A query of the 8 KB cap made of one endless qualified name ("A.A.A...")
// gives the symbol arm at most maxSymbolParts parts to try, so its suffix
// search is linear in the query, not quadratic (it was 41x the time of
// 1 KB at 8 KB). Counted, not timed: BenchmarkHostileSymbol measures it.
func TestHostileSymbolPartsBounded(t *testing.T) {
	for _, n := range []int{2, 8, 9, 4000} {
		parts := symbolParts(strings.Repeat("A.", n) + "Last")
		if len(parts) > maxSymbolParts {
			t.Errorf("%d-part name: %d parts tried, want at most %d", n+1, len(parts), maxSymbolParts)
		}
		if parts[len(parts)-1] != "last" && parts[len(parts)-1] != "Last" {
			t.Errorf("%d-part name: the tail %q was not kept", n+1, parts[len(parts)-1])
		}
	}
	if got := symbolParts("value::Serializer::serialize_map"); len(got) != 3 {
		t.Errorf("a real qualified name lost parts: %q", got)
	}
}

func BenchmarkHostileSymbol(b *testing.B) {
	for _, n := range []int{1000, 8000} {
		q := strings.Repeat("A.", n/2)
		b.Run(map[int]string{1000: "1KB", 8000: "8KB"}[n], func(b *testing.B) {
			for b.Loop() {
				for i, parts := 0, symbolParts(q); i < len(parts); i++ {
					_ = strings.Join(parts[i:], ".")
				}
			}
		})
	}
}
