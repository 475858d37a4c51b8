// Package densetest has an in-process embedder for tests: a bag of words
// hashed into buckets, deterministic, so texts sharing words are close.
// Tests that need a real driver over HTTP use embed/embedtest's server.
package densetest

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"sync/atomic"

	"codectx/pkg/embed"
)

// Words is a bag-of-words embedder. It counts the texts it embeds.
type Words struct {
	N     int    // dimension; default 256
	Name  string // model name; default "test-words"
	texts atomic.Int64
}

// Texts is the number of texts embedded so far.
func (w *Words) Texts() int { return int(w.texts.Load()) }

// Embed implements embed.Embedder.
func (w *Words) Embed(ctx context.Context, texts []string, _ embed.Kind) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w.texts.Add(int64(len(texts)))
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, w.Dim())
		for _, f := range strings.FieldsFunc(strings.ToLower(t), func(r rune) bool { return r < 'a' || r > 'z' }) {
			h := fnv.New32a()
			h.Write([]byte(f))
			v[h.Sum32()%uint32(len(v))]++
		}
		out[i] = v
	}
	return out, nil
}

// Dim implements embed.Embedder.
func (w *Words) Dim() int {
	if w.N > 0 {
		return w.N
	}
	return 256
}

// Model implements embed.Embedder.
func (w *Words) Model() string {
	if w.Name != "" {
		return w.Name
	}
	return "test-words"
}

var _ embed.Embedder = (*Words)(nil)

// Picky is Words refusing (embed.ErrRejected) any request that holds a
// text with "REJECT", as an embedding server answers 413 to a batch
// holding one text too long for its model.
type Picky struct{ Words }

func (p *Picky) Embed(ctx context.Context, texts []string, k embed.Kind) ([][]float32, error) {
	for _, t := range texts {
		if strings.Contains(t, "REJECT") {
			return nil, fmt.Errorf("server answered 413: %w", embed.ErrRejected)
		}
	}
	return p.Words.Embed(ctx, texts, k)
}
