package rank_test

import (
	"math"
	"strings"
	"testing"

	"codectx/pkg/query/rank"
)

func TestParse(t *testing.T) {
	names := []string{"a", "b", "c"}
	m, err := rank.Parse([]byte(`{"kind":"linear","features":["c","a","a*b"],"mean":[1,0,0],"scale":[2,1,1],"weights":[4,-1,0.5],"bias":0.5,
		"trees":[{"feature":[1,-1,-1],"threshold":[0.5,0,0],"left":[1,-1,-1],"right":[2,-1,-1],"value":[0,10,-10]}]}`), names)
	if err != nil {
		t.Fatal(err)
	}
	if m.Depth != 50 {
		t.Errorf("default depth = %d, want 50", m.Depth)
	}
	tests := []struct {
		x    []float64
		want float64
	}{
		// 0.5 + 4*(c-1)/2 - a + 0.5*a*b + tree(a < 0.5 ? 10 : -10)
		{[]float64{0, 9, 3}, 0.5 + 4 + 10},
		{[]float64{1, 8, 1}, 0.5 - 1 + 4 - 10},
	}
	for _, tt := range tests {
		if got := m.Score(tt.x); got != tt.want {
			t.Errorf("Score(%v) = %v, want %v", tt.x, got, tt.want)
		}
	}
	for _, bad := range []string{
		`{"kind":"forest"}`,
		`{"kind":"linear","features":["z"],"mean":[0],"scale":[1],"weights":[1]}`,
		`{"kind":"linear","features":["a*z"],"mean":[0],"scale":[1],"weights":[1]}`,
		`{"kind":"linear","features":["a"],"mean":[0],"scale":[0],"weights":[1]}`,
		`{"kind":"linear","features":["a","b"],"mean":[0],"scale":[1],"weights":[1]}`,
		`{"kind":"linear","features":["a"],"mean":[0],"scale":[1],"weights":[1],"trees":[{"feature":[0],"threshold":[0],"left":[0],"right":[0],"value":[0]}]}`,
		`not json`,
	} {
		if _, err := rank.Parse([]byte(bad), names); err == nil {
			t.Errorf("Parse(%s) accepted", bad)
		}
	}
}

func TestShippedBindsEngineFeatures(t *testing.T) {
	if _, err := rank.Shipped([]string{"nothing"}); err == nil || !strings.Contains(err.Error(), "not computed") {
		t.Errorf("shipped model bound to an unrelated layout: %v", err)
	}
}

func TestUses(t *testing.T) {
	m, err := rank.Parse([]byte(`{"kind":"linear","features":["a","b*c"],"mean":[0,0],"scale":[1,1],"weights":[1,1]}`), []string{"a", "b", "c", "d"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		names []string
		want  bool
	}{
		{[]string{"a"}, true},
		{[]string{"c"}, true},
		{[]string{"d", "b"}, true},
		{[]string{"d"}, false},
		{nil, false},
	} {
		if got := m.Uses(tt.names...); got != tt.want {
			t.Errorf("Uses(%v) = %v, want %v", tt.names, got, tt.want)
		}
	}
}

func TestClip(t *testing.T) {
	m, err := rank.Parse([]byte(`{"kind":"linear","features":["a"],"mean":[0],"scale":[0.1],"weights":[2],"clip":3}`), []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ x, want float64 }{
		{0.1, 2},   // z = 1
		{1, 6},     // z = 10, clipped to 3
		{-0.5, -6}, // z = -5, clipped to -3
	} {
		if got := m.Score([]float64{tt.x}); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("Score(%v) = %v, want %v", tt.x, got, tt.want)
		}
	}
	if _, err := rank.Parse([]byte(`{"kind":"linear","features":["a"],"mean":[0],"scale":[1],"weights":[1],"clip":-1}`), []string{"a"}); err == nil {
		t.Error("negative clip accepted")
	}
}
