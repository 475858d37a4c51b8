package index_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/source"
)

// benchIndex parses and indexes dir cold (empty parse cache) on one
// worker, so MB/s is per core. It reports the segment size relative to the
// source size.
func benchIndex(b *testing.B, dir string) {
	ctx := context.Background()
	snap, err := source.Open(ctx, dir, source.Options{})
	if err != nil {
		b.Skipf("open %s: %v", dir, err)
	}
	defer snap.Close()
	var size int64
	for _, f := range snap.Files {
		size += f.Size
	}
	b.SetBytes(size)
	b.ResetTimer()
	var segBytes, chunks int
	for i := 0; i < b.N; i++ {
		seg, _, err := index.BuildSegment(ctx, blob.NewMem(), snap, "bench", index.Options{Workers: 1, HistoryLimit: -1})
		if err != nil {
			b.Fatal(err)
		}
		data, err := seg.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		segBytes, chunks = len(data), len(seg.Chunks)
	}
	b.ReportMetric(float64(segBytes)/float64(size), "segment/source")
	b.ReportMetric(float64(chunks), "chunks")
}

// BenchmarkIndexGo indexes $GOROOT/src/net/http (Go, on every machine).
func BenchmarkIndexGo(b *testing.B) {
	benchIndex(b, filepath.Join(runtime.GOROOT(), "src", "net", "http"))
}

// BenchmarkIndexPython indexes the json, email and asyncio packages of the
// local Python standard library; skipped where python3 is absent.
func BenchmarkIndexPython(b *testing.B) {
	out, err := exec.Command("python3", "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])").Output()
	if err != nil {
		b.Skip("python3 not found")
	}
	benchIndex(b, filepath.Join(strings.TrimSpace(string(out)), "asyncio"))
}
