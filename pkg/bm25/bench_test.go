package bm25

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"codectx/pkg/tokenize"
)

// The benchmark corpus is the Go standard library source of the running
// toolchain (cmd, vendor and testdata skipped), in sorted path order, capped
// at benchFiles files or benchBytes bytes, one document per top-level
// func/type declaration. Both engines index exactly these documents.
const (
	benchFiles = 2000
	benchBytes = 20 << 20
)

type corpus struct {
	docs  []Doc
	toks  [][NumFields][]string // tokenize.Tokens of each field
	bytes int64                 // source bytes read
	err   error
}

var (
	corpusOnce sync.Once
	theCorpus  corpus
)

func loadCorpus(tb testing.TB) *corpus {
	tb.Helper()
	corpusOnce.Do(func() { theCorpus = readCorpus() })
	c := &theCorpus
	if c.err != nil {
		tb.Skipf("no Go source corpus: %v", c.err)
	}
	return c
}

func readCorpus() corpus {
	var c corpus
	root := filepath.Join(runtime.GOROOT(), "src")
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "cmd", "vendor", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		if files >= benchFiles || c.bytes >= benchBytes {
			return filepath.SkipAll
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		files++
		c.bytes += int64(len(src))
		c.docs = append(c.docs, splitDecls(filepath.ToSlash(rel), string(src))...)
		return nil
	})
	if err == nil && len(c.docs) == 0 {
		err = fs.ErrNotExist
	}
	c.err = err
	for _, d := range c.docs {
		var t [NumFields][]string
		for f, s := range d.Fields {
			t[f] = tokenize.Tokens(s)
		}
		c.toks = append(c.toks, t)
	}
	return c
}

// splitDecls cuts a Go file crudely at lines starting with "func " or
// "type "; the comment lines just above a declaration become its doc. The
// text before the first declaration is one more document.
func splitDecls(path, src string) []Doc {
	lines := strings.SplitAfter(src, "\n")
	var out []Doc
	start := 0
	flush := func(end int) {
		if end <= start {
			return
		}
		chunk := lines[start:end]
		i := 0
		var doc strings.Builder
		for i < len(chunk) && strings.HasPrefix(chunk[i], "//") {
			doc.WriteString(strings.TrimPrefix(chunk[i], "//"))
			i++
		}
		var d Doc
		d.Fields[FieldPath] = path
		d.Fields[FieldDoc] = doc.String()
		if i < len(chunk) {
			sig := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(chunk[i]), "{"))
			if strings.HasPrefix(sig, "func ") || strings.HasPrefix(sig, "type ") {
				d.Fields[FieldName] = declName(sig)
				d.Fields[FieldSignature] = sig
				i++
			}
		}
		d.Fields[FieldBody] = strings.Join(chunk[i:], "")
		out = append(out, d)
	}
	for i, l := range lines {
		if strings.HasPrefix(l, "func ") || strings.HasPrefix(l, "type ") {
			// Pull the comment block above into this declaration.
			j := i
			for j > start && strings.HasPrefix(lines[j-1], "//") {
				j--
			}
			flush(j)
			start = j
		}
	}
	flush(len(lines))
	return out
}

// declName returns "Recv.Name" for a method, else the declared name.
func declName(sig string) string {
	s := strings.TrimPrefix(strings.TrimPrefix(sig, "func "), "type ")
	recv := ""
	if strings.HasPrefix(s, "(") {
		end := strings.IndexByte(s, ')')
		if end < 0 {
			return ""
		}
		f := strings.Fields(strings.Trim(s[1:end], " *"))
		if len(f) > 0 {
			recv = strings.TrimLeft(f[len(f)-1], "*") + "."
		}
		s = strings.TrimSpace(s[end+1:])
	}
	end := strings.IndexAny(s, "([ ")
	if end < 0 {
		end = len(s)
	}
	return recv + s[:end]
}

var benchQueries = []string{
	"parse http request header",
	"ReadFile",
	"mutex lock unlock",
	"json unmarshal struct",
	"open file for writing",
	"base64 encode",
	"sort slice",
	"tls handshake",
	"gzip reader",
	"context cancel timeout",
	"buffered writer flush",
	"utf8 decode rune",
	"regexp compile",
	"goroutine stack trace",
	"hash map lookup",
	"parse go source ast",
	"read directory entries",
	"format float string",
	"atomic compare and swap",
	"syntax error position",
}

func queryTerms() [][]string {
	out := make([][]string, len(benchQueries))
	for i, q := range benchQueries {
		out[i] = tokenize.QueryTokens(q)
	}
	return out
}

func buildOurs(c *corpus) *Index {
	b := NewBuilder()
	for _, d := range c.docs {
		b.Add(d)
	}
	return b.Build()
}

var (
	oursOnce sync.Once
	oursIx   *Index
)

func ourIndex(c *corpus) *Index {
	oursOnce.Do(func() { oursIx = buildOurs(c) })
	return oursIx
}

// BenchmarkBuild measures tokenizing and indexing the corpus; MB/s is over
// source bytes.
func BenchmarkBuild(b *testing.B) {
	c := loadCorpus(b)
	b.SetBytes(c.bytes)
	b.ReportAllocs()
	var ix *Index
	for b.Loop() {
		ix = buildOurs(c)
	}
	data, err := ix.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(c.docs)), "docs")
	b.ReportMetric(float64(len(data)), "segment-bytes")
	b.ReportMetric(float64(len(data))/float64(c.bytes), "segment/source")
}

// BenchmarkTokenize measures tokenize.Tokens alone over the corpus fields.
func BenchmarkTokenize(b *testing.B) {
	c := loadCorpus(b)
	b.SetBytes(c.bytes)
	for b.Loop() {
		for _, d := range c.docs {
			for _, s := range d.Fields {
				tokenize.Tokens(s)
			}
		}
	}
}

// BenchmarkSearch runs the query list once per op; ns/query is per query.
func BenchmarkSearch(b *testing.B) {
	c := loadCorpus(b)
	ix := ourIndex(c)
	qs := queryTerms()
	p := DefaultParams()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, q := range qs {
			ix.Search(q, 10, p)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(qs)), "ns/query")
}

// BenchmarkLoad measures decoding a marshalled segment.
func BenchmarkLoad(b *testing.B) {
	c := loadCorpus(b)
	data, err := ourIndex(c).MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Load(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearchParts is BenchmarkSearch over the corpus cut into parts
// searched where they lie (Multi over in-place parts), as a query server
// searches a repository's shards; parts=1 is the one index.
func BenchmarkSearchParts(b *testing.B) {
	c := loadCorpus(b)
	qs := queryTerms()
	p := DefaultParams()
	for _, n := range []int{1, 8, 30} {
		b.Run(fmt.Sprintf("parts=%d", n), func(b *testing.B) {
			var parts []*Index
			for i := range n {
				bl := NewBuilder()
				for _, d := range c.docs[i*len(c.docs)/n : (i+1)*len(c.docs)/n] {
					bl.Add(d)
				}
				data, err := bl.Build().AppendRaw(nil)
				if err != nil {
					b.Fatal(err)
				}
				ix, err := LoadRaw(data)
				if err != nil {
					b.Fatal(err)
				}
				parts = append(parts, ix)
			}
			ix := Multi(parts)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				for _, q := range qs {
					ix.Search(q, 10, p)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(qs)), "ns/query")
		})
	}
}

// BenchmarkLoadRaw measures opening the in-place layout (checks, no
// decode) beside BenchmarkLoad's decode.
func BenchmarkLoadRaw(b *testing.B) {
	c := loadCorpus(b)
	data, err := ourIndex(c).AppendRaw(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := LoadRaw(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSplice measures what the graph stage does to a shard's index in
// a one-file change: the documents before and after the changed one
// sliced out of the corpus index and joined with an index of its new
// version.
func BenchmarkSplice(b *testing.B) {
	c := loadCorpus(b)
	ix := ourIndex(c)
	mid := len(c.docs) / 2
	nb := NewBuilder()
	nb.Add(c.docs[mid])
	changed := nb.Build()
	b.ReportAllocs()
	for b.Loop() {
		lo, err := Slice(ix, 0, mid)
		if err != nil {
			b.Fatal(err)
		}
		hi, err := Slice(ix, mid+1, ix.NumDocs())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Concat([]*Index{lo, changed, hi}); err != nil {
			b.Fatal(err)
		}
	}
}
