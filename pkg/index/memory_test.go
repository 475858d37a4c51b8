package index_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"codectx/pkg/blob/local"
	"codectx/pkg/chunk"
	"codectx/pkg/index"
	"codectx/pkg/source"
)

// TestGraphInputDropsSource builds 32 MB of Go in 1 MB shards and checks,
// when the last shard is parsed, that the heap holds little more than when
// the first one was: what a built shard leaves behind is its graph input,
// whose names, calls, types and imports must not keep its files' text
// live (parsed names are substrings of the text: kept as they are, the
// heap would hold the 31 MB of the shards before). The files' text is
// made on each read, so nothing else keeps it.
func TestGraphInputDropsSource(t *testing.T) {
	if testing.Short() {
		t.Skip("parses 32 MB")
	}
	const nfiles, size = 64, 512 << 10
	pad := strings.Repeat("// padding of the file, held by no chunk of the graph input.\n", size/62)
	text := func(i int) []byte {
		return []byte(fmt.Sprintf("package p%d\n\nimport \"fmt\"\n\n// T%d is a type.\ntype T%d struct{ n int }\n\n// F%d prints.\nfunc (t *T%d) F%d() { fmt.Println(t.n) }\n\n%s", i, i, i, i, i, i, pad))
	}
	var files []source.File
	for i := range nfiles {
		files = append(files, source.File{Path: fmt.Sprintf("p%02d/f.go", i), Blob: fmt.Sprintf("%040x", i), Size: int64(len(text(i)))})
	}
	store, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var first, last uint64
	calls := 0
	parse := func(ctx context.Context, fs []source.File) ([]index.Parsed, error) {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if calls == 0 {
			first = ms.HeapAlloc
		}
		last = ms.HeapAlloc
		calls++
		out := make([]index.Parsed, len(fs))
		for i, f := range fs {
			var n int
			fmt.Sscanf(f.Path, "p%d/", &n)
			out[i].Result = chunk.Parse(ctx, f.Path, text(n), chunk.Options{})
		}
		return out, nil
	}
	m := &index.Manifest{Tenant: "t", Repo: "r", Commit: "c", Files: files}
	_, st, ss, err := index.BuildShards(context.Background(), store, m, nil, index.ShardOptions{Bytes: 1 << 20}, parse, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ss.Written < 16 || st.Chunks < 2*nfiles {
		t.Fatalf("%d shards written, %d chunks: the files were not parsed as meant", ss.Written, st.Chunks)
	}
	grown := int64(last) - int64(first)
	t.Logf("%d shards; heap %d KB at the first, %d KB at the last (%d KB more)", ss.Written, first>>10, last>>10, grown>>10)
	if grown > 4<<20 {
		t.Fatalf("the heap grew by %d KB over %d shards of %d MB of source: the graph input holds the files' text", grown>>10, ss.Written, nfiles*size>>20)
	}
}
