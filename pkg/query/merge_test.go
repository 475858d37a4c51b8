package query_test

import (
	"slices"
	"testing"

	"codectx/pkg/query"
	"codectx/pkg/segment"
)

// TestMergeGates: in a query over two repositories, the files of the one
// the query's words are about come first, wherever it is in the list of
// parts. The fused scores alone (MergeScore) rank the other repository's
// best file, which holds only "total", above the second file of the one
// the query is about.
func TestMergeGates(t *testing.T) {
	shop := segOf(t, "acme/shop", map[string]string{
		"cart/cart.go": "package cart\n\n// Total sums the cart's lines.\nfunc Total(lines []int) int {\n\tt := 0\n\tfor _, l := range lines {\n\t\tt += l\n\t}\n\treturn t\n}\n",
		"cart/item.go": "package cart\n\n// Item is a line of a cart.\ntype Item struct{ Price int }\n",
	})
	billing := segOf(t, "acme/billing", map[string]string{
		"invoice/tax.go":   "package invoice\n\n// InvoiceTax is the tax of an invoice's total: each invoice line's tax rate.\nfunc InvoiceTax(invoice Invoice, rate int) int {\n\treturn invoice.Total * rate / 100\n}\n",
		"invoice/types.go": "package invoice\n\n// Invoice is a bill.\ntype Invoice struct{ Total int }\n",
	})
	req := query.Request{Query: "invoice tax of the total", Route: true, Budget: 2000}
	search := func(segs ...*segment.Segment) []query.Part {
		t.Helper()
		return searchParts(t, req, segs...)
	}
	top := func(resp *query.Response) string {
		if len(resp.Files) == 0 {
			return ""
		}
		return resp.Files[0].Repo + ":" + resp.Files[0].Path
	}
	repos := func(fs []query.File) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Repo)
		}
		return out
	}
	for _, order := range [][]*segment.Segment{{shop, billing}, {billing, shop}} {
		parts := search(order...)
		resp := query.PackAll(parts, req, nil)
		if got := top(resp); got != "acme/billing:invoice/tax.go" || !slices.Equal(repos(resp.Files), []string{"acme/billing", "acme/billing", "acme/shop"}) {
			t.Errorf("parts %s, %s: files %+v, want billing's two before shop's cart", order[0].Meta.Repo, order[1].Meta.Repo, resp.Files)
		}
		// The symbols reported are those billing's lookups found, not
		// the first part's.
		if !slices.Equal(resp.Symbols, []string{"invoice"}) {
			t.Errorf("parts %s, %s: symbols %v, want billing's [invoice]", order[0].Meta.Repo, order[1].Meta.Repo, resp.Symbols)
		}
		if len(resp.Chunks) == 0 || resp.Chunks[0].Repo != "acme/billing" {
			t.Errorf("parts %s, %s: the pack does not start with billing's code: %+v", order[0].Meta.Repo, order[1].Meta.Repo, resp.Chunks)
		}
	}
	score := req
	score.Merge = query.MergeScore
	// The fused scores alone put shop's cart between billing's two files:
	// each repository's files are scored on its own scale.
	if fs := query.PackAll(search(shop, billing), score, nil).Files; len(fs) < 3 || fs[1].Repo != "acme/shop" {
		t.Errorf("merge %q: files %+v, want shop's cart second", query.MergeScore, fs)
	}
	for _, m := range []string{"", "score", "gate:0", "gate:2"} {
		if err := query.CheckMerge(m); err != nil {
			t.Errorf("CheckMerge(%q) = %v", m, err)
		}
	}
	for _, m := range []string{"gated", "gate:", "gate:-1", "gate:NaN", "gate:1e9"} {
		if err := query.CheckMerge(m); err == nil {
			t.Errorf("CheckMerge(%q) = nil", m)
		}
	}
}

// TestMergeGatesAcross: a file another repository's top file pulled in
// across repositories (ExpandAcross) keeps its seed's weight, though its
// own repository matches none of the query's words: its gate is 0, and
// the file was scored 0 and left out of the pack.
func TestMergeGatesAcross(t *testing.T) {
	app := segOf(t, "app", map[string]string{"pay/charge.go": "package pay\n\n// ChargeCustomer charges a customer.\nfunc ChargeCustomer() {}\n"})
	lib := segOf(t, "lib", map[string]string{"round/round.go": "package round\n\n// HalfEven rounds.\nfunc HalfEven() {}\n"})
	links := func(repo, path string) []query.FileRef {
		if repo == "app" && path == "pay/charge.go" {
			return []query.FileRef{{Repo: "lib", Path: "round/round.go"}}
		}
		return nil
	}
	req := query.Request{Query: "charge customer", Route: true, Budget: 4000}
	parts := searchParts(t, req, app, lib)
	query.ExpandAcross(parts, req, links)
	resp := query.PackAll(parts, req, nil)
	if len(resp.Files) != 2 || resp.Files[0].Path != "pay/charge.go" || resp.Files[1].Path != "round/round.go" {
		t.Fatalf("files %+v, want app's charge.go, then lib's round.go", resp.Files)
	}
	if got, want := resp.Files[1].Score, resp.Files[0].Score/2; got != want {
		t.Errorf("lib's round.go scored %v, want half its seed's %v", got, want)
	}
	found := false
	for _, c := range resp.Chunks {
		found = found || c.Repo == "lib" && c.Path == "round/round.go"
	}
	if !found {
		t.Errorf("the pack has no lib:round/round.go: %+v", resp.Chunks)
	}
}
