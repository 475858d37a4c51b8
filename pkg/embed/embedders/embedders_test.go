package embedders

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"codectx/pkg/embed"
	"codectx/pkg/embed/embedtest"
	"codectx/pkg/embed/onnx"
	"codectx/pkg/embed/openai"
)

func TestOpenOpenAI(t *testing.T) {
	s := embedtest.NewServer(32, "m1")
	defer s.Close()
	e, err := Open(context.Background(), "openai:"+s.URL+"?batch=2&concurrency=1&query_prefix=q:+#m1")
	if err != nil {
		t.Fatal(err)
	}
	defer embed.Close(e)
	if e.Dim() != 32 || e.Model() != "m1" {
		t.Fatalf("Dim %d Model %q", e.Dim(), e.Model())
	}
	v, err := e.Embed(context.Background(), []string{"a", "b", "c"}, embed.Query)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.MaxBatch != 2 {
		t.Errorf("batch option not applied: max batch %d", st.MaxBatch)
	}
	if c := embedtest.Cosine(v[0], embedtest.HashEmbed("q: a", 32)); c < 0.9999 {
		t.Errorf("query_prefix not applied (cosine %.4f)", c)
	}
	if _, ok := e.(*openai.Embedder); !ok {
		t.Errorf("type %T", e)
	}
}

// TestOpenOpenAIOptionsAfterModel: options written after the model
// (openai:URL#MODEL?batch=2, as onnx:DIR?threads=2 writes them) are
// options, not part of the model's name.
func TestOpenOpenAIOptionsAfterModel(t *testing.T) {
	s := embedtest.NewServer(32, "m1")
	defer s.Close()
	e, err := Open(context.Background(), "openai:"+s.URL+"#m1?batch=2&concurrency=1")
	if err != nil {
		t.Fatal(err)
	}
	defer embed.Close(e)
	if e.Model() != "m1" {
		t.Fatalf("Model %q, want m1", e.Model())
	}
	if _, err := e.Embed(context.Background(), []string{"a", "b", "c"}, embed.Passage); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.MaxBatch != 2 {
		t.Errorf("batch option after the model not applied: max batch %d", st.MaxBatch)
	}
}

func TestFromEnv(t *testing.T) {
	s := embedtest.NewServer(16, "m2")
	defer s.Close()
	t.Setenv(Env, "")
	if e, err := FromEnv(context.Background()); e != nil || err != nil {
		t.Fatalf("unset: %v %v", e, err)
	}
	t.Setenv(Env, "openai:"+s.URL+"#m2")
	e, err := FromEnv(context.Background())
	if err != nil || e == nil || e.Dim() != 16 {
		t.Fatalf("FromEnv: %v %v", e, err)
	}
}

func TestOpenErrors(t *testing.T) {
	for spec, want := range map[string]string{
		"bogus":                               "want openai:URL#MODEL",
		"tfidf:x":                             "unknown kind",
		"openai:http://h:1":                   "want openai:URL#MODEL",
		"openai:http://h:1?batch=x#m":         "option batch",
		"openai:http://h:1?timeout=forever#m": "option timeout",
		"onnx:":                               "want onnx:MODEL_DIR",
		"onnx:/nonexistent?threads=2":         "tokenizer.json",
		"onnx:/nonexistent?color=red":         "unknown options",
	} {
		_, err := Open(context.Background(), spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want an error with %q", spec, err, want)
		}
	}
	if e, err := Open(context.Background(), "none"); e != nil || err != nil {
		t.Errorf("none: %v %v", e, err)
	}
}

func TestOpenONNX(t *testing.T) {
	dir, _ := filepath.Abs("../../../.cache/models/bge-small-en-v1.5-q")
	if _, err := os.Stat(filepath.Join(dir, "model.onnx")); err != nil {
		t.Skip("model not fetched: run `make model`")
	}
	if _, ok := onnx.FindLibrary(dir); !ok {
		t.Skip("no ONNX Runtime library: run `make model`")
	}
	e, err := Open(context.Background(), "onnx:"+dir+"?threads=1&max_tokens=128")
	if err != nil {
		t.Fatal(err)
	}
	defer embed.Close(e)
	l, ok := e.(embed.Limiter)
	if e.Dim() != 384 || e.Model() != "bge-small-en-v1.5-q@max_tokens=128" || !ok || l.MaxTokens() != 128 {
		t.Fatalf("Dim %d Model %q MaxTokens %v", e.Dim(), e.Model(), l)
	}
}
