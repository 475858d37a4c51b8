package index

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"
	"weak"

	"codectx/pkg/chunk"
)

// entryCorpus is files of several languages and shapes: a body that is not
// the text's range (invalid UTF-8 is repaired before parsing), windows,
// empty lists, a skipped file.
func entryCorpus(t *testing.T) map[string][]byte {
	files := map[string][]byte{
		"a.go":        []byte("package a\n\nimport (\n\t\"fmt\"\n\tx \"os\"\n)\n\n// F does f.\nfunc F() { fmt.Println(x.Args) }\n\ntype T struct{ A []int }\n"),
		"bad.go":      []byte("package a\n\n// \xff\xfe bad bytes\nfunc F() string { return \"\xc3\" }\n"),
		"crlf.go":     []byte("package a\r\n\r\nfunc F() {}\r\n"),
		"syntax.go":   []byte("package a\n\nfunc F( {\n"),
		"m.py":        []byte("import os\n\nclass A:\n    \"\"\"Doc.\"\"\"\n    def f(self):\n        return os.getcwd()\n"),
		"r.rs":        []byte("use std::io;\n/// Doc\npub fn f() -> io::Result<()> { Ok(()) }\n"),
		"README.md":   []byte("# Title\n\nSome text.\n\n## Two\n\nMore.\n"),
		"notes.txt":   []byte(strings.Repeat("a line of text\n", 300)),
		"empty.go":    nil,
		"bin.dat":     []byte("\x00\x01\x02binary\x00"),
		"unicode.go":  []byte("package a\n\n// Ünïcode\nfunc Größe() {}\n"),
		"types.ts":    []byte("export interface A { b: string }\nexport function f(a: A): string { return a.b }\n"),
		"Main.java":   []byte("package p;\nimport java.util.List;\nclass Main { void f(List<String> a) { a.size(); } }\n"),
		"script.js":   []byte("function f() { return g(); }\n"),
		"windows.cfg": []byte(strings.Repeat("k = v\n", 2000)),
	}
	// And real files: every 20th Go file of GOROOT's go/ packages.
	root := filepath.Join(runtime.GOROOT(), "src", "go")
	n := 0
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		if n++; n%20 == 0 {
			if data, err := os.ReadFile(p); err == nil {
				files[p] = data
			}
		}
		return nil
	})
	return files
}

// TestEntryRoundTrip: a CTXPRS2 entry decodes to the result encoded
// (reflect.DeepEqual: nil and empty lists kept apart, bodies outside the
// text kept) and carries the text, or none.
func TestEntryRoundTrip(t *testing.T) {
	literal := 0
	for path, src := range entryCorpus(t) {
		res := chunk.Parse(context.Background(), path, src, chunk.Options{})
		for _, text := range [][]byte{src, nil} {
			data := encodeParsed(res, text)
			var got chunk.Result
			if err := decodeParsed(data, &got); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if !reflect.DeepEqual(got, res) {
				t.Fatalf("%s (text %v): decoded\n%+v\nwant\n%+v", path, text != nil, got, res)
			}
			gotText, ok := entryText(data)
			if ok != (text != nil) || string(gotText) != string(text) {
				t.Fatalf("%s: text %q %v, want %q", path, gotText, ok, text)
			}
			if hasText(data) != (text != nil) {
				t.Fatalf("%s: hasText %v", path, hasText(data))
			}
			if text != nil {
				for i := range res.Chunks {
					if !bodyInText(&res.Chunks[i], text) {
						literal++
					}
				}
			}
		}
	}
	if literal == 0 {
		t.Fatal("no body outside the text: the literal form is untested")
	}
}

// TestEntryTorn: every truncation and every flipped bit of an entry is a
// torn entry (an error, never a panic, no text served).
func TestEntryTorn(t *testing.T) {
	src := entryCorpus(t)["bad.go"]
	res := chunk.Parse(context.Background(), "bad.go", src, chunk.Options{})
	data := encodeParsed(res, src)
	for n := range len(data) {
		var got chunk.Result
		if err := decodeParsed(data[:n], &got); !errors.Is(err, errTorn) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
		if _, ok := entryText(data[:n]); ok {
			t.Fatalf("truncated to %d: text served", n)
		}
	}
	for i := range len(data) * 8 {
		b := append([]byte(nil), data...)
		b[i/8] ^= 1 << (i % 8)
		var got chunk.Result
		err := decodeParsed(b, &got)
		if i/8 < len(parsedMagic2) {
			// Not this form's magic any more: an older form's check fails.
			if err == nil {
				t.Fatalf("bit %d: decoded", i)
			}
			continue
		}
		if !errors.Is(err, errTorn) {
			t.Fatalf("bit %d: %v", i, err)
		}
		if _, ok := entryText(b); ok {
			t.Fatalf("bit %d: text served", i)
		}
	}
}

// withCRC makes body a CTXPRS2 entry whose checksum checks.
func withCRC(body []byte) []byte {
	b := append([]byte(parsedMagic2), 0, 0, 0, 0)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[len(parsedMagic2):], crc32.Checksum(body, castagnoli))
	return b
}

// FuzzDecodeEntry: a checksummed entry of any content decodes or is torn,
// without a panic, and what decodes encodes back to an entry that decodes
// the same.
func FuzzDecodeEntry(f *testing.F) {
	res := chunk.Parse(context.Background(), "a.go", []byte("package a\n\nfunc F() { g() }\n"), chunk.Options{})
	good := encodeParsed(res, []byte("package a\n\nfunc F() { g() }\n"))
	f.Add(good[len(parsedMagic2)+4:])
	f.Add(encodeParsed(res, nil)[len(parsedMagic2)+4:])
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 200, 1})
	f.Fuzz(func(t *testing.T, body []byte) {
		data := withCRC(body)
		var got chunk.Result
		if err := decodeParsed(data, &got); err != nil {
			if !errors.Is(err, errTorn) {
				t.Fatal(err)
			}
			return
		}
		var text []byte
		if tx, ok := entryText(data); ok {
			text = tx
		}
		var again chunk.Result
		if err := decodeParsed(encodeParsed(got, text), &again); err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("re-encoded: %v\n%+v\n%+v", err, again, got)
		}
	})
}

// TestEntryFieldsKeepNoText: a decoded entry's bodies are parts of one copy
// of the file's text and its other strings (names, calls, types, hashes)
// are not, so what keeps those past the chunks (the graph's memo, a
// shard's inputs in `up`) does not keep every file's text alive: once the
// bodies are gone the text is collected while the names are still held.
func TestEntryFieldsKeepNoText(t *testing.T) {
	var src []byte
	var path string
	for p, b := range entryCorpus(t) {
		if strings.HasSuffix(p, ".go") && len(b) > 8<<10 {
			path, src = p, b
			break
		}
	}
	if src == nil {
		t.Skip("no Go file over 8 KB in the corpus")
	}
	res := chunk.Parse(context.Background(), path, src, chunk.Options{})
	data := encodeParsed(res, src)
	names, text := decodeNames(t, data, src)
	if len(names) == 0 || text == (weak.Pointer[byte]{}) {
		t.Fatal("no names or no body in the text decoded")
	}
	for range 3 {
		runtime.GC()
	}
	if text.Value() != nil {
		t.Fatalf("%s: the file's text is still alive while only %d names are held", path, len(names))
	}
	runtime.KeepAlive(names)
}

// decodeNames decodes data and returns the chunks' names, calls and types
// and a weak pointer to the text its bodies are parts of (src's range).
func decodeNames(t *testing.T, data, src []byte) ([]string, weak.Pointer[byte]) {
	var got chunk.Result
	if err := decodeParsed(data, &got); err != nil {
		t.Fatal(err)
	}
	var names []string
	var text weak.Pointer[byte]
	for _, c := range got.Chunks {
		names = append(names, c.Name, c.Signature, c.Hash)
		names = append(names, c.Calls...)
		names = append(names, c.Types...)
		if c.Body != "" && bodyInText(&c, src) {
			text = weak.Make(unsafe.StringData(c.Body))
		}
	}
	return names, text
}
