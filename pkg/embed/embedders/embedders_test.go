package embedders

import (
	"context"
	"strings"
	"testing"

	"codectx/pkg/embed"
	"codectx/pkg/embed/embedtest"
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
