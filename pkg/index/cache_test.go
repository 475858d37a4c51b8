package index_test

import (
	"context"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/crc32"
	"path/filepath"
	"strconv"
	"strings"
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

// oldEntry re-encodes a parse result in one of the older forms of the
// parse cache: CTXPRS1 (a checksum and JSON) or, with plain, bare JSON.
// Their file's text is kept apart, at ContentKey.
func oldEntry(t *testing.T, res chunk.Result, plain bool) []byte {
	t.Helper()
	js, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if plain {
		return js
	}
	b := []byte("CTXPRS1\n\x00\x00\x00\x00")
	binary.BigEndian.PutUint32(b[8:], crc32.Checksum(js, crc32.MakeTable(crc32.Castagnoli)))
	return append(b, js...)
}

// TestTornCacheEntry: parse-cache entries are written without an fsync
// each, so a crash of the machine can tear them. An entry carries its
// file's text (one object per parsed file); a torn entry is a miss (parsed
// again and rewritten) and its text is not served. Entries of the older
// forms (CTXPRS1, plain JSON), whose text is kept at ContentKey, are still
// hits and their texts still served; a torn or lost text of one is written
// again on the next hit. The graph stage's read of a torn entry fails and
// deletes it so that the next plan parses the file again.
func TestTornCacheEntry(t *testing.T) {
	ctx := context.Background()
	src := []byte("package a\n\n// F does f.\nfunc F() int { return G() }\n\nfunc G() int { return 1 }\n")
	f := source.File{Path: "a/a.go", Blob: gitBlob(src), Size: int64(len(src))}
	key := index.ParseKey("t", f.Path, f.Blob)
	content := index.ContentKey(f.Blob)
	reads := 0
	read := func() ([]byte, error) { reads++; return src, nil }

	flip := func(i int) func(g []byte) []byte {
		return func(g []byte) []byte {
			b := append([]byte(nil), g...)
			b[(i+len(b))%len(b)] ^= 1
			return b
		}
	}
	for _, tc := range []struct {
		name      string
		entry     func(good []byte) []byte // nil: leave the entry as written
		text      []byte                   // nil: leave ContentKey as it is
		reused    bool
		wantReads int
	}{
		{name: "intact", reused: true},
		{name: "truncated entry", entry: func(g []byte) []byte { return g[:len(g)/2] }, wantReads: 1},
		{name: "truncated by one", entry: func(g []byte) []byte { return g[:len(g)-1] }, wantReads: 1},
		{name: "empty entry", entry: func([]byte) []byte { return []byte{} }, wantReads: 1},
		{name: "zeroed entry", entry: func(g []byte) []byte { return make([]byte, len(g)) }, wantReads: 1},
		{name: "flipped byte in the results", entry: flip(-5), wantReads: 1},
		{name: "flipped byte in the text", entry: flip(20), wantReads: 1},
		{name: "flipped checksum", entry: flip(9), wantReads: 1},
		{name: "magic only", entry: func([]byte) []byte { return []byte("CTXPRS2\n") }, wantReads: 1},
		{name: "old format", entry: func([]byte) []byte { return nil }, text: src, reused: true},
		{name: "old format, plain JSON", entry: func([]byte) []byte { return nil }, text: src, reused: true},
		{name: "old format, torn text", entry: func([]byte) []byte { return nil }, text: src[:10], reused: true, wantReads: 1},
		{name: "old format, empty text", entry: func([]byte) []byte { return nil }, text: []byte{}, reused: true, wantReads: 1},
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
			if ok, err := store.Exists(ctx, content); err != nil || ok {
				t.Fatalf("a text was written beside the entry: %v %v", ok, err)
			}
			good, err := store.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(good), "CTXPRS2\n") {
				t.Fatalf("entry starts %q", good[:8])
			}
			if tc.entry != nil {
				e := tc.entry(good)
				if e == nil { // an older form
					e = oldEntry(t, first.Result, strings.Contains(tc.name, "plain"))
				}
				if err := store.Put(ctx, key, e); err != nil {
					t.Fatal(err)
				}
				if e2, _ := store.Get(ctx, key); !tc.reused && !strings.HasPrefix(tc.name, "old") {
					// A torn entry's text is not served.
					if text, err := index.ReadContent(ctx, store, "t", f.Path, f.Blob); err == nil {
						t.Fatalf("text %q served from a torn entry %q", text, e2)
					}
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
			if text, err := index.ReadContent(ctx, store, "t", f.Path, f.Blob); err != nil || string(text) != string(src) {
				t.Fatalf("text %q, %v", text, err)
			}
			// Another tenant's entry is not this one's.
			if text, err := index.ReadContent(ctx, store, "u", f.Path, f.Blob); err == nil && !strings.HasPrefix(tc.name, "old") {
				t.Fatalf("tenant u read %q", text)
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

// A parse result depends on the file's path, not only its content: the
// same text as lib/app.min.js (skipped, generated) and as lib/app.js (a
// source file), or as src/a.rs and src/b.rs (modules a and b). Keyed by
// content alone, the first path's result was served for the second.
func TestParseCacheKeysPath(t *testing.T) {
	ctx := context.Background()
	store := blob.NewMem()
	parse := func(path string, src []byte) index.Parsed {
		t.Helper()
		f := source.File{Path: path, Blob: gitBlob(src), Size: int64(len(src))}
		p, err := index.ParseFile(ctx, store, "t", f, func() ([]byte, error) { return src, nil }, chunk.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	js := []byte("export function add(a, b) {\n  return a + b\n}\n")
	if p := parse("lib/app.min.js", js); p.Result.Skip != codectx.SkipGenerated {
		t.Fatalf("lib/app.min.js: skip %q, want %q", p.Result.Skip, codectx.SkipGenerated)
	}
	if p := parse("lib/app.js", js); p.Result.Skip != "" || len(p.Result.Chunks) == 0 {
		t.Errorf("lib/app.js after an identical lib/app.min.js: skip %q, %d chunks; want it parsed", p.Result.Skip, len(p.Result.Chunks))
	}
	rs := []byte("pub fn run() -> u32 {\n    1\n}\n")
	a, b := parse("src/a.rs", rs), parse("src/b.rs", rs)
	if a.Result.Package != "crate::a" || b.Result.Package != "crate::b" {
		t.Errorf("src/a.rs and src/b.rs, the same text: modules %q and %q, want crate::a and crate::b", a.Result.Package, b.Result.Package)
	}
}
