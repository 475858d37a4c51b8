package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"codectx/pkg/api"
	"codectx/pkg/query"
)

func postQuery(t *testing.T, url string, req api.QueryRequest) query.Response {
	t.Helper()
	body, _ := json.Marshal(req)
	resp, err := http.Post(url+"/v1/query", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out query.Response
	if resp.StatusCode != http.StatusOK {
		var eb api.ErrorBody
		json.NewDecoder(resp.Body).Decode(&eb)
		t.Fatalf("query %q: HTTP %d %s", req.Query, resp.StatusCode, eb.Error)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func overlaps(a, b query.Chunk) bool {
	return a.Repo == b.Repo && a.Path == b.Path && a.Commit == b.Commit && a.StartLine <= b.EndLine && b.StartLine <= a.EndLine
}

// TestSessionDoesNotResend: the second query of a session gets none of the
// chunks the first was sent, names them instead and reports the tokens
// saved; without the session the same query would have resent them.
func TestSessionDoesNotResend(t *testing.T) {
	srv := httptest.NewServer((&api.Server{Store: shopStore(t), Routes: api.QueryRoutes}).Handler())
	defer srv.Close()
	ask := func(q, sess string) query.Response {
		return postQuery(t, srv.URL, api.QueryRequest{Tenant: "acme", Repos: []string{"*"}, Query: q, Budget: 4000, Session: sess})
	}
	first := ask("how is the cart total computed from prices", "s1")
	if len(first.Chunks) == 0 || first.TokensSaved != 0 || len(first.AlreadySent) != 0 {
		t.Fatalf("first query: %d chunks, saved %d", len(first.Chunks), first.TokensSaved)
	}
	fresh := ask("price lookup of a SKU in the cart total", "")
	second := ask("price lookup of a SKU in the cart total", "s1")
	resent := 0
	for _, c := range fresh.Chunks {
		for _, f := range first.Chunks {
			if overlaps(c, f) {
				resent++
			}
		}
	}
	if resent == 0 {
		t.Fatal("test is void: without a session the second query shares no chunk with the first")
	}
	for _, c := range second.Chunks {
		for _, f := range first.Chunks {
			if overlaps(c, f) {
				t.Errorf("second query resent %s (first sent %s)", c.Provenance, f.Provenance)
			}
		}
	}
	if len(second.AlreadySent) == 0 || second.TokensSaved <= 0 {
		t.Fatalf("second query: already_sent %v, tokens_saved %d; want them named and counted", second.AlreadySent, second.TokensSaved)
	}
	want := 0
	for _, f := range first.Chunks {
		for _, p := range second.AlreadySent {
			if p == f.Provenance {
				want += f.Tokens
			}
		}
	}
	if second.TokensSaved != want {
		t.Errorf("tokens_saved %d, want %d (the first pack's tokens of the chunks named)", second.TokensSaved, want)
	}
	// Another session, or another tenant's same id, starts empty.
	if other := ask("how is the cart total computed from prices", "s2"); other.TokensSaved != 0 {
		t.Errorf("session s2 saved %d tokens: sessions leak", other.TokensSaved)
	}

	// "The function we looked at before" reads the session: the chunks it
	// was sent come back first.
	back := ask("show me the function we looked at before", "s1")
	if back.Trigger != "TEMPORAL_HISTORY" {
		t.Fatalf("trigger %s, want TEMPORAL_HISTORY", back.Trigger)
	}
	if len(back.Chunks) == 0 || !hasSignal(back.Chunks, "session") {
		t.Fatalf("recall query: chunks %+v carry no session signal", back.Chunks)
	}
	sent := append(append([]query.Chunk{}, first.Chunks...), second.Chunks...)
	for _, c := range back.Chunks {
		if !hasSignal([]query.Chunk{c}, "session") {
			continue
		}
		found := false
		for _, s := range sent {
			found = found || overlaps(c, s)
		}
		if !found {
			t.Errorf("recalled %s, which the session was never sent", c.Provenance)
		}
	}
	if _, err := (&api.Client{BaseURL: srv.URL}).Query(context.Background(), api.QueryRequest{Tenant: "acme", Repo: "shop", Query: "x", Session: "bad id!"}); err == nil {
		t.Error("a malformed session id was accepted")
	}
}

func hasSignal(cs []query.Chunk, sig string) bool {
	for _, c := range cs {
		for _, s := range c.Signals {
			if s == sig {
				return true
			}
		}
	}
	return false
}
