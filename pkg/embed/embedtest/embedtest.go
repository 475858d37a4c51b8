// Package embedtest holds what every embed driver is tested with: the
// conformance suite Run, and Server, an in-test OpenAI-compatible
// embeddings server whose vectors are real (HashEmbed) so end-to-end tests
// of the dense arm can check rankings, not just plumbing.
package embedtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"codectx/pkg/embed"
)

// Texts used by the suite: code-like chunks of varied length.
var sample = []string{
	"func parseConfig(path string) (*Config, error) { data, err := os.ReadFile(path); return decodeJSON(data) }",
	"// Render draws the triangle mesh with the OpenGL shader program.\nfunc (r *Renderer) Render(m *Mesh) { gl.UseProgram(r.prog) }",
	"def fetch_user(session, user_id):\n    \"\"\"Load one user row from the database by id.\"\"\"\n    return session.query(User).get(user_id)",
	"SELECT id, name FROM accounts WHERE balance > 100 ORDER BY name",
	"class LRUCache { constructor(cap) { this.cap = cap; this.map = new Map(); } get(k) { return this.map.get(k) } }",
	"x",
	"naïve café — 日本語のテキスト, emoji 🎉, and a ZWJ 👩‍💻 sequence",
	"#include <stdio.h>\nint main(void) { printf(\"hello, world\\n\"); return 0; }",
	"impl Iterator for Counter { type Item = u32; fn next(&mut self) -> Option<u32> { self.n += 1; Some(self.n) } }",
	"README: install with make model, then run codectx up --embedder onnx:.cache/models/bge-small-en-v1.5",
}

// Run checks that e behaves as embed.Embedder says: dimensions, order,
// batching consistency, empty input, long and non-ASCII input, query kind,
// cancellation and concurrent use. Vectors are compared by cosine, with a
// small tolerance, since batched and single runs of a model may differ in
// the last bits.
func Run(t *testing.T, e embed.Embedder) {
	t.Helper()
	ctx := context.Background()
	if e.Dim() <= 0 {
		t.Fatalf("Dim() = %d, want > 0", e.Dim())
	}
	if e.Model() == "" {
		t.Fatal("Model() is empty")
	}
	// singles[i] is sample[i] embedded alone: the reference for the rest.
	singles := make([][]float32, len(sample))
	for i, s := range sample {
		v, err := e.Embed(ctx, []string{s}, embed.Passage)
		if err != nil {
			t.Fatalf("Embed(%q): %v", s, err)
		}
		if len(v) != 1 {
			t.Fatalf("Embed of one text returned %d vectors", len(v))
		}
		checkVec(t, fmt.Sprintf("sample[%d]", i), v[0], e.Dim())
		singles[i] = v[0]
	}

	t.Run("Empty", func(t *testing.T) {
		for _, in := range [][]string{nil, {}} {
			v, err := e.Embed(ctx, in, embed.Passage)
			if err != nil {
				t.Fatalf("Embed(%v): %v", in, err)
			}
			if len(v) != 0 {
				t.Fatalf("Embed(%v) returned %d vectors", in, len(v))
			}
		}
		v, err := e.Embed(ctx, []string{""}, embed.Passage)
		if err != nil {
			t.Fatalf("Embed of an empty string: %v", err)
		}
		if len(v) != 1 || len(v[0]) != e.Dim() {
			t.Fatalf("Embed of an empty string returned %d vectors", len(v))
		}
	})

	t.Run("OrderAndBatch", func(t *testing.T) {
		v, err := e.Embed(ctx, sample, embed.Passage)
		if err != nil {
			t.Fatal(err)
		}
		if len(v) != len(sample) {
			t.Fatalf("got %d vectors for %d texts", len(v), len(sample))
		}
		for i := range v {
			checkVec(t, fmt.Sprintf("batch[%d]", i), v[i], e.Dim())
			if c := Cosine(v[i], singles[i]); c < 0.99 {
				t.Errorf("batch[%d] vs alone: cosine %.4f, want >= 0.99", i, c)
			}
			for j := range singles {
				if j != i && Cosine(v[i], singles[j]) >= Cosine(v[i], singles[i]) {
					t.Errorf("batch[%d] is as close to sample[%d] as to its own text: order lost", i, j)
				}
			}
		}
	})

	t.Run("ManyTexts", func(t *testing.T) {
		// More texts than any driver's default batch, each distinct.
		var in []string
		for i := range 150 {
			in = append(in, fmt.Sprintf("%s // variant %d", sample[i%len(sample)], i))
		}
		in[77] = sample[2]
		v, err := e.Embed(ctx, in, embed.Passage)
		if err != nil {
			t.Fatal(err)
		}
		if len(v) != len(in) {
			t.Fatalf("got %d vectors for %d texts", len(v), len(in))
		}
		for i := range v {
			checkVec(t, fmt.Sprintf("many[%d]", i), v[i], e.Dim())
		}
		if c := Cosine(v[77], singles[2]); c < 0.99 {
			t.Errorf("text 77 of 150 vs alone: cosine %.4f", c)
		}
		if c := Cosine(v[0], v[10]); c > 0.99999 && in[0] != in[10] {
			t.Errorf("different texts 0 and 10 got the same vector")
		}
	})

	t.Run("Deterministic", func(t *testing.T) {
		v, err := e.Embed(ctx, sample[:3], embed.Passage)
		if err != nil {
			t.Fatal(err)
		}
		w, err := e.Embed(ctx, sample[:3], embed.Passage)
		if err != nil {
			t.Fatal(err)
		}
		for i := range v {
			if c := Cosine(v[i], w[i]); c < 0.9999 {
				t.Errorf("text %d embedded twice: cosine %.5f", i, c)
			}
		}
	})

	t.Run("Similarity", func(t *testing.T) {
		// Texts sharing meaning and words must be closer than unrelated ones.
		v, err := e.Embed(ctx, []string{
			"parse the JSON config file",
			"render the triangle mesh with shaders",
		}, embed.Query)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range [][2]int{{0, 1}, {1, 0}} {
			q, rel, unrel := v[i], singles[p[0]], singles[p[1]]
			if Cosine(q, rel) <= Cosine(q, unrel) {
				t.Errorf("query %d: cosine to its passage %.3f <= to the unrelated one %.3f",
					i, Cosine(q, rel), Cosine(q, unrel))
			}
		}
	})

	t.Run("Long", func(t *testing.T) {
		long := strings.Repeat("func longFunctionName(argument int) error { return nil }\n", 800)
		v, err := e.Embed(ctx, []string{long, sample[0]}, embed.Passage)
		if err != nil {
			t.Fatalf("Embed of a %d-byte text: %v", len(long), err)
		}
		checkVec(t, "long", v[0], e.Dim())
		if c := Cosine(v[1], singles[0]); c < 0.99 {
			t.Errorf("short text batched with a long one: cosine %.4f to alone", c)
		}
	})

	t.Run("QueryKind", func(t *testing.T) {
		v, err := e.Embed(ctx, []string{"how is the config file parsed"}, embed.Query)
		if err != nil {
			t.Fatal(err)
		}
		checkVec(t, "query", v[0], e.Dim())
	})

	t.Run("Canceled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := e.Embed(cctx, sample, embed.Passage)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Embed with a canceled context: err = %v, want context.Canceled", err)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				for k := range 3 {
					i := (g + k) % len(sample)
					j := (i + 3) % len(sample)
					v, err := e.Embed(ctx, []string{sample[i], sample[j]}, embed.Passage)
					if err != nil {
						errs <- err
						return
					}
					if Cosine(v[0], singles[i]) < 0.99 || Cosine(v[1], singles[j]) < 0.99 {
						errs <- fmt.Errorf("goroutine %d: texts %d,%d got other vectors under concurrency", g, i, j)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func checkVec(t *testing.T, name string, v []float32, dim int) {
	t.Helper()
	if len(v) != dim {
		t.Fatalf("%s: len %d, want Dim() = %d", name, len(v), dim)
	}
	var n float64
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("%s: non-finite value %v", name, x)
		}
		n += float64(x) * float64(x)
	}
	if n == 0 {
		t.Fatalf("%s: zero vector", name)
	}
}

// Cosine is the cosine similarity of a and b (0 if either is zero).
func Cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}
