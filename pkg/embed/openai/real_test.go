package openai

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"codectx/pkg/embed"
	"codectx/pkg/embed/embedtest"
	"codectx/pkg/embed/onnx"
)

// TestRealModelOverHTTP puts the local ONNX model behind the in-test
// server and checks that the HTTP driver, with the model's query prefix,
// gives the vectors the onnx driver gives directly, for passages and
// queries, and passes the conformance suite.
func TestRealModelOverHTTP(t *testing.T) {
	dir, _ := filepath.Abs("../../../.cache/models/bge-small-en-v1.5-q")
	if _, err := os.Stat(filepath.Join(dir, "model.onnx")); err != nil {
		t.Skip("model not fetched: run `make model`")
	}
	if _, ok := onnx.FindLibrary(dir); !ok {
		t.Skip("no ONNX Runtime library: run `make model`")
	}
	local, err := onnx.Open(dir, onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	s := embedtest.NewServerFor(local)
	defer s.Close()
	cfg := local.Config()
	e := newEmbedder(t, Options{URL: s.URL, Model: local.Model(), QueryPrefix: cfg.QueryPrefix, PassagePrefix: cfg.PassagePrefix, MaxBatch: 8})
	if e.Dim() != local.Dim() {
		t.Fatalf("Dim %d over HTTP, %d locally", e.Dim(), local.Dim())
	}
	ctx := context.Background()
	texts := []string{"func Retry(ctx context.Context) error", "where is the retry backoff computed"}
	for _, kind := range []embed.Kind{embed.Passage, embed.Query} {
		want, err := local.Embed(ctx, texts, kind)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Embed(ctx, texts, kind)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if c := embedtest.Cosine(got[i], want[i]); c < 0.9999 {
				t.Errorf("kind %d text %d: cosine %.5f between HTTP and local", kind, i, c)
			}
		}
	}
	embedtest.Run(t, e)
}
