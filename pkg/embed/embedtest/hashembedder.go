package embedtest

import (
	"context"

	"codectx/pkg/embed"
)

// Hash is an in-process embed.Embedder computing HashEmbed, for tests that
// need real, deterministic vectors without a server. Query texts get
// QueryPrefix first, as a model with an instruction prefix would.
type Hash struct {
	N           int    // dimension (0: 256)
	Name        string // model name (empty: "hash-embed")
	QueryPrefix string
}

var _ embed.Embedder = Hash{}

// Embed embeds each text with HashEmbed.
func (h Hash) Embed(ctx context.Context, texts []string, kind embed.Kind) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if kind == embed.Query {
			t = h.QueryPrefix + t
		}
		out[i] = HashEmbed(t, h.Dim())
	}
	return out, nil
}

// Dim is N, or 256.
func (h Hash) Dim() int {
	if h.N <= 0 {
		return 256
	}
	return h.N
}

// Model is Name, or "hash-embed".
func (h Hash) Model() string {
	if h.Name == "" {
		return "hash-embed"
	}
	return h.Name
}
