package eval

import (
	"slices"
	"testing"

	"codectx/pkg/query"
)

func TestDiffLines(t *testing.T) {
	const base = "a\nb\nc\nd\ne\n"
	tests := []struct {
		name, after string
		want        []int
	}{
		{"same", base, nil},
		{"one line changed", "a\nB\nc\nd\ne\n", []int{2}},
		{"two lines deleted", "a\nd\ne\n", []int{2, 3}},
		{"lines inserted count at the line before", "a\nb\nx\ny\nc\nd\ne\n", []int{2}},
		{"inserted at the top", "x\na\nb\nc\nd\ne\n", []int{1}},
		{"appended", base + "f\n", []int{5}},
		{"last line without a newline changed", "a\nb\nc\nd\nE", []int{5}},
		{"file emptied", "", []int{1, 2, 3, 4, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := diffLines(base, tt.after); !slices.Equal(got, tt.want) {
				t.Errorf("diffLines = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLineRecall(t *testing.T) {
	changed := map[string][]int{"a.go": {3, 10, 20}, "b.go": {5}}
	chunks := []query.Chunk{
		{Path: "a.go", StartLine: 1, EndLine: 12, Granularity: "full"},  // 3, 10
		{Path: "a.go", StartLine: 18, EndLine: 25, Granularity: "stub"}, // a stub shows no body
		{Path: "c.go", StartLine: 1, EndLine: 100, Granularity: "full"},
	}
	if got, ok := lineRecall(changed, chunks); !ok || got != 0.5 {
		t.Errorf("lineRecall = %v, %v; want 0.5 (2 of 4 lines)", got, ok)
	}
	if got, ok := fileLineRecall(changed, map[string]bool{"a.go": true}); !ok || got != 0.75 {
		t.Errorf("fileLineRecall = %v, %v; want 0.75", got, ok)
	}
	if _, ok := lineRecall(nil, chunks); ok {
		t.Error("a task without changed lines counted")
	}
}
