package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"codectx/pkg/chunk"
	"codectx/pkg/dense"
	"codectx/pkg/embed"
	"codectx/pkg/index"
	"codectx/pkg/queue"
)

// EmbedItem is one chunk to embed: chunk Chunk of the parse result stored
// at Parse, whose dense.Hash is Hash.
type EmbedItem struct {
	Parse string `json:"parse"`
	Chunk int    `json:"chunk"`
	Hash  string `json:"hash"`
}

// EmbedBatch is one embed job: chunks of one snapshot whose vectors are
// not cached for the model.
type EmbedBatch struct {
	Tenant, Repo, Commit string
	Model                string
	Dim                  int
	Batch                int
	Items                []EmbedItem
}

// EmbedPlan is what the embed stage of a snapshot decided, stored at
// EmbedPlanKey: every distinct chunk of the snapshot (the points it
// needs) and the batches of those whose vector is not cached yet.
type EmbedPlan struct {
	Tenant, Repo, Commit string
	Model                string
	Dim                  int
	Points               []dense.Point
	Batches              [][]EmbedItem
}

// EmbedPlanKey is where the embed plan of a snapshot is stored.
func EmbedPlanKey(tenant, repo, commit string) string {
	return index.RepoPrefix("embedplans/", tenant, repo) + commit + ".json"
}

// RunEmbed consumes the embed stage until ctx is done. cfg.Stage is set
// to StageEmbed; a nil cfg.Backoff is DefaultBackoff. It needs w.Embedder.
func (w *Workers) RunEmbed(ctx context.Context, cfg queue.Config) error {
	if w.Embedder == nil {
		return fmt.Errorf("embed worker: no embedder configured")
	}
	cfg.Stage = StageEmbed
	cfg = withBackoff(cfg)
	return w.Queue.Consume(ctx, cfg, w.wrap(StageEmbed, w.HandleEmbed))
}

// HandleEmbed embeds the chunks of one EmbedBatch message and caches their
// vectors. Vectors are keyed by (model, text hash), so a redelivered batch
// embeds only what is still missing. A message that is itself bad (not a
// batch, or naming chunks that hash otherwise) fails with a
// queue.Permanent error; every other error (the embedder, the store, a
// worker of another model) is an infrastructure failure, retried.
func (w *Workers) HandleEmbed(ctx context.Context, m queue.Message) error {
	var b EmbedBatch
	if err := json.Unmarshal(m.Data, &b); err != nil {
		return queue.Permanent(fmt.Errorf("decode embed batch: %w", err))
	}
	err := w.handleEmbed(ctx, b)
	if err != nil && ctx.Err() == nil {
		w.failed(ctx, StageEmbed, b.Tenant, b.Repo, b.Commit, m, err)
	}
	return err
}

func (w *Workers) handleEmbed(ctx context.Context, b EmbedBatch) error {
	if b.Model != w.Embedder.Model() || b.Dim != w.Embedder.Dim() {
		return fmt.Errorf("embed batch %d of %s/%s@%s is for model %s/%d, this worker runs %s/%d", b.Batch, b.Tenant, b.Repo, b.Commit, b.Model, b.Dim, w.Embedder.Model(), w.Embedder.Dim())
	}
	results := map[string]*chunk.Result{}
	hashes := make([]string, 0, len(b.Items))
	texts := make([]string, 0, len(b.Items))
	for _, it := range b.Items {
		r, ok := results[it.Parse]
		if !ok {
			data, err := w.Store.Get(ctx, it.Parse)
			if err != nil {
				return fmt.Errorf("embed batch %d: parse result: %w", b.Batch, err)
			}
			r = new(chunk.Result)
			if err := index.DecodeParsed(data, r); err != nil {
				return fmt.Errorf("embed batch %d: parse result %s: %w", b.Batch, it.Parse, err)
			}
			results[it.Parse] = r
		}
		if it.Chunk < 0 || it.Chunk >= len(r.Chunks) {
			return queue.Permanent(fmt.Errorf("embed batch %d: %s has no chunk %d", b.Batch, it.Parse, it.Chunk))
		}
		text := dense.Text(r.Chunks[it.Chunk])
		if h := dense.Hash(r.Chunks[it.Chunk]); h != it.Hash {
			return queue.Permanent(fmt.Errorf("embed batch %d: chunk %d of %s hashes to %s, planned %s", b.Batch, it.Chunk, it.Parse, h, it.Hash))
		}
		hashes, texts = append(hashes, it.Hash), append(texts, text)
	}
	if _, err := dense.EmbedAndCache(ctx, w.Store, w.Embedder, b.Tenant, hashes, texts); err != nil {
		err = fmt.Errorf("embed batch %d of %s/%s@%s: %w", b.Batch, b.Tenant, b.Repo, b.Commit, err)
		if errors.Is(err, embed.ErrRejected) {
			// The embedder refused some of the texts themselves (the
			// others are cached): a poison batch, whose chunks are left
			// without a vector, not an outage that holds up the snapshot.
			return queue.Permanent(err)
		}
		return err
	}
	return nil
}
