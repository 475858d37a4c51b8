package api

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestSessionStubsNotSent: a chunk packed as a stub (signature and doc)
// is not recorded as sent, so a later query of the session that names it
// gets its body; the MCP search text names what it left out as sent.
// Stubs were recorded, and a query naming the function was told the
// agent already had it.
func TestSessionStubsNotSent(t *testing.T) {
	s := ledgerServer(t)
	ctx := context.Background()
	p := Principal{Tenant: "acme"}
	first, err := s.toolSearch(ctx, p, SearchInput{Query: "post a ledger entry", Repos: []string{"ledger"}, Budget: new(800), Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	var stub, whole string
	for _, c := range first.Chunks {
		if c.Stub && stub == "" {
			stub = c.Symbol
		} else if !c.Stub && whole == "" {
			whole = c.Symbol
		}
	}
	if stub == "" || whole == "" {
		t.Fatalf("the first search sent no stub or no whole chunk: %+v", first.Chunks)
	}
	// Naming both: the stub's body comes now, the whole chunk is named
	// as sent, at the head of the text a model reads.
	second, err := s.toolSearch(ctx, p, SearchInput{Query: stub + " " + whole, Repos: []string{"ledger"}, Budget: new(4000), Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	var got bool
	for _, c := range second.Chunks {
		if c.Symbol == stub && !c.Stub {
			got = true
		}
	}
	for _, prov := range second.AlreadySent {
		if strings.Contains(prov, ":post"+strings.TrimPrefix(stub, "PostLedger")+".go#L3-") {
			t.Errorf("the stub %s is named as already sent: %v", stub, second.AlreadySent)
		}
	}
	if !got {
		t.Errorf("the second search did not send %s whole: %+v", stub, second.Chunks)
	}
	if len(second.AlreadySent) == 0 || !strings.HasPrefix(second.text(), "// already sent in this session") || !strings.Contains(second.text(), second.AlreadySent[0]) {
		t.Errorf("already sent %v; text begins %.200q", second.AlreadySent, second.text())
	}
}

// ledgerServer serves acme's repository ledger: eight files of one
// function each, PostLedger0..7, about 300 tokens each.
func ledgerServer(t *testing.T) *Server {
	files := map[string]string{}
	for i := range 8 {
		var body strings.Builder
		for j := range 30 {
			fmt.Fprintf(&body, "\ttotal += amount * %d // ledger posting step %d\n", j+1, j)
		}
		files[fmt.Sprintf("post%d.go", i)] = fmt.Sprintf("package ledger\n\n// PostLedger%d posts a ledger entry of the amount.\nfunc PostLedger%d(amount int) int {\n\ttotal := 0\n%s\treturn total\n}\n", i, i, body.String())
	}
	return serveRepo(t, "ledger", files)
}

// TestRecallLatestQueryFirst: "the function we looked at before" brings
// back the latest query's chunks in the order it ranked them, without
// the history block of other files: it began with the last query's
// weakest chunk, under commits of files the answer did not hold.
func TestRecallLatestQueryFirst(t *testing.T) {
	s := ledgerServer(t)
	ctx := context.Background()
	p := Principal{Tenant: "acme"}
	if _, err := s.toolSearch(ctx, p, SearchInput{Query: "PostLedger5", Repos: []string{"ledger"}, Budget: new(700), Session: "r"}); err != nil {
		t.Fatal(err)
	}
	last, err := s.toolSearch(ctx, p, SearchInput{Query: "PostLedger3", Repos: []string{"ledger"}, Budget: new(700), Session: "r"})
	if err != nil {
		t.Fatal(err)
	}
	var top string
	for _, c := range last.Chunks {
		if !c.Stub {
			top = c.Provenance
			break
		}
	}
	again, err := s.toolSearch(ctx, p, SearchInput{Query: "the function we looked at before", Repos: []string{"ledger"}, Budget: new(4000), Session: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if again.Trigger != "TEMPORAL_HISTORY" || len(again.Chunks) == 0 || again.Chunks[0].Provenance != top || len(again.Commits) != 0 {
		t.Errorf("recall: trigger %s, first chunk %+v, %d commits; want %s first and no commits", again.Trigger, again.Chunks, len(again.Commits), top)
	}
}

// TestSessionOutlineNotMembers: a class sent as an outline (its methods
// cut to their declarations) does not count as sending its methods, so a
// later query of the session that names one gets its body. The outline's
// span covered the methods' lines, and the method was named as already
// sent.
func TestSessionOutlineNotMembers(t *testing.T) {
	var body strings.Builder
	for j := range 40 {
		fmt.Fprintf(&body, "        part = part + %d  # walk the payload, step %d\n", j, j)
	}
	src := "class Message:\n    \"\"\"A mail message.\"\"\"\n\n" +
		"    def get_payload(self, i=None):\n        part = 0\n" + body.String() + "        return part\n\n" +
		"    def set_payload(self, payload):\n        self._payload = payload\n\n" +
		"    def attach(self, payload):\n        self._payload.append(payload)\n"
	s := serveRepo(t, "mail", map[string]string{"email/message.py": src})
	ctx := context.Background()
	p := Principal{Tenant: "acme"}
	first, err := s.toolSearch(ctx, p, SearchInput{Query: "class Message", Repos: []string{"mail"}, Budget: new(200), Session: "o"})
	if err != nil {
		t.Fatal(err)
	}
	outlined := false
	for _, c := range first.Chunks {
		if c.Symbol == "Message" && !c.Stub {
			outlined = strings.Contains(first.Context, "def get_payload(self, i=None):") && !strings.Contains(first.Context, "step 39")
		}
		if strings.HasSuffix(c.Symbol, "get_payload") && !c.Stub {
			t.Fatalf("the first search sent get_payload whole: %+v", first.Chunks)
		}
	}
	if !outlined {
		t.Fatalf("the first search sent no outline of Message: %+v\n%s", first.Chunks, first.Context)
	}
	second, err := s.toolSearch(ctx, p, SearchInput{Query: "Message.get_payload", Repos: []string{"mail"}, Budget: new(4000), Session: "o"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(second.Context, "step 39") {
		t.Errorf("get_payload's body was not sent; already sent %v, chunks %+v", second.AlreadySent, second.Chunks)
	}
	// The same outline again is still left out.
	third, err := s.toolSearch(ctx, p, SearchInput{Query: "class Message", Repos: []string{"mail"}, Budget: new(4000), Session: "o"})
	if err != nil {
		t.Fatal(err)
	}
	if len(third.AlreadySent) == 0 || !strings.Contains(strings.Join(third.AlreadySent, " "), "email/message.py#L1-") {
		t.Errorf("the outline sent before is not named as sent: %v", third.AlreadySent)
	}
}
