package eval

import (
	"slices"
	"testing"

	"codectx/pkg/codectx"
	"codectx/pkg/query"
	"codectx/pkg/segment"
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
	if got, ok := lineRecall(changed, chunks, nil); !ok || got != 0.5 {
		t.Errorf("lineRecall = %v, %v; want 0.5 (2 of 4 lines)", got, ok)
	}
	if got, ok := fileLineRecall(changed, map[string]bool{"a.go": true}); !ok || got != 0.75 {
		t.Errorf("fileLineRecall = %v, %v; want 0.75", got, ok)
	}
	if _, ok := lineRecall(nil, chunks, nil); ok {
		t.Error("a task without changed lines counted")
	}
}

// A class emitted as an outline shows its own lines, not its members'
// bodies: a changed line inside a method counts only when the method's
// chunk is emitted whole too.
func TestLineRecallOutline(t *testing.T) {
	class := "class Cart:\n    def empty(self):\n        return 0\n"
	outline := "class Cart:\n    def empty(self): ...\n"
	seg := &segment.Segment{Chunks: []codectx.Chunk{
		{Path: "cart.py", Kind: codectx.KindClass, StartLine: 1, EndLine: 3, StartByte: 0, EndByte: len(class), Body: outline},
		{Path: "cart.py", Kind: codectx.KindMethod, StartLine: 2, EndLine: 3, StartByte: 12, EndByte: len(class), Body: class[12:]},
		{Path: "other.py", Kind: codectx.KindClass, StartLine: 1, EndLine: 3, StartByte: 0, EndByte: len(class), Body: outline},
	}}
	changed := map[string][]int{"cart.py": {1, 3}}
	sh := newShown(seg, changed)
	classOnly := []query.Chunk{{Path: "cart.py", StartLine: 1, EndLine: 3, Granularity: "full"}}
	if got, _ := lineRecall(changed, classOnly, sh); got != 0.5 {
		t.Errorf("the outline alone: %v, want 0.5 (its header line, not the method's body)", got)
	}
	if got, _ := lineRecall(changed, classOnly, nil); got != 1 {
		t.Errorf("without outlines known: %v, want 1", got)
	}
	both := append(classOnly, query.Chunk{Path: "cart.py", StartLine: 2, EndLine: 3, Granularity: "full"})
	if got, _ := lineRecall(changed, both, sh); got != 1 {
		t.Errorf("the outline and the method: %v, want 1", got)
	}
	if len(sh.outlines) != 1 {
		t.Errorf("%d outlines read, want cart.py's only (other.py has no changed line)", len(sh.outlines))
	}
}
