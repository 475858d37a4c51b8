package main

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob/local"
	"codectx/pkg/dense"
	"codectx/pkg/embed/embedders"
	"codectx/pkg/embed/embedtest"
	"codectx/pkg/index"
	"codectx/pkg/query"
	"codectx/pkg/testrepo"
	"codectx/pkg/vector"
	vlocal "codectx/pkg/vector/local"
)

// onnxModel is a local ONNX model directory for the end-to-end test: the
// first of .cache/models/* at the module root holding model.onnx.
func onnxModel() string {
	dirs, _ := filepath.Glob(filepath.Join("..", "..", ".cache", "models", "*", "model.onnx"))
	if len(dirs) == 0 {
		return ""
	}
	abs, err := filepath.Abs(filepath.Dir(dirs[0]))
	if err != nil {
		return ""
	}
	return abs
}

// TestUpDense runs `codectx up` with an embedder: the pipeline's embed
// workers embed the repository, its vectors land in the embedded store, a
// dense-only query finds the chunk a question describes, a one-file change
// embeds only the changed chunk, and another tenant's repository of the
// same name never answers with the first tenant's vectors. It runs with the
// in-test OpenAI-compatible server, and with the real ONNX model when one
// is in .cache/models.
func TestUpDense(t *testing.T) {
	srv := embedtest.NewServer(256, "hash-embed")
	t.Cleanup(srv.Close)
	cases := []struct{ name, spec string }{{"http", "openai:" + srv.URL + "#hash-embed"}}
	if dir := onnxModel(); dir != "" {
		cases = append(cases, struct{ name, spec string }{"onnx", "onnx:" + dir})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { testUpDense(t, tc.spec) })
	}
	if len(cases) == 1 {
		t.Log("no ONNX model in .cache/models: the real-model case is skipped")
	}
}

// denseFiles is the repository of the dense end-to-end test: files of one
// function each, so that files rank as their function does.
var denseFiles = map[string]string{
	"payment/refund.go": "package payment\n\n// IssueRefund sends money back to the customer when an order is returned.\nfunc IssueRefund(orderID string, cents int) error {\n\tif cents <= 0 {\n\t\treturn errNothingToRefund\n\t}\n\treturn nil\n}\n",
	"cart/cart.go":      "package cart\n\n// Total returns the sum of the item prices in cents.\nfunc Total(prices []int) int {\n\tn := 0\n\tfor _, p := range prices {\n\t\tn += p\n\t}\n\treturn n\n}\n",
	"mail/notify.go":    "package mail\n\n// Notify emails a message to a subscriber's address.\nfunc Notify(address, message string) error {\n\treturn deliver(address, message)\n}\n",
	"weather/sky.go":    "package weather\n\n// Forecast predicts rain and sunshine for tomorrow.\nfunc Forecast() string {\n\treturn \"rain\"\n}\n",
}

func testUpDense(t *testing.T, spec string) {
	repo := testrepo.New(t)
	commit := repo.Commit("shop", denseFiles)
	data := t.TempDir()
	addr := freeAddr(t)
	base := "http://" + addr
	cl := &api.Client{BaseURL: base}
	up := startUp(t, "--data", data, "--listen", addr, "--embedder", spec)
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := cl.Index(ctx, api.IndexRequest{Repo: "shop", Location: repo.Dir}); err != nil {
		t.Fatal(err)
	}
	st, err := cl.WaitIndexed(ctx, "default", "shop", "")
	if err != nil {
		t.Fatal(err)
	}
	// Four files of a module header and a function each.
	if st.LastCommit != commit || st.Embedded != 8 || st.EmbedReused != 0 || !strings.Contains(st.Embed, "8 chunks, 8 embedded, 0 reused from cache") {
		t.Fatalf("status = %+v, want the 8 chunks of %s embedded", st, commit)
	}
	first := st.Embedded

	// The vectors are in the embedded store, in the blob store under --data.
	bs, err := local.Open(filepath.Join(data, "store"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := bs.List(ctx, index.RepoPrefix("vectors/", "default", "shop"))
	if err != nil || len(keys) != 1 {
		t.Fatalf("vector shards: %v (%v), want one", keys, err)
	}

	denseQuery := func(tenant, q string) *query.Response {
		t.Helper()
		resp, err := cl.Query(ctx, api.QueryRequest{Tenant: tenant, Repo: "shop", Query: q, Arms: []string{"dense"}, Budget: 2000})
		if err != nil {
			t.Fatalf("dense query %q of %s: %v", q, tenant, err)
		}
		return resp
	}
	resp := denseQuery("default", "give the customer their money back for a returned order")
	if top := best(resp); !slices.Equal(resp.Arms, []string{"dense"}) || len(resp.Files) == 0 || resp.Files[0].Path != "payment/refund.go" || top.Path != "payment/refund.go" {
		for _, c := range resp.Chunks {
			t.Logf("%s %s %.5f", c.Path, c.Symbol, c.Score)
		}
		t.Fatalf("dense-only query: arms %v, files %v, best chunk %s %s; want dense, payment/refund.go first", resp.Arms, resp.Files, top.Path, top.Symbol)
	}
	// The bag-of-words server puts the function first; a real model may
	// prefer the file's header (package payment), so the function must be
	// in the answer and be the best of its kind.
	if !slices.ContainsFunc(resp.Chunks, func(c query.Chunk) bool { return c.Symbol == "IssueRefund" }) {
		t.Errorf("dense-only query: no IssueRefund among %+v", resp.Chunks)
	}
	if top := best(resp); strings.HasPrefix(spec, "openai:") && top.Symbol != "IssueRefund" {
		t.Errorf("dense-only query: best chunk %s, want IssueRefund", top.Symbol)
	}
	if all, err := cl.Query(ctx, api.QueryRequest{Repo: "shop", Query: "sum of the item prices"}); err != nil || !slices.Contains(all.Arms, "dense") {
		t.Fatalf("default query arms %v (%v), want dense among them", all.Arms, err)
	}

	// One file changes: only its changed chunk is embedded, and `index`
	// through the server says so.
	repo.Commit("cents", map[string]string{"cart/cart.go": strings.Replace(denseFiles["cart/cart.go"], "n += p", "n += p * 1", 1)})
	var out syncBuffer
	if err := run(ctx, []string{"index", "--server", base, "--name", "shop", "--timeout", "2m", repo.Dir}, &out, &syncBuffer{}); err != nil {
		t.Fatalf("index --server: %v", err)
	}
	if !strings.Contains(out.String(), "8 chunks, 1 embedded, 7 reused from cache") {
		t.Fatalf("index --server after a one-file change printed %q, want 1 embedded, 7 reused", out.String())
	}
	if st, err = cl.Status(ctx, "default", "shop"); err != nil || st.Embedded != 1 || st.EmbedReused != first-1 {
		t.Fatalf("status after a one-file change: %+v (%v), want 1 embedded and %d reused", st, err, first-1)
	}

	// Another tenant's repository, also named shop: its dense answers come
	// from its own points only, and the store holds nothing of the first
	// tenant's under its name.
	other := testrepo.New(t)
	other.Commit("weather", map[string]string{"sky.py": "def forecast():\n    \"\"\"Predict rain and sunshine for tomorrow.\"\"\"\n    return 'rain'\n"})
	if _, err := cl.Index(ctx, api.IndexRequest{Tenant: "evil", Repo: "shop", Location: other.Dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.WaitIndexed(ctx, "evil", "shop", ""); err != nil {
		t.Fatal(err)
	}
	resp = denseQuery("evil", "give the customer their money back for a returned order")
	for _, c := range resp.Chunks {
		if c.Path != "sky.py" {
			t.Fatalf("tenant evil's dense query returned %s", c.Path)
		}
	}

	// DELETE of the first tenant's shop removes its vectors, in the
	// running store and in the blob store; another repository of the
	// tenant (stock) and the other tenant's shop keep theirs.
	stock := testrepo.New(t)
	stock.Commit("stock", map[string]string{"stock/count.go": "package stock\n\n// Count returns how many items are left in the warehouse.\nfunc Count() int {\n\treturn 3\n}\n"})
	if _, err := cl.Index(ctx, api.IndexRequest{Repo: "stock", Location: stock.Dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.WaitIndexed(ctx, "default", "stock", ""); err != nil {
		t.Fatal(err)
	}
	if del, err := cl.Delete(ctx, "default", "shop"); err != nil || del.Deleted == 0 {
		t.Fatalf("DELETE /v1/repos/default/shop: %+v (%v)", del, err)
	}
	if keys, err := bs.List(ctx, index.RepoPrefix("vectors/", "default", "shop")); err != nil || len(keys) != 0 {
		t.Fatalf("vector shards of default/shop after DELETE: %v (%v), want none", keys, err)
	}
	if keys, err := bs.List(ctx, index.RepoPrefix("vectorsets/", "default", "shop")); err != nil || len(keys) != 0 {
		t.Fatalf("vector sets of default/shop after DELETE: %v (%v), want none", keys, err)
	}
	resp, err = cl.Query(ctx, api.QueryRequest{Repo: "stock", Query: "items left in the warehouse", Arms: []string{"dense"}, Budget: 2000})
	if err != nil || len(resp.Files) == 0 || resp.Files[0].Path != "stock/count.go" {
		t.Fatalf("dense query of default/stock after deleting default/shop: %+v (%v)", resp, err)
	}
	up.stop(t)

	// In the store: each tenant's points hold only its own chunks.
	emb, err := embedders.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	vs := vlocal.New(bs, vlocal.Float32)
	for _, tr := range []struct{ tenant, repo, path string }{{"evil", "shop", "sky.py"}, {"default", "stock", "stock/count.go"}} {
		pts, err := vs.List(ctx, dense.Collection(emb), vector.Filter{Tenant: tr.tenant, Repos: []string{tr.repo}})
		if err != nil || len(pts) == 0 {
			t.Fatalf("points of %s/%s: %d (%v)", tr.tenant, tr.repo, len(pts), err)
		}
		for _, p := range pts {
			if p.Payload.Path != tr.path || p.Payload.Tenant != tr.tenant || p.Payload.Repo != tr.repo {
				t.Fatalf("a point of %s/%s: %+v", tr.tenant, tr.repo, p.Payload)
			}
		}
	}
	if pts, err := vs.List(ctx, dense.Collection(emb), vector.Filter{Tenant: "default", Repos: []string{"shop"}}); err != nil || len(pts) != 0 {
		t.Fatalf("points of default/shop after DELETE: %d (%v), want none", len(pts), err)
	}
}

// best is the chunk of a response the fusion scored highest (chunks are
// packed file by file, not in score order).
func best(r *query.Response) query.Chunk {
	var top query.Chunk
	for _, c := range r.Chunks {
		if c.Score > top.Score {
			top = c
		}
	}
	return top
}

// TestDenseArmNeedsEmbedder: asking for the dense arm without an embedder
// is a clear error on the CLI, not an answer without it.
func TestDenseArmNeedsEmbedder(t *testing.T) {
	t.Setenv("CODECTX_EMBEDDER", "")
	data := t.TempDir()
	if _, err := openStore(data); err != nil { // a data directory, with nothing indexed
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"query", "--data", data, "--repo", "x", "--arms", "dense", "anything"}, &syncBuffer{}, &syncBuffer{})
	if !errors.Is(err, errNoEmbedder) {
		t.Fatalf("query --arms dense without an embedder: %v, want %v", err, errNoEmbedder)
	}
}
