package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"testing"

	"codectx/pkg/bm25"
	"codectx/pkg/codectx"
	"codectx/pkg/graph"
)

func sampleShard() *Shard {
	chunks := []codectx.Chunk{
		{Path: "mux.go", Language: codectx.Go, Kind: codectx.KindModule, Name: "mux", Body: "package mux", StartLine: 1, EndLine: 1, EndByte: 11, Imports: []string{"net/http"}, Hash: "h0"},
		{Path: "mux.go", Language: codectx.Go, Kind: codectx.KindMethod, Name: "(*Router).Mount", Signature: "func (r *Router) Mount()", Doc: "Mount mounts.", Body: "func (r *Router) Mount() { r.add(); http.Handle() }", StartLine: 3, EndLine: 5, StartByte: 13, EndByte: 70, Calls: []string{"r.add", "http.Handle"}, Types: []string{"Router"}, Hash: "h1"},
		{Path: "route.go", Language: codectx.Go, Kind: codectx.KindStruct, Name: "Route", Body: "type Route struct{}", StartLine: 1, EndLine: 1, Calls: []string{"r.add"}},
		{Path: "README.md", Language: codectx.Markdown, Kind: codectx.KindWindow, Name: "README.md#L1", Body: "# mux \u00e9", StartLine: 1, EndLine: 1},
	}
	files := []File{
		{Path: "mux.go", Language: codectx.Go, Blob: "b1", Size: 70, Chunks: []int{0, 1}},
		{Path: "route.go", Language: codectx.Go, Chunks: []int{2}},
		{Path: "README.md", Language: codectx.Markdown, Chunks: []int{3}},
		{Path: "empty.txt"},
	}
	b, fb := bm25.NewBuilder(), bm25.NewBuilder()
	for _, c := range chunks {
		var d bm25.Doc
		d.Fields[bm25.FieldName], d.Fields[bm25.FieldBody] = c.Name, c.Body
		b.Add(d)
	}
	for _, f := range files {
		var d bm25.Doc
		d.Fields[bm25.FieldPath] = f.Path
		fb.Add(d)
	}
	return &Shard{
		Stats:    ShardStats{Files: len(files), Chunks: len(chunks), Bytes: 100},
		Files:    files,
		Chunks:   chunks,
		BM25:     b.Build(),
		FileBM25: fb.Build(),
		GraphIn:  []graph.FileInput{{Path: "mux.go", Package: "mux"}},
	}
}

// TestShardFormats checks that a shard reads back the same in the
// in-place format and the old one, and that the in-place one aliases its
// bytes instead of decoding them.
func TestShardFormats(t *testing.T) {
	want := sampleShard()
	for name, enc := range map[string]func() ([]byte, error){"in place": want.MarshalBinary, "v1": want.MarshalV1} {
		data, err := enc()
		if err != nil {
			t.Fatal(err)
		}
		if IsInPlaceShard(data) != (name == "in place") {
			t.Fatalf("%s: IsInPlaceShard %v", name, IsInPlaceShard(data))
		}
		got, err := LoadShard(data, true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got.Chunks, want.Chunks) || !reflect.DeepEqual(got.Files, want.Files) || !reflect.DeepEqual(got.Stats, want.Stats) || !reflect.DeepEqual(got.GraphIn, want.GraphIn) {
			t.Fatalf("%s: shard differs:\n%+v\nwant\n%+v", name, got.Chunks, want.Chunks)
		}
		for _, p := range [][2]*bm25.Index{{got.BM25, want.BM25}, {got.FileBM25, want.FileBM25}} {
			a, _ := p[0].MarshalBinary()
			b, _ := p[1].MarshalBinary()
			if string(a) != string(b) {
				t.Fatalf("%s: bm25 differs", name)
			}
		}
		if name == "in place" {
			if !got.BM25.Raw() || !got.FileBM25.Raw() {
				t.Errorf("in-place bm25 was copied")
			}
			// The body aliases the shard's bytes: changing them shows.
			body := got.Chunks[1].Body
			for i := range data {
				data[i] = 'Z'
			}
			if body == want.Chunks[1].Body {
				t.Errorf("in-place chunk body was copied")
			}
		}
	}
}

// fixCRC rewrites the checksum at the end of an in-place shard.
func fixCRC(b []byte) []byte {
	end := len(b) - 4
	binary.LittleEndian.PutUint32(b[end:], crc32.Checksum(b[:end], crcTable))
	return b
}

// TestInPlaceCorrupt checks that a truncated in-place shard, one with a
// flipped byte, and one with a flipped byte under a checksum made to match
// (framing, offsets and counts wrong but "valid") are errors or load into
// a shard that reads without panicking; never a panic.
func TestInPlaceCorrupt(t *testing.T) {
	good, err := sampleShard().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(good); n++ {
		b := append([]byte(nil), good[:n]...)
		if _, err := LoadShard(b, true); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d of %d bytes: %v, want ErrCorrupt", n, len(good), err)
		}
	}
	for i := range len(good) - 4 {
		for _, x := range []byte{0x01, 0x10, 0x80, 0xff} {
			b := append([]byte(nil), good...)
			b[i] ^= x
			if _, err := LoadShard(b, true); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d flipped: %v, want ErrCorrupt", i, err)
			}
			sh, err := LoadShard(fixCRC(b), true)
			if err != nil {
				continue
			}
			// Loaded: everything must be readable.
			for _, c := range sh.Chunks {
				_ = fmt.Sprint(c)
			}
			sh.BM25.Search([]string{"mux", "mount", "route"}, 3, bm25.DefaultParams())
			sh.FileBM25.Search([]string{"mux", "go"}, 3, bm25.DefaultParams())
		}
	}
}
