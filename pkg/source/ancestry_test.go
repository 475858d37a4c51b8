package source

import (
	"context"
	"strings"
	"testing"
)

func TestIsAncestor(t *testing.T) {
	f := newFixture(t)
	c1 := f.commit("one", map[string]string{"a.go": "package a\n"})
	c2 := f.commit("two", map[string]string{"b.go": "package a\n"})
	open := func(rev string) *Snapshot {
		s, err := Open(context.Background(), f.dir, Options{Rev: rev})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	tests := []struct {
		snap, other string
		want        bool
	}{
		{c1.String(), c2.String(), true},  // going back
		{c2.String(), c1.String(), false}, // going forward
		{c2.String(), c2.String(), false}, // the same commit
		{c1.String(), strings.Repeat("ab", 20), false},
		{c1.String(), "not a hash", false},
	}
	for _, tt := range tests {
		got, err := open(tt.snap).IsAncestor(tt.other)
		if err != nil || got != tt.want {
			t.Errorf("%.7s.IsAncestor(%.7s) = %v, %v; want %v", tt.snap, tt.other, got, err, tt.want)
		}
		// Descends is the other direction: c2 descends from c1.
		want := tt.snap == c2.String() && tt.other == c1.String()
		if got, err := open(tt.snap).Descends(tt.other); err != nil || got != want {
			t.Errorf("%.7s.Descends(%.7s) = %v, %v; want %v", tt.snap, tt.other, got, err, want)
		}
	}
}
