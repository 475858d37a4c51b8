package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"

	"codectx/pkg/blob"
	"codectx/pkg/dense"
	"codectx/pkg/embed"
	"codectx/pkg/embed/embedders"
	"codectx/pkg/query"
	"codectx/pkg/vector"
	"codectx/pkg/vector/local"
	"codectx/pkg/vector/qdrant"
)

// denseFlags select the embedder and the vector store of a command.
type denseFlags struct {
	spec   string
	qdrant string
}

func (d *denseFlags) register(fs *flag.FlagSet, withQdrant bool) {
	fs.StringVar(&d.spec, "embedder", env(embedders.Env, ""), "embedder for dense retrieval: onnx:MODEL_DIR or openai:URL#MODEL; empty = no dense arm, no embed stage ($"+embedders.Env+")")
	if withQdrant {
		fs.StringVar(&d.qdrant, "qdrant", env(qdrant.Env, ""), "Qdrant gRPC host:port for vectors; empty = the embedded vector store in the blob store ($"+qdrant.Env+")")
	}
}

// denseKit is an opened embedder with its vector store (both nil when no
// embedder is configured).
type denseKit struct {
	emb   embed.Embedder
	store vector.Store
	where string
}

// open opens the embedder and, with one, the vector store: Qdrant when an
// address is given, else the embedded store over the blob store.
func (d *denseFlags) open(ctx context.Context, store *blob.Bucket) (*denseKit, error) {
	emb, err := embedders.Open(ctx, d.spec)
	if err != nil {
		return nil, err
	}
	k := &denseKit{emb: emb}
	if emb == nil {
		return k, nil
	}
	if d.qdrant != "" {
		qs, err := qdrant.Open(d.qdrant)
		if err != nil {
			embed.Close(emb)
			return nil, err
		}
		k.store, k.where = qs, "qdrant "+d.qdrant
		return k, nil
	}
	k.store, k.where = local.New(store, local.Binary), "embedded"
	return k, nil
}

func (k *denseKit) close() {
	if k == nil {
		return
	}
	if k.store != nil {
		k.store.Close()
	}
	if k.emb != nil {
		embed.Close(k.emb)
	}
}

// arm is the query engine's dense arm, nil without an embedder.
func (k *denseKit) arm() query.Dense {
	if k == nil || k.emb == nil {
		return nil
	}
	return &dense.Arm{Embedder: k.emb, Store: k.store}
}

// note is what /readyz says about the embed stage.
func (k *denseKit) note() string {
	if k == nil || k.emb == nil {
		return embedDisabled
	}
	return fmt.Sprintf("on: model %s (%d dimensions), vectors %s", k.emb.Model(), k.emb.Dim(), k.where)
}

// errNoEmbedder is returned for --arms dense without an embedder.
var errNoEmbedder = errors.New("the dense arm needs an embedder: pass --embedder onnx:MODEL_DIR or openai:URL#MODEL (or set $" + embedders.Env + ")")

// checkArms refuses an explicit dense arm when there is no embedder.
func checkArms(arms []string, k *denseKit) error {
	if slices.Contains(arms, query.ArmDense) && (k == nil || k.emb == nil) {
		return errNoEmbedder
	}
	return nil
}
