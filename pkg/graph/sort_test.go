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

// TestNameSetLookedUp checks nameSet.lookedUp against the lookup it
// stands for, a map of the names and the separators found again.
func TestNameSetLookedUp(t *testing.T) {
	long := strings.Repeat("n", 70)
	names := []string{"", "a", "b", "Get", "http", "x", long, long + "x", "Server", "c"}
	lookups := []string{"a", "Get", "http.Get", "net/http.Get", "x::y::Get", "a::b", "a.b.c", "::", ".", "a.", ".a", "a::", "x:y.Get",
		"Server.Serve", "pkg.Server.Get", long, "q." + long, long + ".Get", long + "x", "q::" + long + "x", "", "zz", "m::n.b"}
	old := func(name string, dirty map[string]bool) bool {
		if len(dirty) == 0 {
			return false
		}
		i, w := lastSep(name)
		if i < 0 {
			return dirty[name]
		}
		return dirty[name[i+w:]] || dirty[lastSegment(name[:i])]
	}
	for mask := range 1 << len(names) {
		var d nameSet
		m := map[string]bool{}
		for i, n := range names {
			if mask&(1<<i) != 0 {
				d.add(n)
				m[n] = true
			}
		}
		for _, l := range lookups {
			if got, want := d.lookedUp(l, sepOf(l)), old(l, m); got != want {
				t.Fatalf("names %v, lookup %q: %v, want %v", m, l, got, want)
			}
		}
	}
}
