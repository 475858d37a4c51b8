// Package embed is the port for text embedders: a model that turns text
// into a dense vector. Drivers live in subpackages (onnx: a local ONNX
// model; openai: any OpenAI-compatible /v1/embeddings server). The query
// engine and the embed workers speak only this package.
package embed

import (
	"context"
	"errors"
	"io"
)

// Kind says what a text is, for models that embed queries and passages
// differently (prefixes such as "query: " / "passage: ").
type Kind int

const (
	Passage Kind = iota // a chunk of code or docs being indexed
	Query               // a user's query
)

// Embedder turns texts into vectors. Implementations are safe for
// concurrent use.
type Embedder interface {
	// Embed returns one vector per text, in order, each of length Dim().
	// Texts longer than the model's limit are truncated by the driver.
	Embed(ctx context.Context, texts []string, kind Kind) ([][]float32, error)
	// Dim is the length of every vector Embed returns.
	Dim() int
	// Model names the model; with Dim it keys the embedding cache and the
	// vector collection, so two different models never share vectors.
	Model() string
}

// ErrDim is returned (wrapped) when a driver receives vectors of another
// length than it announced.
var ErrDim = errors.New("embed: vector dimension mismatch")

// ErrRejected is matched (errors.Is) by a driver's error when the
// embedder refused the input itself, such as an embedding server's 400,
// 413 or 422 answer to a text too long for its model: sending the same
// texts again gets the same answer, whereas the embedder is up.
var ErrRejected = errors.New("embed: input rejected")

// Limiter is implemented by embedders that know their model's input limit
// in tokens; callers may use it to size the text they send (the driver
// truncates anyway).
type Limiter interface {
	MaxTokens() int
}

// Close releases what an embedder holds (an ONNX session, idle HTTP
// connections) if it implements io.Closer, and is a no-op otherwise.
func Close(e Embedder) error {
	if c, ok := e.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
