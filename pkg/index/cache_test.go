package index_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/blob/local"
	"codectx/pkg/chunk"
	"codectx/pkg/codectx"
	"codectx/pkg/index"
	"codectx/pkg/source"
)

func gitBlob(data []byte) string {
	h := sha1.New()
	h.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// TestTornCacheEntry: parse-cache entries and file texts are written
// without an fsync each, so a crash of the machine can tear them. A torn
// entry is a miss (parsed again and rewritten), a torn or lost text is
// written again on the next hit, an entry of the old format (plain JSON) is
// still a hit, and the graph stage's read of a torn entry fails and deletes
// it so that the next plan parses the file again.
func TestTornCacheEntry(t *testing.T) {
	ctx := context.Background()
	src := []byte("package a\n\n// F does f.\nfunc F() int { return G() }\n\nfunc G() int { return 1 }\n")
	f := source.File{Path: "a/a.go", Blob: gitBlob(src), Size: int64(len(src))}
	key := index.ParseKey("t", codectx.Go, f.Blob)
	content := index.ContentKey(f.Blob)
	reads := 0
	read := func() ([]byte, error) { reads++; return src, nil }

	for _, tc := range []struct {
		name      string
		entry     func(good []byte) []byte // nil: leave the entry as written
		text      []byte                   // nil: leave the text as written
		reused    bool
		wantReads int
	}{
		{name: "intact", reused: true},
		{name: "truncated entry", entry: func(g []byte) []byte { return g[:len(g)/2] }, wantReads: 1},
		{name: "empty entry", entry: func([]byte) []byte { return []byte{} }, wantReads: 1},
		{name: "zeroed entry", entry: func(g []byte) []byte { return make([]byte, len(g)) }, wantReads: 1},
		{name: "flipped byte", entry: func(g []byte) []byte {
			b := append([]byte(nil), g...)
			b[len(b)-5] ^= 1
			return b
		}, wantReads: 1},
		{name: "old format", entry: func(g []byte) []byte {
			var p index.Parsed
			if err := json.Unmarshal(g[len("CTXPRS1\n")+4:], &p.Result); err != nil {
				t.Fatal(err)
			}
			old, err := json.Marshal(p.Result)
			if err != nil {
				t.Fatal(err)
			}
			return old
		}, reused: true},
		{name: "torn text", text: src[:10], reused: true, wantReads: 1},
		{name: "empty text", text: []byte{}, reused: true, wantReads: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := local.Open(filepath.Join(t.TempDir(), "store"))
			if err != nil {
				t.Fatal(err)
			}
			first, err := index.ParseFile(ctx, store, "t", f, read, chunk.Options{})
			if err != nil || first.Reused {
				t.Fatalf("first parse: reused %v, %v", first.Reused, err)
			}
			good, err := store.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if tc.entry != nil {
				if err := store.Put(ctx, key, tc.entry(good)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.text != nil {
				if err := store.Put(ctx, content, tc.text); err != nil {
					t.Fatal(err)
				}
			}
			reads = 0
			got, err := index.ParseFile(ctx, store, "t", f, read, chunk.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Reused != tc.reused || reads != tc.wantReads {
				t.Fatalf("reused %v after %d reads, want %v after %d", got.Reused, reads, tc.reused, tc.wantReads)
			}
			a, _ := json.Marshal(first.Result)
			b, _ := json.Marshal(got.Result)
			if string(a) != string(b) {
				t.Fatalf("result differs:\n%s\n%s", a, b)
			}
			if text, err := index.ReadContent(ctx, store, f.Blob); err != nil || string(text) != string(src) {
				t.Fatalf("text %q, %v", text, err)
			}
			// The entry is whole again: the next call is a hit without a read.
			reads = 0
			if again, err := index.ParseFile(ctx, store, "t", f, read, chunk.Options{}); err != nil || !again.Reused || reads != 0 {
				t.Fatalf("again: reused %v, %d reads, %v", again.Reused, reads, err)
			}
		})
	}

	t.Run("graph stage", func(t *testing.T) {
		store := blob.NewMem()
		if _, err := index.ParseFile(ctx, store, "t", f, read, chunk.Options{}); err != nil {
			t.Fatal(err)
		}
		if ps, err := index.LoadParsedFiles(ctx, store, "t", []source.File{f}); err != nil || len(ps[0].Result.Chunks) == 0 {
			t.Fatalf("load: %v", err)
		}
		if err := store.Put(ctx, key, []byte("CTXPRS1\n\x00\x00")); err != nil {
			t.Fatal(err)
		}
		if _, err := index.LoadParsedFiles(ctx, store, "t", []source.File{f}); err == nil {
			t.Fatal("a torn entry loaded")
		}
		if _, err := store.Get(ctx, key); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("the torn entry is still there: %v", err)
		}
	})
}
