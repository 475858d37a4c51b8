package graph

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestLastSep checks lastSep against its definition: the later of the
// last "." and the last "::".
func TestLastSep(t *testing.T) {
	want := func(s string) (int, int) {
		d, c := strings.LastIndex(s, "."), strings.LastIndex(s, "::")
		if c >= 0 && c+1 > d {
			return c, 2
		}
		if d >= 0 {
			return d, 1
		}
		return -1, 0
	}
	for _, s := range []string{"", ":", "::", ":::", "a", "a.b", "a::b", "a::b.c", "a.b::c", "a::b:c", "a:b", "x:::y", ".::", "::.", "a.b.c", "Foo::new"} {
		i, w := lastSep(s)
		if wi, ww := want(s); i != wi || w != ww {
			t.Errorf("lastSep(%q) = %d, %d; want %d, %d", s, i, w, wi, ww)
		}
	}
}

// TestSortEdges checks sortEdges against a sort by cmpEdge, on edges
// that pack and on edges that fall back (negative or out-of-range values).
func TestSortEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		edge func() rawEdge
	}{
		{"small", func() rawEdge { return rawEdge{r.Int32N(50), r.Int32N(50), EdgeKind(1 + r.IntN(3))} }},
		{"large ids", func() rawEdge { return rawEdge{r.Int32(), r.Int32(), EdgeKind(1 + r.IntN(3))} }},
		{"fallback", func() rawEdge { return rawEdge{r.Int32N(50) - 5, r.Int32N(50), EdgeKind(r.IntN(6))} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edges := make([]rawEdge, 5000)
			for i := range edges {
				edges[i] = tc.edge()
			}
			want := slices.Clone(edges)
			slices.SortFunc(want, cmpEdge)
			sortEdges(edges)
			if !slices.Equal(edges, want) {
				t.Fatal("sortEdges differs from a sort by cmpEdge")
			}
			sortEdges(edges) // sorted already
			if !slices.Equal(edges, want) {
				t.Fatal("sortEdges changed sorted edges")
			}
		})
	}
}
