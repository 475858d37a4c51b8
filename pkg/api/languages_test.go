package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The languages a query restricts its results to were bounded only by the
// body: each repository's search builds a set of them, so one MCP search
// naming 90,000 distinct languages (650 KB) over 13 repositories took 178
// ms, against 68 ms for the same body refused before the search (the MCP
// library's decoding) and 6.5 ms without them, for the same charge to the
// tenant's rate: about 8 ms per repository, 8 s for the 1000 a query may
// name. At most maxLanguages now (there are 9): 400 naming the limit, or
// an MCP tool error from the search tool's input schema naming the
// argument; every real language still filters.
func TestLanguagesBounded(t *testing.T) {
	const repos = 1 + 3*reposPerToken
	store := manyRepos(t, "", repos, "package a\n\n// ParseToken parses.\nfunc ParseToken() {}\n")
	ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes})
	mcpHdr := map[string]string{"Accept": "application/json, text/event-stream"}
	var b strings.Builder
	for i := range 90000 {
		fmt.Fprintf(&b, `"%x",`, i)
	}
	many := b.String() + `"go"`
	over := `"` + strings.Repeat(`a","`, maxLanguages) + `go"`
	all := `"go","python","typescript","tsx","javascript","java","rust","markdown","text"`
	for _, c := range []struct {
		name, path, body string
		code             int
		want             string
	}{
		{"query, every language", "/v1/query", `{"repos":["*"],"query":"ParseToken","languages":[` + all + `]}`, 200, "ParseToken"},
		{"query, python only", "/v1/query", `{"repos":["*"],"query":"ParseToken","languages":["python"]}`, 200, `"chunks":[]`},
		{"query, one past the limit", "/v1/query", `{"repos":["*"],"query":"ParseToken","languages":[` + over + `]}`, 400, "at most 32"},
		{"MCP, every language", "/v1/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"query":"ParseToken","languages":[` + all + `]}}}`, 200, "ParseToken parses"},
		{"MCP, 90,000 languages", "/v1/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"query":"ParseToken","languages":[` + many + `]}}}`, 200, "invalid arguments: argument languages"},
	} {
		start := time.Now()
		code, _, body := do(t, "POST", ts.URL+c.path, "application/json", c.body, mcpHdr)
		took := time.Since(start)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s = %d %.200s, want %d with %q", c.name, code, body, c.code, c.want)
		}
		if code != http.StatusOK || strings.Contains(body, "at most") {
			t.Logf("%s: %d in %v", c.name, code, took)
		}
	}
}
