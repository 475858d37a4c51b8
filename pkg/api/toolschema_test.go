package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolSchemasAgreeWithTools: each MCP tool's input schema says what
// the tool checks, no more. Arguments the schema refuses are refused by
// the SDK, naming the argument, and by the tool's own checks too when it
// is called without the schema, so the schema is not stricter than the
// tool; arguments it accepts are answered over MCP, not refused.
func TestToolSchemasAgreeWithTools(t *testing.T) {
	ctx := context.Background()
	store := manyRepos(t, "acme", 1, "package a\n\n// ParseToken parses.\nfunc ParseToken() {}\n\nfunc use() { ParseToken() }\n")
	s := &Server{Store: store}
	p := Principal{Tenant: "acme"}
	cs := InMemoryTools(ctx, t, s.MCPServer(p))

	direct := map[string]func(json.RawMessage) error{
		"search":     directly(ctx, p, s.toolSearch),
		"symbol":     directly(ctx, p, s.toolSymbol),
		"references": directly(ctx, p, s.toolReferences),
		"impact":     directly(ctx, p, s.toolImpact),
		"read":       directly(ctx, p, s.toolRead),
		"repos":      directly(ctx, p, s.toolRepos),
	}
	many := `"r00"` + strings.Repeat(`,"r00"`, maxRepos)
	langs := `"go"` + strings.Repeat(`,"go"`, maxLanguages)
	for _, c := range []struct {
		tool, args string
		valid      bool
	}{
		{"search", `{"query":"ParseToken"}`, true},
		{"search", `{"query":"ParseToken","repos":["*","r00"],"budget":1,"languages":["go"],"session":"s-1"}`, true},
		{"search", `{"query":" parse ","budget":100000,"tenant":"acme","languages":[]}`, true},
		{"search", `{"query":"ParseToken","budget":null}`, true},
		{"search", `{"query":"ParseToken","repo":"r00"}`, true},
		{"search", `{"query":"ParseToken","repo":"*","repos":["r00"]}`, true},
		{"search", `{"query":"x","repo":"../r00"}`, false},
		{"search", `{}`, false},
		{"search", `{"query":""}`, false},
		{"search", `{"query":" \t\u3000"}`, false},
		{"search", `{"query":"x","budget":0}`, false},
		{"search", `{"query":"x","budget":100001}`, false},
		{"search", `{"query":"x","budget":1.5}`, false},
		{"search", `{"query":"x","languages":["golang"]}`, false},
		{"search", `{"query":"x","languages":[` + langs + `]}`, false},
		{"search", `{"query":"x","session":"a b"}`, false},
		{"search", `{"query":"x","session":"` + strings.Repeat("s", 129) + `"}`, false},
		{"search", `{"query":"x","repos":["../r00"]}`, false},
		{"search", `{"query":"x","repos":["*",".."]}`, false},
		{"search", `{"query":"x","repos":[` + many + `]}`, false},
		{"search", `{"query":"x","tenant":"a b"}`, false},
		{"symbol", `{"name":"ParseToken"}`, true},
		{"symbol", `{"name":" ParseToken ","repos":["r00"]}`, true},
		{"symbol", `{"name":"ParseToken","repo":"r00"}`, true},
		{"symbol", `{"name":"ParseToken","repo":"a//b"}`, false},
		{"symbol", `{"name":""}`, false},
		{"symbol", `{"name":"  "}`, false},
		{"symbol", `{"name":"ParseToken","repos":["a//b"]}`, false},
		{"symbol", `{"name":"ParseToken","budget":1}`, true},
		{"symbol", `{"name":"ParseToken","budget":0}`, false},
		{"symbol", `{"name":"ParseToken","budget":100001}`, false},
		{"references", `{"name":"ParseToken"}`, true},
		{"references", `{"path":"a.go","repos":["r00"]}`, true},
		{"references", `{"name":"ParseToken","repo":"r00"}`, true},
		{"references", `{"name":"ParseToken","repo":".."}`, false},
		{"references", `{"name":"ParseToken","tenant":"../t"}`, false},
		{"references", `{"name":"ParseToken","repos":[""]}`, false},
		{"references", `{"name":"ParseToken","limit":1}`, true},
		{"references", `{"name":"ParseToken","limit":200.0}`, true},
		{"references", `{"name":"ParseToken","limit":0}`, true},
		{"references", `{"name":"ParseToken","limit":201}`, false},
		{"references", `{"name":"ParseToken","limit":-1}`, false},
		{"references", `{"name":"ParseToken","limit":1.5}`, false},
		{"impact", `{"name":"ParseToken","limit":500}`, true},
		{"impact", `{"name":"ParseToken","limit":501}`, false},
		{"impact", `{"name":"ParseToken","limit":-1}`, false},
		{"impact", `{"path":"a.go","repo":"r00","depth":6}`, true},
		{"impact", `{"name":"ParseToken","depth":0,"repo":""}`, true},
		{"impact", `{"name":"ParseToken","depth":7}`, false},
		{"impact", `{"name":"ParseToken","depth":-1}`, false},
		{"impact", `{"name":"ParseToken","repo":"a b"}`, false},
		{"read", `{"repo":"r00","path":"a.go"}`, true},
		{"read", `{"repo":"r00","path":"./a.go","start_line":0,"end_line":0}`, true},
		{"read", `{"repo":"r00","path":"a.go","start_line":2,"end_line":3}`, true},
		{"read", `{"path":"a.go"}`, false},
		{"read", `{"repo":"","path":"a.go"}`, false},
		{"read", `{"repo":"r00","path":""}`, false},
		{"read", `{"repo":"r00","path":"a.go","start_line":-1}`, false},
		{"read", `{"repo":"r00","path":"a.go","end_line":-1}`, false},
		{"read", `{"repo":"*","path":"a.go"}`, false},
		{"read", `{"repo":"r00@","path":"a.go"}`, false},
		{"read", `{"repo":"r00@a b","path":"a.go"}`, false},
		{"repos", `{}`, true},
		{"repos", `{"tenant":"acme"}`, true},
		{"repos", `{"tenant":"a/b"}`, false},
	} {
		var args map[string]any
		if err := json.Unmarshal([]byte(c.args), &args); err != nil {
			t.Fatalf("%s %s: %v", c.tool, c.args, err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s %.80s: %v", c.tool, c.args, err)
		}
		answer := ToolText(res)
		if c.valid {
			if res.IsError {
				t.Errorf("%s %.80s: the schema accepts it; want it answered, got: %s", c.tool, c.args, answer)
			}
			continue
		}
		if !res.IsError || !strings.HasPrefix(answer, "invalid arguments: ") {
			t.Errorf("%s %.80s: the schema should refuse it; answered %.200s", c.tool, c.args, answer)
		}
		if err := direct[c.tool](json.RawMessage(c.args)); err == nil {
			t.Errorf("%s %.80s: the schema refuses it, the tool alone answers it", c.tool, c.args)
		}
	}
}

// TestToolSchemasServed: tools/list serves the rules, and no input
// schema has anyOf, oneOf or allOf at its top, which several MCP clients
// refuse in a tool.
func TestToolSchemasServed(t *testing.T) {
	ctx := context.Background()
	cs := InMemoryTools(ctx, t, (&Server{Store: manyRepos(t, "acme", 1, "package a\n")}).MCPServer(Principal{Tenant: "acme"}))
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 6 {
		t.Fatalf("%d tools, want 6", len(list.Tools))
	}
	for _, tool := range list.Tools {
		var s map[string]any
		b, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			if s[k] != nil {
				t.Errorf("%s: input schema has %s at its top", tool.Name, k)
			}
		}
		tenant, _ := s["properties"].(map[string]any)["tenant"].(map[string]any)
		if tenant["pattern"] != orDefault {
			t.Errorf("%s: tenant argument %v, want the tenant pattern", tool.Name, tenant)
		}
	}
}

// directly calls a tool's method with args decoded as its argument type,
// without the input schema.
func directly[In, Out any](ctx context.Context, p Principal, f func(context.Context, Principal, In) (Out, error)) func(json.RawMessage) error {
	return func(args json.RawMessage) error {
		var in In
		if err := json.Unmarshal(args, &in); err != nil {
			return err
		}
		_, err := f(ctx, p, in)
		return err
	}
}

// TestReadProvenance: read takes the parts of a provenance as search
// gives them, repo@commit and path#Lstart-Lend, and returns those lines;
// a commit that is not the indexed one is refused, saying which is.
func TestReadProvenance(t *testing.T) {
	ctx := context.Background()
	s := &Server{Store: manyRepos(t, "acme", 1, "package a\n\n// ParseToken parses.\nfunc ParseToken() {}\n\nfunc use() { ParseToken() }\n")}
	s.init()
	p := Principal{Tenant: "acme"}
	found, err := s.toolSymbol(ctx, p, SymbolInput{Name: "ParseToken"})
	if err != nil || len(found.Definitions) != 1 {
		t.Fatalf("symbol: %+v, %v", found, err)
	}
	prov := found.Definitions[0].Provenance // r00@COMMIT:a.go#L3-4
	repo, path, _ := strings.Cut(prov, ":")
	out, err := s.toolRead(ctx, p, ReadInput{Repo: repo, Path: path})
	if err != nil || out.Provenance != prov || out.Text != "// ParseToken parses.\nfunc ParseToken() {}\n" {
		t.Fatalf("read %s %s = %+v, %v; want the lines of %s", repo, path, out, err, prov)
	}
	name, _, _ := strings.Cut(repo, "@")
	for _, c := range []struct{ repo, path, want string }{
		{name + "@0123abcd", "a.go", "is indexed at"},
		{name, "a.go#L4-3", "want path#Lstart-Lend"},
		{name, "a.go#Lx", `no file "a.go#Lx" in r00 at worktree-`}, // a name may hold "#L"
		{name, "a.go#Lx", "path#Lstart-Lend reads lines"},
	} {
		if _, err := s.toolRead(ctx, p, ReadInput{Repo: c.repo, Path: c.path}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("read %s %s: %v, want an error with %q", c.repo, c.path, err, c.want)
		}
	}
	// A whole provenance copied into path: read, references and impact
	// take it (each answered "no file" or "not found").
	for _, r := range []string{name, ""} {
		out, err := s.toolRead(ctx, p, ReadInput{Repo: r, Path: prov})
		if err != nil || out.Provenance != prov {
			t.Errorf("read %q %s = %+v, %v", r, prov, out, err)
		}
	}
	if _, err := s.toolRead(ctx, p, ReadInput{Repo: "other", Path: prov}); err == nil || !strings.Contains(err.Error(), "is of repository "+name+", not other") {
		t.Errorf("read of another repository's provenance: %v", err)
	}
	for _, path := range []string{prov, "a.go#L3-4", "a.go"} {
		refs, err := s.toolReferences(ctx, p, ReferencesInput{Path: path})
		if err != nil || !refs.found {
			t.Errorf("references of %s: %+v, %v", path, refs, err)
		}
		imp, err := s.toolImpact(ctx, p, ImpactInput{Path: path})
		if err != nil || len(imp.Targets) != 1 {
			t.Errorf("impact of %s: %+v, %v", path, imp, err)
		}
	}
	if _, err := s.toolImpact(ctx, p, ImpactInput{Repo: "other", Path: prov}); err == nil || !strings.Contains(err.Error(), "not other") {
		t.Errorf("impact of another repository's provenance: %v", err)
	}
}

// TestPlainRefusal: the SDK's refusals of a call's arguments read plainly.
func TestPlainRefusal(t *testing.T) {
	for in, want := range map[string]string{
		`validating "arguments": validating root: validating /properties/budget: minimum: 0/1 is less than 1.000000`:       "invalid arguments: argument budget: minimum: 0 is less than 1",
		`validating "arguments": validating root: validating /properties/depth: maximum: 10/1 is greater than 6.000000`:    "invalid arguments: argument depth: maximum: 10 is greater than 6",
		`validating "arguments": validating root: required: missing properties: ["repo"]`:                                  `invalid arguments: required: missing properties: ["repo"]`,
		`validating "arguments": validating root: validating /properties/repo: pattern: "a/1" does not match regular expr`: `invalid arguments: argument repo: pattern: "a/1" does not match regular expr`,
		`repository acme/x is not indexed`:                                                                               `repository acme/x is not indexed`,
		`validating "arguments": validating root: unexpected additional properties ["rpeo"]`:                             `invalid arguments: unknown arguments "rpeo"`,
		`validating "arguments": validating root: unexpected additional properties ["a" "b\"c" "d" "e" "f" "g" "h"]`:     `invalid arguments: unknown arguments "a", "b\"c", "d", "e", "f", and 2 more`,
		`validating "arguments": validating root: unexpected additional properties ["` + strings.Repeat("x", 300) + `"]`: `invalid arguments: unknown arguments "` + strings.Repeat("x", 64) + `"... (300 bytes)`,
	} {
		if got := plainRefusal(in); got != want {
			t.Errorf("plainRefusal(%q) = %q, want %q", in, got, want)
		}
	}
	// A bad value is quoted in full by the validator: the refusal is cut.
	long := `validating "arguments": validating root: validating /properties/budget: type: "` + strings.Repeat("é", 100000) + `" has type "string", want one of "integer"`
	if got := plainRefusal(long); len(got) > 1100 || !strings.HasPrefix(got, `invalid arguments: argument budget: type: "éé`) || !strings.HasSuffix(got, fmt.Sprintf("... (%d bytes)", len(long)-len(`validating "arguments": validating root: `))) || !utf8.ValidString(got) {
		t.Errorf("plainRefusal of a 200 KB value: %d bytes, %q...", len(got), got[:min(len(got), 80)])
	}
}
