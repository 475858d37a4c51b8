package query

import "testing"

func TestShare(t *testing.T) {
	tests := []struct {
		q, of []string
		want  float64
	}{
		{nil, []string{"a"}, 0},
		{[]string{"a"}, nil, 0},
		{[]string{"a", "b"}, []string{"b", "c"}, 0.5},
		{[]string{"a", "a", "b"}, []string{"a"}, 0.5}, // distinct words of q
		{[]string{"x", "y", "z"}, []string{"z", "y", "x", "x"}, 1},
	}
	for _, tt := range tests {
		if got := share(tt.q, tt.of); got != tt.want {
			t.Errorf("share(%v, %v) = %v, want %v", tt.q, tt.of, got, tt.want)
		}
	}
}
