package dense_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/codectx"
	"codectx/pkg/dense"
	"codectx/pkg/dense/densetest"
	"codectx/pkg/index"
	"codectx/pkg/segment"
	"codectx/pkg/testrepo"
	"codectx/pkg/vector"
	"codectx/pkg/vector/local"
)

func TestText(t *testing.T) {
	c := codectx.Chunk{Name: "Cart.Total", Signature: "func (c *Cart) Total() int", Doc: "Total sums the cart.", Body: "func (c *Cart) Total() int { return 0 }"}
	if got, want := dense.Text(c), "Cart.Total\nTotal sums the cart.\nfunc (c *Cart) Total() int { return 0 }"; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
	long := codectx.Chunk{Body: strings.Repeat("é", dense.MaxChars)}
	if got := dense.Text(long); len(got) > dense.MaxChars || !strings.HasPrefix(long.Body, got) || !strings.HasSuffix(got, "é") {
		t.Errorf("truncated text: %d bytes, cut inside a character or not a prefix", len(got))
	}
}

func build(t *testing.T, store *blob.Bucket, tenant, dir string) {
	t.Helper()
	if _, err := index.Build(context.Background(), store, dir, index.Options{Tenant: tenant, Name: "shop"}); err != nil {
		t.Fatal(err)
	}
}

// TestIndexAndSearch: the library path embeds a snapshot, a second
// snapshot after a one-file change embeds only that file's changed chunks,
// the arm finds the chunk a query describes, and another tenant's arm over
// its own index of the same repository name never returns the first's.
func TestIndexAndSearch(t *testing.T) {
	ctx := context.Background()
	store := blob.NewMem()
	vs := local.New(store, local.Float32)
	emb := &densetest.Words{}
	repo := testrepo.New(t)
	repo.Commit("one", map[string]string{
		"cart.go":    "package shop\n\n// Total adds up the prices of the items in the basket.\nfunc Total(prices []int) int {\n\tsum := 0\n\tfor _, p := range prices {\n\t\tsum += p\n\t}\n\treturn sum\n}\n",
		"mail.go":    "package shop\n\n// Notify sends an email message to the customer address.\nfunc Notify(address, message string) error {\n\treturn send(address, message)\n}\n",
		"weather.go": "package shop\n\n// Forecast predicts rain and sunshine for tomorrow.\nfunc Forecast() string { return \"rain\" }\n",
	})
	build(t, store, "acme", repo.Dir)
	seg, err := index.LoadHead(ctx, store, "acme", "shop")
	if err != nil {
		t.Fatal(err)
	}
	st, err := dense.IndexSegment(ctx, store, vs, emb, seg)
	if err != nil {
		t.Fatal(err)
	}
	if st.Chunks == 0 || st.Embedded != st.Chunks || st.Reused != 0 || st.Added != st.Chunks {
		t.Fatalf("first index: %+v, want every chunk embedded and added", st)
	}
	arm := &dense.Arm{Embedder: emb, Store: vs}
	ids, err := arm.Search(ctx, seg, "send an email message to a customer", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) == 0 || seg.Chunks[ids[0]].Name != "Notify" {
		t.Fatalf("dense top hit: %v, want Notify", names(seg, ids))
	}

	// One file changes: only its changed chunk is embedded again.
	repo.Commit("two", map[string]string{"weather.go": "package shop\n\n// Forecast predicts snow and storms for the weekend.\nfunc Forecast() string { return \"snow\" }\n"})
	build(t, store, "acme", repo.Dir)
	seg2, _ := index.LoadHead(ctx, store, "acme", "shop")
	before := emb.Texts()
	st, err = dense.IndexSegment(ctx, store, vs, emb, seg2)
	if err != nil {
		t.Fatal(err)
	}
	if st.Embedded != 1 || st.Reused != st.Chunks-1 || st.Added != 1 || st.Deleted != 1 || emb.Texts()-before != 1 {
		t.Fatalf("after a one-function change: %+v (%d texts embedded), want 1 embedded, 1 added, 1 deleted", st, emb.Texts()-before)
	}
	if ids, _ := arm.Search(ctx, seg2, "snow and storms at the weekend", 1); len(ids) != 1 || seg2.Chunks[ids[0]].Name != "Forecast" {
		t.Fatalf("changed chunk: %v, want Forecast", names(seg2, ids))
	}

	// Another tenant indexes its own repository named shop: its queries
	// see only its points, and the first tenant's cache is reused.
	other := testrepo.New(t)
	other.Commit("x", map[string]string{"pay.go": "package shop\n\n// Charge bills the credit card.\nfunc Charge(card string) error { return nil }\n"})
	build(t, store, "evil", other.Dir)
	oseg, _ := index.LoadHead(ctx, store, "evil", "shop")
	if _, err := dense.IndexSegment(ctx, store, vs, emb, oseg); err != nil {
		t.Fatal(err)
	}
	hits, err := vs.Search(ctx, dense.Collection(emb), make([]float32, 256), 100, vector.Filter{Tenant: "evil", Repos: []string{"shop"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		if h.Payload.Tenant != "evil" || h.Payload.Path != "pay.go" {
			t.Fatalf("tenant evil sees %+v", h.Payload)
		}
	}
	if ids, _ := (&dense.Arm{Embedder: emb, Store: vs}).Search(ctx, oseg, "send an email message to a customer", 5); slices.ContainsFunc(ids, func(id int) bool { return oseg.Chunks[id].Name == "Notify" }) {
		t.Fatal("tenant evil's dense arm returned acme's chunk")
	}
}

func names(seg *segment.Segment, ids []int) []string {
	var out []string
	for _, id := range ids {
		out = append(out, seg.Chunks[id].Name)
	}
	return out
}
