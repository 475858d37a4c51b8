package segment

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func heapAlloc() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

type memoTable struct {
	files map[string][]int
	parts []int
	words [][]string
}

// TestHeapOfMatchesHeap builds values of the shapes searchers keep in Memo
// and compares heapOf with the heap each holds after a collection.
func TestHeapOfMatchesHeap(t *testing.T) {
	const n = 50000
	key := func(i int) string { return fmt.Sprintf("pkg/dir%d/file_%d.go", i%97, i) }
	for _, tc := range []struct {
		name  string
		build func() any
	}{
		{"map of int lists", func() any {
			m := map[string][]int{}
			for i := range n {
				m[key(i)] = []int{i, i + 1, i + 2}
			}
			return m
		}},
		{"map of bools", func() any {
			m := map[string]bool{}
			for i := range n {
				m[key(i)] = i%2 == 0
			}
			return m
		}},
		{"floats", func() any { return make([]float64, 4*n) }},
		{"struct of tables", func() any {
			x := &memoTable{files: map[string][]int{}, parts: make([]int, n)}
			for i := range n {
				x.files[key(i)] = []int{i}
				x.words = append(x.words, strings.Fields(fmt.Sprintf("w%d x%d y%d", i, i, i)))
			}
			return x
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Segment{}
			before := heapAlloc()
			v := tc.build()
			held := heapAlloc() - before
			est := s.heapOf(v)
			runtime.KeepAlive(v)
			r := float64(est) / float64(held)
			t.Logf("heapOf %d, heap held %d: %.2fx", est, held, r)
			if r < 0.8 || r > 1.25 {
				t.Errorf("heapOf %d is %.2fx the %d bytes held", est, r, held)
			}
		})
	}
	var s Segment
	if s.heapOf(nil) != 0 {
		t.Error("heapOf(nil) != 0")
	}
	shared := strings.Repeat("x", 1000)
	if got := s.heapOf([]string{shared, shared}); got >= 2000 {
		t.Errorf("a string reached twice counted twice: %d", got)
	}
}
