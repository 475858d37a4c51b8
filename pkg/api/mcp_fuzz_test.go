package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"codectx/pkg/api"
	"codectx/pkg/index"
	"codectx/pkg/testrepo"
)

// Tenant beta's repository: betaName is its function's name, which the
// seeds ask for (and an error may echo back); betaSecret is in every
// chunk of it and in no argument, so no answer to acme may hold it.
const (
	betaName   = "BetaLedgerPost"
	betaSecret = "k7Qx2Vz9LedgerSecret"
)

// FuzzMCPTools calls the MCP tools as tenant acme with arguments an agent
// (or whoever holds acme's key) may send, over the SDK's in-memory
// transport as `codectx mcp` serves them: no call may panic (the SDK
// does not recover a tool's panic, so it ends the fuzz), hang or answer
// with tenant beta's code, names or repositories.
func FuzzMCPTools(f *testing.F) {
	store := shopStore(f)
	beta := testrepo.New(f)
	beta.Commit("initial", map[string]string{
		"ledger/ledger.go": "// Package ledger is beta's " + betaSecret + ".\npackage ledger\n\n// " + betaName + " posts an entry: " + betaSecret + ".\nfunc " + betaName + "(amount int) string { return \"" + betaSecret + "\" }\n",
		"cart.go":          "// " + betaSecret + "\npackage ledger\n\n// CartTotal is beta's " + betaSecret + ".\nfunc CartTotal() string { return \"" + betaSecret + "\" }\n",
	})
	ctx := context.Background()
	if _, err := index.Build(ctx, store, beta.Dir, index.Options{Tenant: "beta", Name: "shop"}); err != nil {
		f.Fatal(err)
	}
	cs := api.InMemoryTools(ctx, f, (&api.Server{Store: store}).MCPServer(api.Principal{Tenant: "acme"}))

	tools := []string{"search", "symbol", "references", "impact", "read", "repos"}
	for _, seed := range []struct {
		tool uint8
		args string
	}{
		{0, `{"query":"cart total","repos":["*"]}`},
		{0, `{"query":"` + betaName + `","tenant":"beta"}`},
		{0, `{"query":"CartTotal","repos":["shop","../beta/shop"],"budget":1,"languages":["go"],"session":"s1"}`},
		{1, `{"name":"VATLine"}`},
		{1, `{"name":"` + betaName + `","repos":["*"]}`},
		// beta's package as a qualifier, and a name of many parts.
		{1, `{"name":"ledger.` + betaName + `","repos":["*"]}`},
		{2, `{"name":"ledger.CartTotal"}`},
		{3, `{"name":"ledger.` + betaName + `","repo":"shop"}`},
		{1, `{"name":"a.b.c.d.e.f.g.h.i.j.k.CartTotal"}`},
		{2, `{"path":"tax/tax.go"}`},
		{2, `{"name":"CartTotal","repos":["shop"]}`},
		{3, `{"name":"VATLine","depth":6,"repo":"billing"}`},
		{3, `{"path":"./cart.go","repo":"shop/../../beta/shop"}`},
		{4, `{"repo":"shop","path":"cart.go","start_line":1,"end_line":5}`},
		{4, `{"repo":"shop","path":"../../beta/shop/cart.go"}`},
		{4, `{"repo":"billing","path":"tax/tax.go","start_line":2147483647,"end_line":-1}`},
		{5, `{}`},
		{5, `{"tenant":"*"}`},
	} {
		f.Add(seed.tool, seed.args)
	}
	f.Fuzz(func(t *testing.T, tool uint8, args string) {
		var m map[string]any
		if json.Unmarshal([]byte(args), &m) != nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		name := tools[int(tool)%len(tools)]
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: m})
		if cctx.Err() != nil {
			t.Fatalf("%s %s: no answer in 10 s", name, args)
		}
		if err != nil {
			return // a protocol error; a call its input schema refuses is a tool error, checked below
		}
		answer, _ := json.Marshal(res)
		if strings.Contains(string(answer), betaSecret) {
			t.Fatalf("%s %s: the answer holds tenant beta's code: %.300s", name, args, answer)
		}
	})
}
