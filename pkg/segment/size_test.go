package segment_test

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/segment"
	"codectx/pkg/source"
)

// TestSizeMatchesHeap loads a real segment and compares Size with the heap
// the loaded segment holds.
func TestSizeMatchesHeap(t *testing.T) {
	dir := filepath.Join(runtime.GOROOT(), "src", "encoding", "json")
	snap, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	built, _, err := index.BuildSegment(context.Background(), blob.NewMem(), snap, "json", index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := built.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	heap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	if _, err := segment.Load(data); err != nil { // first use of any lazy global
		t.Fatal(err)
	}
	before := heap()
	seg, err := segment.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	held := heap() - before
	size := seg.Size()
	runtime.KeepAlive(seg)
	runtime.KeepAlive(data)
	t.Logf("%d chunks: Size %d bytes, heap held %d bytes", len(seg.Chunks), size, held)
	if r := float64(size) / float64(held); r < 0.75 || r > 1.33 {
		t.Errorf("Size %d is %.2f of the %d bytes the segment holds", size, r, held)
	}
}
