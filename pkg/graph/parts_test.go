package graph

import (
	"bytes"
	"testing"
)

// TestPartsSameGraph builds graphs with the references resolved in one
// part and in several (resolveAll's split) and checks they encode to the
// same bytes and count the same.
func TestPartsSameGraph(t *testing.T) {
	defer func() { testParts = 0 }()
	inputs := map[string]Input{"synthetic 3k": synthetic(3000), "synthetic 40k": synthetic(40000)}
	for _, fx := range allFixtures() {
		inputs["fixture "+fx.name] = fx.in
	}
	for name, in := range inputs {
		testParts = 1
		one := Build(in)
		want, err := one.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{2, 3, 4, 7} {
			testParts = n
			g := Build(in)
			got, err := g.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || g.Stats() != one.Stats() {
				t.Errorf("%s: %d parts: stats %+v, want %+v (bytes equal %v)", name, n, g.Stats(), one.Stats(), bytes.Equal(got, want))
			}
		}
	}
}
