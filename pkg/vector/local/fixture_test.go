package local_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"codectx/pkg/chunk"
	"codectx/pkg/codectx"
	"codectx/pkg/dense"
	"codectx/pkg/embed"
	"codectx/pkg/embed/embedders"
)

// realFixture holds vectors of the default model (bge-small-en-v1.5-q,
// passages cut at 256 tokens) for chunks of this repository's own code and
// docs, and query vectors for the first sentence of its doc comments:
// real model vectors, with none of the text. CODECTX_WRITE_VECTORS=1
// regenerates it (scripts/vector-fixture.sh).
const realFixture = "testdata/bge-small-codectx.f16"

// maxFixtureChunks bounds the fixture (and the time to embed it).
const maxFixtureChunks = 4000

// fixture is a set of real vectors: passages and queries.
type fixture struct {
	dim      int
	passages [][]float32
	queries  [][]float32
}

// The fixture format: magic "CVF1", dim, passages, queries (uint32 LE),
// then every vector as little-endian IEEE half floats.
func (f *fixture) encode() []byte {
	var b bytes.Buffer
	b.WriteString("CVF1")
	for _, n := range []int{f.dim, len(f.passages), len(f.queries)} {
		binary.Write(&b, binary.LittleEndian, uint32(n))
	}
	for _, v := range append(append([][]float32{}, f.passages...), f.queries...) {
		for _, x := range v {
			binary.Write(&b, binary.LittleEndian, toHalf(x))
		}
	}
	return b.Bytes()
}

func decodeFixture(data []byte) (*fixture, error) {
	if len(data) < 16 || string(data[:4]) != "CVF1" {
		return nil, errors.New("not a vector fixture")
	}
	dim := int(binary.LittleEndian.Uint32(data[4:]))
	np := int(binary.LittleEndian.Uint32(data[8:]))
	nq := int(binary.LittleEndian.Uint32(data[12:]))
	raw := data[16:]
	if len(raw) != 2*dim*(np+nq) {
		return nil, fmt.Errorf("vector fixture: %d bytes, want %d", len(raw), 2*dim*(np+nq))
	}
	f := &fixture{dim: dim}
	for i := range np + nq {
		v := make([]float32, dim)
		for j := range v {
			v[j] = fromHalf(binary.LittleEndian.Uint16(raw[2*(i*dim+j):]))
		}
		if i < np {
			f.passages = append(f.passages, v)
		} else {
			f.queries = append(f.queries, v)
		}
	}
	return f, nil
}

// toHalf rounds x to the nearest IEEE 754 half float (normal range; the
// components of a unit vector never overflow it, tiny ones flush to zero).
func toHalf(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	man := b & 0x7fffff
	switch {
	case exp <= 0:
		return sign
	case exp >= 31:
		return sign | 0x7c00
	}
	h := uint32(exp)<<10 | man>>13
	if man&0x1fff > 0x1000 || (man&0x1fff == 0x1000 && h&1 == 1) {
		h++ // round to nearest even; a carry into the exponent is right
	}
	return sign | uint16(h)
}

func fromHalf(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	if exp == 0 {
		return math.Float32frombits(sign) // zero (subnormals are never written)
	}
	return math.Float32frombits(sign | (exp-15+127)<<23 | man<<13)
}

func loadFixture(t testing.TB) *fixture {
	t.Helper()
	data, err := os.ReadFile(realFixture)
	if err != nil {
		t.Fatalf("%v (scripts/vector-fixture.sh writes it)", err)
	}
	f, err := decodeFixture(data)
	if err != nil {
		t.Fatal(err)
	}
	if raceQueries > 0 && len(f.queries) > raceQueries {
		f.queries = f.queries[:raceQueries]
	}
	return f
}

func TestHalf(t *testing.T) {
	for _, x := range []float32{0, 1, -1, 0.5, 0.0123, -0.3333, 0.07} {
		if got := fromHalf(toHalf(x)); math.Abs(float64(got-x)) > math.Abs(float64(x))/1000 {
			t.Errorf("half(%v) = %v", x, got)
		}
	}
}

// TestWriteFixture regenerates the real-vector fixture from this
// repository's tracked files with the default model, when
// CODECTX_WRITE_VECTORS=1 (about 10 minutes of both cores).
func TestWriteFixture(t *testing.T) {
	if os.Getenv("CODECTX_WRITE_VECTORS") != "1" {
		t.Skip("CODECTX_WRITE_VECTORS=1 regenerates " + realFixture)
	}
	ctx := context.Background()
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatal(err)
	}
	repo := strings.TrimSpace(string(root))
	// CODECTX_VECTOR_SOURCE embeds another git work tree instead, into
	// CODECTX_VECTOR_OUT, up to CODECTX_VECTOR_MAX chunks: a measurement
	// on a bigger real repository whose vectors are not committed.
	dir, out, limit := repo, realFixture, maxFixtureChunks
	if src := os.Getenv("CODECTX_VECTOR_SOURCE"); src != "" {
		dir, out = src, os.Getenv("CODECTX_VECTOR_OUT")
		if out == "" {
			t.Fatal("CODECTX_VECTOR_SOURCE needs CODECTX_VECTOR_OUT")
		}
		if n, err := strconv.Atoi(os.Getenv("CODECTX_VECTOR_MAX")); err == nil {
			limit = n
		}
	}
	var paths []string
	if dir == repo {
		files, err := exec.Command("git", "-C", dir, "ls-files", "*.go", "*.md", "*.py", "*.sh").Output()
		if err != nil {
			t.Fatal(err)
		}
		paths = strings.Fields(string(files))
	} else {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && chunk.Detect(p, nil) != codectx.Text && !strings.HasSuffix(p, "_test.go") {
				rel, _ := filepath.Rel(dir, p)
				paths = append(paths, rel)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var texts, queries []string
	seenQ := map[string]bool{}
	for _, p := range paths {
		content, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range chunk.Parse(ctx, p, content, chunk.Options{}).Chunks {
			texts = append(texts, dense.Text(c))
			if q, _, _ := strings.Cut(c.Doc, ". "); len(q) > 20 && !seenQ[q] {
				seenQ[q] = true
				queries = append(queries, strings.TrimSpace(q))
			}
		}
	}
	// Every k-th chunk and query, so that the sample spans the repository.
	sample := func(s []string, n int) []string {
		if len(s) <= n {
			return s
		}
		var out []string
		for i := range n {
			out = append(out, s[i*len(s)/n])
		}
		return out
	}
	texts, queries = sample(texts, limit), sample(queries, 300)
	spec := os.Getenv("CODECTX_EMBEDDER")
	if spec == "" {
		spec = "onnx:" + filepath.Join(repo, ".cache/models/bge-small-en-v1.5-q") + "?max_tokens=256&threads=1"
	}
	e, err := embedders.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer embed.Close(e)
	f := &fixture{dim: e.Dim()}
	embedAll := func(s []string, kind embed.Kind) [][]float32 {
		var out [][]float32
		for lo := 0; lo < len(s); lo += 32 {
			v, err := e.Embed(ctx, s[lo:min(lo+32, len(s))], kind)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, v...)
			if lo%640 == 0 {
				t.Logf("%d/%d", lo, len(s))
			}
		}
		return out
	}
	f.queries = embedAll(queries, embed.Query)
	f.passages = embedAll(texts, embed.Passage)
	if err := os.WriteFile(out, f.encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d passages, %d queries of %d dimensions", len(f.passages), len(f.queries), f.dim)
}
