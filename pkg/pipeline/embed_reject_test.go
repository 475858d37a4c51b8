package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/chunk"
	"codectx/pkg/codectx"
	"codectx/pkg/dense"
	"codectx/pkg/dense/densetest"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue"
)

// TestHandleEmbedRejected: an embed batch holding a chunk the embedder
// rejects is a poison batch (queue.Permanent: dead-lettered at once, its
// chunk left without a vector), not an outage retried until the snapshot
// fails; the batch's other chunks are cached.
func TestHandleEmbedRejected(t *testing.T) {
	ctx := context.Background()
	store := blob.NewMem()
	emb := &densetest.Picky{}
	var res chunk.Result
	for i := range 5 {
		body := fmt.Sprintf("func F%d() int { return %d }", i, i)
		if i == 2 {
			body = "func F2() string { return \"REJECT\" }"
		}
		res.Chunks = append(res.Chunks, codectx.Chunk{Path: "f.go", Name: fmt.Sprintf("F%d", i), Body: body})
	}
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, "parse/f", data); err != nil {
		t.Fatal(err)
	}
	b := pipeline.EmbedBatch{Tenant: "acme", Repo: "shop", Commit: "c1", Model: emb.Model(), Dim: emb.Dim()}
	for i, c := range res.Chunks {
		b.Items = append(b.Items, pipeline.EmbedItem{Parse: "parse/f", Chunk: i, Hash: dense.Hash(c)})
	}
	msg, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	w := &pipeline.Workers{Store: store, Embedder: emb}
	err = w.HandleEmbed(ctx, queue.Message{Data: msg, Deliveries: 1})
	if !queue.IsPermanent(err) {
		t.Fatalf("HandleEmbed: err = %v, want a Permanent error (a poison batch)", err)
	}
	for i, it := range b.Items {
		ok, err := store.Exists(ctx, dense.CacheKey(dense.Collection(emb), "acme", it.Hash))
		if err != nil {
			t.Fatal(err)
		}
		if ok != (i != 2) {
			t.Errorf("chunk %d: cached %v, want %v", i, ok, i != 2)
		}
	}
}
