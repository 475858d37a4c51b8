package api

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestSearchTextSaysWhy: a search that sends no code says why (nothing
// matched, nothing fit the budget, all of it sent before): its text was
// empty, and the dropped count was not in the output. The head of chunks
// sent before names at most maxSentNamed of them: a long session listed
// every one, 60 lines above a 200-token context.
func TestSearchTextSaysWhy(t *testing.T) {
	s := ledgerServer(t)
	ctx := context.Background()
	p := Principal{Tenant: "acme"}
	search := func(q string, budget int, session string) SearchOutput {
		t.Helper()
		out, err := s.toolSearch(ctx, p, SearchInput{Query: q, Repos: []string{"ledger"}, Budget: &budget, Session: session})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, c := range []struct {
		name, query string
		budget      int
		want        string
	}{
		{"nothing matched", "qwertyzzzz", 4000, "no code matched in ledger;"},
		{"nothing fit", "post a ledger entry", 1, "none within a budget of 1 tokens; ask again with a larger budget"},
	} {
		out := search(c.query, c.budget, "")
		if len(out.Chunks) != 0 || !strings.Contains(out.text(), c.want) {
			t.Errorf("%s: %d chunks, text %q; want it to say %q", c.name, len(out.Chunks), out.text(), c.want)
		}
		if c.budget == 1 && out.Dropped == 0 {
			t.Errorf("%s: dropped 0", c.name)
		}
	}
	// Everything relevant sent before: said so, under the names.
	search("PostLedger3", 8000, "s")
	again := search("PostLedger3", 8000, "s")
	if len(again.Chunks) != 0 || !strings.Contains(again.text(), "no new code: what matched was sent before in this session") {
		t.Errorf("all sent before: text %q", again.text())
	}

	// The head names ten chunks at most, then their count.
	o := SearchOutput{Context: "ctx\n", Chunks: []ChunkRef{{}}, TokensSaved: 99}
	for i := range 25 {
		o.AlreadySent = append(o.AlreadySent, fmt.Sprintf("r@c:f%d.go#L1-2", i))
	}
	text := o.text()
	if !strings.Contains(text, "f9.go") || strings.Contains(text, "f10.go") || !strings.Contains(text, "and 15 more (already_sent lists them)") || !strings.HasSuffix(text, "\nctx\n") {
		t.Errorf("head of 25 chunks sent before:\n%s", text)
	}
}
