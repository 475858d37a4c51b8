package index_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/blob/local"
	"codectx/pkg/bm25"
	"codectx/pkg/index"
	"codectx/pkg/segment"
)

// TestReuseEqualsFresh loads each snapshot of a series of commits twice:
// joined with the shards it shares with the snapshot loaded before taken
// from that one (what a query server does when HEAD moves), and freshly
// from the store. The two must be the same segment (its encoding byte for
// byte: files, chunks, symbol table, BM25, graph) and answer every query
// the same, over commits that change, add, delete and rename files, touch
// several shards, go back to an earlier tree, and declare a name another
// shard declares too; on a memory store (shards read into the heap) and a
// local one (shards mapped), with the previous snapshot released (evicted)
// before some loads.
func TestReuseEqualsFresh(t *testing.T) {
	for _, kind := range []string{"mem", "local"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			r := goRepo(t)
			store := blob.NewMem()
			if kind == "local" {
				var err error
				if store, err = local.Open(t.TempDir()); err != nil {
					t.Fatal(err)
				}
			}
			read := func(p string) string {
				data, err := os.ReadFile(filepath.Join(r.Dir, filepath.FromSlash(p)))
				if err != nil {
					t.Fatal(err)
				}
				return string(data)
			}
			hex, csv := read("encoding/hex/hex.go"), read("encoding/csv/reader.go")
			decl := "package hex\n\n// DecoderOne is a decoder state.\ntype DecoderOne struct{}\n\n// DecoderTwo is a decoder state.\ntype DecoderTwo struct{}\n\n// DecoderThree is a decoder state.\ntype DecoderThree struct{}\n"
			code := "package hex\n\n// Alpha runs the decoder.\nfunc Alpha() {}\n\n// Beta runs the decoder.\nfunc Beta() {}\n\n// Gamma runs the decoder state.\nfunc Gamma() {}\n"
			steps := []struct {
				name    string
				files   map[string]string
				release bool // release the previous segment before the load
				shared  int  // at least this many shards taken from the previous
			}{
				{name: "first"},
				{name: "one file", files: map[string]string{"encoding/hex/hex.go": hex + "\nfunc ReuseMarker() {}\n"}, shared: 7},
				{name: "a file added", files: map[string]string{"encoding/gob/new.go": "package gob\n\n// Decode shadows the name of other packages.\nfunc Decode() {}\n\ntype Decoder struct{}\n"}, shared: 5},
				{name: "a file deleted", files: map[string]string{"encoding/csv/writer.go": ""}, shared: 5, release: true},
				{name: "renamed", files: map[string]string{"encoding/csv/reader.go": "", "encoding/csv/read.go": csv}, shared: 5},
				{name: "several shards", files: map[string]string{
					"bufio/extra.go": "package bufio\n\nfunc Extra() {}\n", "strconv/extra.go": "package strconv\n\nfunc Extra() {}\n",
					"encoding/xml/extra.go": "package xml\n\nfunc (d *Decoder) Extra() {}\n", "README.md": "# std\n\nChanged.\n",
				}},
				{name: "back", files: map[string]string{"encoding/hex/hex.go": hex, "encoding/gob/new.go": ""}, release: true},
				{name: "history only", files: map[string]string{"README.md": "# std\n\nChanged again.\n"}, shared: 7},
				// A declaration-only file whose name abbreviates its
				// symbols' word, then code with other names: its entries
				// of every table the searchers derive change.
				{name: "declarations", files: map[string]string{"encoding/hex/dec.go": decl}, shared: 5},
				{name: "code", files: map[string]string{"encoding/hex/dec.go": code}, shared: 7},
				{name: "unchanged file", files: map[string]string{"encoding/hex/hex.go": hex + "\n// Touched.\n"}, shared: 7},
			}
			var prev *segment.Segment
			for i, st := range steps {
				if i > 0 {
					r.Commit(st.name, st.files)
				}
				if _, err := index.Build(ctx, store, r.Dir, index.Options{Name: "std", ShardBytes: 40 << 10}); err != nil {
					t.Fatal(err)
				}
				h, err := index.ReadHead(ctx, store, index.DefaultTenant, "std")
				if err != nil {
					t.Fatal(err)
				}
				if st.release && prev != nil {
					prev.Release()
				}
				got, err := index.LoadSegmentWith(ctx, store, h.Segment, index.LoadOptions{Prev: prev})
				if err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				want, err := index.LoadSegment(ctx, store, h.Segment)
				if err != nil {
					t.Fatal(err)
				}
				if n := sharedParts(got.BM25, prev); n < st.shared {
					t.Fatalf("%s: %d shards taken from the previous snapshot, want %d or more", st.name, n, st.shared)
				}
				if n := sharedParts(want.BM25, got); n != 0 {
					t.Fatalf("%s: the fresh load shares %d shards", st.name, n)
				}
				sameSegment(t, got, want)
				a, err := got.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				b, err := want.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a, b) {
					t.Fatalf("%s: the encodings differ (%d vs %d bytes)", st.name, len(a), len(b))
				}
				if ids := got.Lookup("decode"); len(ids) < 2 || !strings.EqualFold(got.Chunks[ids[len(ids)-1]].Name, "decode") && !strings.HasSuffix(strings.ToLower(got.Chunks[ids[len(ids)-1]].Name), ".decode") {
					t.Fatalf("%s: Lookup(decode) = %v", st.name, ids)
				}
				sameAnswers(t, got, want)
				sameAnswersTo(t, got, want, []string{"hex decoder state", "dec", "decoder", "hex Alpha"})
				if prev != nil {
					prev.Release()
				}
				want.Release()
				prev = got
			}
		})
	}
}

// sharedParts is the number of BM25 parts of ix that prev's index holds too
// (the shards taken from prev).
func sharedParts(ix *bm25.Index, prev *segment.Segment) int {
	if prev == nil {
		return 0
	}
	old := map[*bm25.Index]bool{}
	for _, p := range prev.BM25.Parts() {
		old[p] = true
	}
	n := 0
	for _, p := range ix.Parts() {
		if old[p] {
			n++
		}
	}
	return n
}
