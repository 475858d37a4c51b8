package dense_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/codectx"
	"codectx/pkg/dense"
	"codectx/pkg/dense/densetest"
	"codectx/pkg/embed"
)

// TestEmbedAndCacheRejected: a text the embedder rejects leaves only that
// text without a vector; the others of its batch are cached, and the
// error says the input was rejected (no retry embeds it).
func TestEmbedAndCacheRejected(t *testing.T) {
	ctx := context.Background()
	store := blob.NewMem()
	emb := &densetest.Picky{}
	var hashes, texts []string
	for i := range 40 {
		text := fmt.Sprintf("func F%d() int { return %d }", i, i)
		if i == 7 {
			text = "REJECT " + text
		}
		hashes, texts = append(hashes, codectx.HashText(text)), append(texts, text)
	}
	n, err := dense.EmbedAndCache(ctx, store, emb, "acme", hashes, texts)
	if !errors.Is(err, embed.ErrRejected) {
		t.Fatalf("EmbedAndCache: err = %v, want embed.ErrRejected", err)
	}
	if n != 39 {
		t.Errorf("embedded %d, want 39", n)
	}
	miss, err := dense.Missing(ctx, store, dense.Collection(emb), "acme", hashes)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range miss {
		if m != (i == 7) {
			t.Errorf("text %d: missing %v, want %v", i, m, i == 7)
		}
	}
}
