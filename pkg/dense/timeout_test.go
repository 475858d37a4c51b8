package dense_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/dense"
	"codectx/pkg/dense/densetest"
	"codectx/pkg/embed"
	"codectx/pkg/index"
	"codectx/pkg/testrepo"
	"codectx/pkg/vector/local"
)

// hung is an embedder that never answers: it waits for its context.
type hung struct {
	densetest.Words
	calls atomic.Int64
}

func (h *hung) Embed(ctx context.Context, _ []string, _ embed.Kind) ([][]float32, error) {
	h.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestArmTimeout: the dense arm of a query does not wait for an embedder
// that does not answer beyond its Timeout (an embedder's own timeout and
// retries are the indexing's, minutes), and over several repositories one
// request waits for it once.
func TestArmTimeout(t *testing.T) {
	ctx := context.Background()
	store := blob.NewMem()
	repo := testrepo.New(t)
	repo.Commit("one", map[string]string{"cart.go": "package shop\n\n// Total adds up the prices.\nfunc Total(p []int) int { return 0 }\n"})
	build(t, store, "acme", repo.Dir)
	seg, err := index.LoadHead(ctx, store, "acme", "shop")
	if err != nil {
		t.Fatal(err)
	}
	emb := &hung{}
	arm := (&dense.Arm{Embedder: emb, Store: local.New(store, local.Float32), Timeout: 50 * time.Millisecond}).ForRequest()
	start := time.Now()
	for range 3 { // three repositories of one request
		if _, err := arm.Search(ctx, seg, "sum of prices", 10); err == nil || !strings.Contains(err.Error(), "no answer within") {
			t.Fatalf("Search with a hung embedder: err = %v, want the arm's timeout", err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("three searches took %s, want about one timeout", d)
	}
	if n := emb.calls.Load(); n != 1 {
		t.Errorf("the embedder was asked %d times for one request's query, want 1", n)
	}
}
