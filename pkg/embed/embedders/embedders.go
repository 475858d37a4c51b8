// Package embedders opens an embed.Embedder from a one-line spec, the
// form the --embedder flag and the CODECTX_EMBEDDER variable take:
//
//	openai:URL#MODEL   any OpenAI-compatible /v1/embeddings server
//	onnx:MODEL_DIR     a local ONNX model directory (see pkg/embed/onnx)
//
// Driver options go in the spec's query string, for example
// openai:http://localhost:11434?batch=32&concurrency=2#nomic-embed-text
// (or after the model: ...#nomic-embed-text?batch=32)
// or onnx:.cache/models/bge-small-en-v1.5?threads=2. Query parameters the
// driver does not know are left on the server URL.
package embedders

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"codectx/pkg/embed"
	"codectx/pkg/embed/onnx"
	"codectx/pkg/embed/openai"
)

// Env is the environment variable holding the default spec.
const Env = "CODECTX_EMBEDDER"

// FromEnv opens the embedder named by CODECTX_EMBEDDER; (nil, nil) if it
// is unset or empty.
func FromEnv(ctx context.Context) (embed.Embedder, error) {
	return Open(ctx, os.Getenv(Env))
}

// Open opens the embedder a spec names; (nil, nil) for an empty spec or
// "none", which mean no dense retrieval.
func Open(ctx context.Context, spec string) (embed.Embedder, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "none" {
		return nil, nil
	}
	kind, rest, ok := strings.Cut(spec, ":")
	if !ok {
		return nil, fmt.Errorf("embedder %q: want openai:URL#MODEL or onnx:MODEL_DIR", spec)
	}
	switch kind {
	case "openai":
		return openOpenAI(ctx, rest)
	case "onnx":
		return openONNX(rest)
	}
	return nil, fmt.Errorf("embedder %q: unknown kind %q (want openai or onnx)", spec, kind)
}

// params pulls the known keys out of a raw query string, returning them
// and the query string that is left.
func params(rawQuery string, known ...string) (map[string]string, string, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, "", err
	}
	got := map[string]string{}
	for _, k := range known {
		if v, ok := q[k]; ok {
			got[k] = v[len(v)-1]
			delete(q, k)
		}
	}
	return got, q.Encode(), nil
}

func atoi(p map[string]string, k string, dst *int) error {
	v, ok := p[k]
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return fmt.Errorf("option %s=%q: want a whole number >= 0", k, v)
	}
	*dst = n
	return nil
}

func openOpenAI(ctx context.Context, rest string) (embed.Embedder, error) {
	base, model, _ := strings.Cut(rest, "#")
	// Options may also follow the model (openai:URL#MODEL?batch=32), as
	// they follow the directory of onnx:DIR?threads=2: a model name holds
	// no "?", and were it kept the options would be ignored and name
	// another model (its cache keys and vector collection).
	model, modelQuery, _ := strings.Cut(model, "?")
	if base == "" || model == "" {
		return nil, fmt.Errorf("embedder openai:%s: want openai:URL#MODEL", rest)
	}
	u, rawQuery, _ := strings.Cut(base, "?")
	if modelQuery != "" {
		if rawQuery != "" {
			rawQuery += "&"
		}
		rawQuery += modelQuery
	}
	p, left, err := params(rawQuery, "dim", "dimensions", "batch", "concurrency", "retries", "timeout", "key_env", "max_chars", "query_prefix", "passage_prefix")
	if err != nil {
		return nil, fmt.Errorf("embedder openai:%s: %w", rest, err)
	}
	o := openai.Options{URL: u, Model: model, KeyEnv: p["key_env"], QueryPrefix: p["query_prefix"], PassagePrefix: p["passage_prefix"]}
	if left != "" {
		o.URL += "?" + left
	}
	for k, dst := range map[string]*int{"dim": &o.Dim, "dimensions": &o.Dimensions, "batch": &o.MaxBatch, "concurrency": &o.Concurrency, "retries": &o.MaxRetries, "max_chars": &o.MaxChars} {
		if err := atoi(p, k, dst); err != nil {
			return nil, fmt.Errorf("embedder openai: %w", err)
		}
	}
	if p["retries"] == "0" {
		o.MaxRetries = -1
	}
	if v, ok := p["timeout"]; ok {
		if o.Timeout, err = time.ParseDuration(v); err != nil {
			return nil, fmt.Errorf("embedder openai: option timeout=%q: %w", v, err)
		}
	}
	return openai.New(ctx, o)
}

func openONNX(rest string) (embed.Embedder, error) {
	dir, rawQuery, _ := strings.Cut(rest, "?")
	if dir == "" {
		return nil, fmt.Errorf("embedder onnx:%s: want onnx:MODEL_DIR", rest)
	}
	p, left, err := params(rawQuery, "threads", "parallel", "batch", "max_tokens", "lib")
	if err != nil {
		return nil, fmt.Errorf("embedder onnx:%s: %w", rest, err)
	}
	if left != "" {
		return nil, fmt.Errorf("embedder onnx:%s: unknown options %s (want threads, parallel, batch, max_tokens, lib)", rest, left)
	}
	o := onnx.Options{Library: p["lib"]}
	for k, dst := range map[string]*int{"threads": &o.Threads, "parallel": &o.Parallel, "batch": &o.MaxBatch, "max_tokens": &o.MaxTokens} {
		if err := atoi(p, k, dst); err != nil {
			return nil, fmt.Errorf("embedder onnx: %w", err)
		}
	}
	return onnx.Open(dir, o)
}
