package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"codectx/pkg/index"
)

// TestRequestSchemasAgreeWithServer: a request body the document's schema
// calls valid is not refused as malformed (400), and one it calls invalid
// is refused (4xx), against a real server. The API's fuzz generates from
// these schemas, so a rule the server does not hold would fail it, and a
// missing one would keep it from the handlers' work.
func TestRequestSchemasAgreeWithServer(t *testing.T) {
	_, hs, doc, admin, operator := docServer(t)
	long := strings.Repeat("a", 201)
	rev256, rev257 := strings.Repeat("f", 256), strings.Repeat("f", 257)
	stars := func(n int) string { return strings.TrimSuffix(strings.Repeat(`"*",`, n), ",") }
	cases := []struct {
		path, key, body string
	}{
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"cart total"}`},
		{"/v1/query", admin, `{"tenant":"acme","repos":["shop","billing"],"query":"cart total","budget":1}`},
		{"/v1/query", admin, `{"tenant":"acme","repos":["*"],"query":"cart total","budget":1000000}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"*","query":"cart total"}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","repos":[],"query":"cart total"}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"x","arms":["bm25","symbol"],"languages":["go","text"],"no_route":true,"session":"s-1_A"}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"x","arms":null,"languages":null,"repos":null}`},
		{"/v1/query", admin, `{"tenant":null,"repo":"*","query":"x","budget":null,"session":null,"no_route":null}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"x","budget":39594.0}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"x","budget":1.5}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":null}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":".github","query":"x"}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"a.b/c-d_e","query":"x"}`},
		{"/v1/query", admin, `{"tenant":"acme","query":"cart total"}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"","query":"cart total"}`},
		{"/v1/query", admin, `{"tenant":"acme","repos":[],"query":"cart total"}`},
		{"/v1/query", admin, `{"tenant":"acme","repos":[""],"query":"cart total"}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":""}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":" \t\u3000\u00a0"}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"\u001c"}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"x","budget":0}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"x","budget":-1}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"x","budget":1000001}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"x","arms":["dense"]}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"x","arms":["bm26"]}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"x","languages":["golang"]}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"x","session":"a b"}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"x","session":"` + strings.Repeat("s", 129) + `"}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"a..b","query":"x"}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"a/./b","query":"x"}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"/shop","query":"x"}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"` + long + `","query":"x"}`},
		{"/v1/query", admin, `{"tenant":"acme/x","repo":"shop","query":"x"}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","query":"x","extra":1}`},
		{"/v1/query", admin, `{"tenant":"acme","repo":"shop","repos":[` + stars(1000) + `],"query":"x"}`},
		{"/v1/query", admin, `{"tenant":"acme","repos":[` + stars(1001) + `],"query":"x"}`},
		{"/v1/query", admin, `{"tenant":"acme","repos":["*","a..b"],"query":"x"}`},
		{"/v1/impact", admin, `{"tenant":"acme","name":"VATLine","depth":6}`},
		{"/v1/impact", admin, `{"tenant":"acme","path":"tax/tax.go","depth":0,"repos":["*"]}`},
		{"/v1/impact", admin, `{"tenant":"acme","name":"VATLine","path":""}`},
		{"/v1/impact", admin, `{"tenant":"acme","name":"VATLine","path":"tax/tax.go"}`},
		{"/v1/impact", admin, `{"tenant":"acme","name":""}`},
		{"/v1/impact", admin, `{"tenant":"acme","name":"VATLine","depth":7}`},
		{"/v1/impact", admin, `{"tenant":"acme","name":"VATLine","depth":2.0}`},
		{"/v1/impact", admin, `{"tenant":"acme","name":"VATLine","depth":2.5}`},
		{"/v1/impact", admin, `{"tenant":"acme","name":"VATLine","depth":-1}`},
		{"/v1/impact", admin, `{"tenant":"acme","name":"VATLine","repo":"*"}`},
		{"/v1/impact", operator, `{"tenant":"a..b","name":"VATLine"}`},
		{"/v1/references", admin, `{"tenant":"acme","name":"VATLine","repos":["shop","*"]}`},
		{"/v1/references", admin, `{"tenant":"acme"}`},
		{"/v1/references", admin, `{"tenant":"acme","name":"VATLine","repos":["a..b"]}`},
		{"/v1/references", admin, `{"tenant":"acme","name":"VATLine","repos":["*","` + long + `"]}`},
		{"/v1/impact", admin, `{"tenant":"acme","name":"VATLine","repos":[` + stars(1001) + `]}`},
		{"/v1/impact", admin, `{"tenant":"acme","name":"VATLine","repos":[` + stars(1000) + `]}`},
		{"/v1/index", admin, `{"tenant":"acme","location":"https://example.com/acme/shop.git","commit":"main"}`},
		{"/v1/index", admin, `{"tenant":"acme","location":"https://example.com/acme/shop.git","commit":"` + rev256 + `"}`},
		{"/v1/index", admin, `{"tenant":"acme","location":"https://example.com/acme/shop.git","commit":"` + rev257 + `"}`},
		{"/v1/index", admin, `{"tenant":"acme","location":"https://example.com/acme/shop.git","commit":"a b"}`},
		{"/v1/index", admin, `{"tenant":"acme","location":"https://example.com/acme/shop.git","commit":"HEAD~2\n"}`},
		{"/v1/index", admin, `{"tenant":"acme","location":""}`},
		{"/v1/index", admin, `{"tenant":"acme","location":"https://example.com/acme/shop.git","repo":"a/../b"}`},
	}
	schemas := map[string]string{"/v1/query": "api_QueryRequest", "/v1/impact": "api_ImpactInput",
		"/v1/references": "api_ReferencesInput", "/v1/index": "api_IndexRequest"}
	seen := map[string][2]int{} // valid, invalid cases per route
	for _, c := range cases {
		rs, err := doc.Components.Schemas[schemas[c.path]].Resolve(nil)
		if err != nil {
			t.Fatalf("%s: resolve: %v", c.path, err)
		}
		var v any
		if err := json.Unmarshal([]byte(c.body), &v); err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		verr := rs.Validate(v)
		code, body := postRaw(t, hs.URL+c.path, c.key, c.body)
		n := seen[c.path]
		switch {
		case verr == nil && code == http.StatusBadRequest:
			t.Errorf("%s %.300s: the schema accepts it, the server answers 400: %s", c.path, c.body, body)
		case verr != nil && code < 400:
			t.Errorf("%s %.300s: the schema refuses it (%v), the server answers %d", c.path, c.body, verr, code)
		}
		if verr == nil {
			n[0]++
		} else {
			n[1]++
		}
		seen[c.path] = n
	}
	for path, n := range seen {
		if n[0] == 0 || n[1] == 0 {
			t.Errorf("%s: %d valid and %d invalid cases; want some of each", path, n[0], n[1])
		}
	}
}

// TestNamePatterns: the document's patterns of tenant and repository names
// accept what index.ValidTenant and index.ValidName accept, and a query's
// pattern needs a character outside unicode.IsSpace, as the server trims.
func TestNamePatterns(t *testing.T) {
	_, _, doc, _, _ := docServer(t)
	type param struct {
		Name   string `json:"name"`
		Schema struct {
			Pattern   string `json:"pattern"`
			MaxLength int    `json:"maxLength"`
		} `json:"schema"`
	}
	var params, listing []param
	if err := json.Unmarshal(doc.Paths["/v1/repos/{tenant}/{repo}/status"]["get"]["parameters"], &params); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(doc.Paths["/v1/repos"]["get"]["parameters"], &listing); err != nil {
		t.Fatal(err)
	}
	for _, p := range listing {
		if p.Name == "tenant" {
			p.Name = "listing tenant" // empty is the default tenant
			params = append(params, p)
		}
	}
	valid := map[string]func(string) bool{"tenant": index.ValidTenant, "repo": index.ValidName,
		"listing tenant": func(s string) bool { return s == "" || index.ValidTenant(s) }}
	names := []string{"", "a", "acme", "A-Z_0.9", ".github", "a.", "a.b.c", "-x", "_", "..", ".", "a..b", "...", ".a.",
		"a/b", "a/.b", "a./b", "a/./b", "a/../b", "a/", "/a", "a//b", "a b", "a\x00", "é", "*",
		strings.Repeat("a", 200), strings.Repeat("a", 201), strings.Repeat("a/", 99) + "aa", strings.Repeat("a/", 100) + "a"}
	for _, p := range params {
		re := regexp.MustCompile(p.Schema.Pattern)
		for _, n := range names {
			doc := re.MatchString(n) && len([]rune(n)) <= p.Schema.MaxLength
			if want := valid[p.Name](n); doc != want {
				t.Errorf("%s %q: the document says valid=%v, the server %v", p.Name, n, doc, want)
			}
		}
	}
	q := doc.Components.Schemas["api_QueryRequest"].Properties["query"]
	re := regexp.MustCompile(q.Pattern)
	for r := rune(0); r < 0x10000; r++ {
		if r >= 0xd800 && r < 0xe000 {
			continue
		}
		if re.MatchString(string(r)) == unicode.IsSpace(r) {
			t.Errorf("query %U: the pattern matches it %v, unicode.IsSpace %v", r, re.MatchString(string(r)), unicode.IsSpace(r))
		}
	}
}

// TestBodyTypeErrors: a field of the wrong JSON type is named in the 400,
// with what was sent and what is wanted, on bodies decoded by readJSON
// and by their own UnmarshalJSON alike.
func TestBodyTypeErrors(t *testing.T) {
	_, hs, _, admin, _ := docServer(t)
	for _, c := range []struct{ path, body, want string }{
		{"/v1/query", `{"tenant":"acme","repo":true,"query":"x"}`, "bad request body: field repo: got a JSON bool, want a string"},
		{"/v1/query", `{"tenant":"acme","repos":[1],"query":"x"}`, "bad request body: field repos: got a JSON number, want a string"},
		{"/v1/impact", `{"tenant":"acme","name":"x","repo":{}}`, "bad request body: field repo: got a JSON object, want a string"},
		{"/v1/references", `{"tenant":"acme","name":["x"]}`, "bad request body: field name: got a JSON array, want a string"},
		// No Go type names: the whole body of another kind, a budget as
		// a string.
		{"/v1/query", `[]`, "bad request body: got a JSON array, want an object"},
		{"/v1/query", `{"tenant":"acme","repo":"r","query":"x","budget":"10"}`, "bad request body: field budget: got a JSON string, want a number"},
		// A budget or depth is a whole number in range.
		{"/v1/query", `{"tenant":"acme","repo":"shop","query":"x","budget":1.5}`, "bad request body: budget 1.5: want a whole number"},
		{"/v1/query", `{"tenant":"acme","repo":"shop","query":"x","budget":3e9}`, "bad request body: budget 3000000000: out of range"},
		{"/v1/impact", `{"tenant":"acme","name":"x","depth":-3e10}`, "bad request body: depth -30000000000: out of range"},
	} {
		code, body := postRaw(t, hs.URL+c.path, admin, c.body)
		var e struct{ Error string }
		json.Unmarshal(body, &e)
		if code != http.StatusBadRequest || e.Error != c.want {
			t.Errorf("%s %s: %d %q, want 400 %q", c.path, c.body, code, e.Error, c.want)
		}
	}
}
