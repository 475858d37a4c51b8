package api

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"codectx/pkg/codectx"
	"codectx/pkg/graph"
	"codectx/pkg/index"
	"codectx/pkg/pack"
	"codectx/pkg/query"
	"codectx/pkg/segment"
	"codectx/pkg/tokens"
	"codectx/pkg/webhook"
	"codectx/pkg/xrepo"
)

// Version is the program version the MCP server and /v1/openapi.json
// report; the binary sets it at start.
var Version = "dev"

// Principal is who calls the tools: the tenant of the API key (an
// operator's: the default tenant, unless a call names another), whether
// the key reaches every tenant (an operator's key, or an API without
// keys), and the bucket whose rate let the request in and pays for the
// repositories it reads.
type Principal struct {
	Tenant   string
	Operator bool
	// Payer is the rate bucket the calls are charged on: the key's
	// tenant, or an operator's own bucket, which no tenant can spend
	// (operatorBucket). "" = Tenant.
	Payer string
}

// payer is the bucket p's calls are charged on.
func (p Principal) payer() string {
	if p.Payer != "" {
		return p.Payer
	}
	return p.Tenant
}

// tenantFor returns the tenant a tool call acts for: the one asked (only
// an operator may name another than its own) or the caller's.
func (p Principal) tenantFor(asked string) (string, error) {
	if asked == "" || asked == p.Tenant {
		return p.Tenant, nil
	}
	if !p.Operator {
		return "", fmt.Errorf("this API key is not valid for tenant %q", asked)
	}
	if !index.ValidTenant(asked) {
		return "", fmt.Errorf("invalid tenant %q", asked)
	}
	return asked, nil
}

// Limits of the MCP tools' answers.
const (
	mcpDefaultBudget = 6000
	mcpMaxBudget     = 100_000
	maxDefinitions   = 20
	maxReferences    = 200
	maxImpact        = 500
	maxImpactDepth   = 6
	maxReadLines     = 2000
	maxReadBytes     = 256 << 10
	defaultReadLines = 400
)

// mcpHandler serves MCP over Streamable HTTP at /v1/mcp. Every request is
// authenticated with the tenant keys (Bearer), like the other routes; the
// server is stateless (no Mcp-Session-Id), so each request gets a server
// bound to its own key's tenant and a session can never outlive or cross
// a key. codectx's own sessions (the session argument) are not MCP
// sessions.
func (s *Server) mcpHandler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		p, ok := r.Context().Value(principalKey{}).(Principal)
		if !ok {
			return nil
		}
		return s.mcpServerFor(p)
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: s.limits.MCPBody, Logger: s.Log})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// principal has spent one request of its key's bucket (the tenant's, or the operators').
		p, ok := s.principal(w, r)
		if !ok {
			return
		}
		if r.Method == http.MethodPost && !s.mcpSingle(w, r) {
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

type principalKey struct{}

// maxMCPServers bounds the servers mcpServerFor keeps: one per caller
// (tenant, and whether an operator), a few KB each.
const maxMCPServers = 4096

// mcpServerFor returns the MCP server of p's requests, built on p's first
// one. A server holds only p and the tools bound to it, and each
// stateless request runs on a session of its own that closes with the
// request, so p's requests share it. Built per request, a server cost a
// /v1/mcp call 7 ms of its 8 (BenchmarkMCPCall): the SDK checks and
// re-encodes each tool's input schema as the tool is added.
func (s *Server) mcpServerFor(p Principal) *mcp.Server {
	s.mcpMu.Lock()
	defer s.mcpMu.Unlock()
	if srv := s.mcpServers[p]; srv != nil {
		return srv
	}
	if s.mcpServers == nil || len(s.mcpServers) >= maxMCPServers {
		s.mcpServers = map[Principal]*mcp.Server{}
	}
	srv := s.MCPServer(p)
	s.mcpServers[p] = srv
	return srv
}

// mcpSingle reads an MCP POST body (at most Limits.MCPBody) and refuses a
// JSON-RPC batch: the SDK runs every call of a batch at once and holds
// every answer until the last, so one request, one token of the tenant's
// rate, ran thousands of tool calls (a 1 MiB batch of read calls asked
// for tens of GB of heap). MCP dropped batches in 2025-06-18; the SDK
// still takes them from older clients. It writes the error answer and
// returns false when the request may not proceed; otherwise r.Body is
// the body read.
func (s *Server) mcpSingle(w http.ResponseWriter, r *http.Request) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.limits.MCPBody))
	if err != nil {
		bodyRefused(w, err, s.limits.MCPBody)
		return false
	}
	if rest := bytes.TrimLeft(body, " \t\r\n\f\v\ufeff"); len(rest) > 0 && rest[0] == '[' {
		writeError(w, http.StatusBadRequest, errors.New("JSON-RPC batches are not accepted: send one message per request"))
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// MCPServer returns an MCP server whose tools read the published indexes
// of the store on behalf of p. `codectx mcp --data` runs it over stdio;
// /v1/mcp builds one per request.
func (s *Server) MCPServer(p Principal) *mcp.Server {
	s.init()
	srv := mcp.NewServer(&mcp.Implementation{Name: "codectx", Title: "codectx code context", Version: Version}, &mcp.ServerOptions{
		SchemaCache: toolCache,
		Instructions: "codectx indexes the tenant's git repositories (symbols, BM25, an import/call/type graph). " +
			"Start with `search` for a task or question; use `symbol`, `references` and `impact` for exact navigation, " +
			"`read` for a file or line range at the indexed commit, `repos` to see what is indexed. " +
			"Every result names its source as repo@commit:path#Lstart-Lend.",
	})
	srv.AddReceivingMiddleware(plainRefusals)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)}
	mcp.AddTool(srv, &mcp.Tool{Name: "search", Title: "Search code", Annotations: ro, InputSchema: toolSchema[SearchInput](), Description: "Find the code relevant to a task or question and return it packed into a token budget. " +
		"Give the task in natural language, identifiers, or both (\"where is the retry backoff computed\", \"Router.Mount\"). " +
		"Searches one repository, a list, or all of the tenant's (\"*\", the default) in one ranking. " +
		"Returns the context text (chunks headed by repo@commit:path#Lstart-Lend) and the list of chunks. " +
		"A history question (\"what changed recently in the packer\", \"when was retry added\") also gets the commits that touched those files, at the head of the context. " +
		"A chunk whose header says stub has only its signature and doc comment: read its lines for the body. " +
		"Pass the same session id on later calls to get only chunks you were not already sent; those are named at the head of the text."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in SearchInput) (*mcp.CallToolResult, SearchOutput, error) {
			out, err := s.toolSearch(ctx, p, in)
			if err != nil {
				return nil, SearchOutput{}, err
			}
			return textResult(out.text()), out, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "symbol", Title: "Find a definition", Annotations: ro, InputSchema: toolSchema[SymbolInput](), Description: "Look up the definition of a symbol by name: a function, method, type, class or interface. " +
		"Accepts a short name (\"Mount\"), one qualified by its type (\"Router.Mount\", \"(*Router).Mount\", \"Flask.add_url_rule\") " +
		"or by its package or module (\"http.ListenAndServe\", \"http.Server.ListenAndServe\", \"json.loads\", \"email.utils.parseaddr\"); " +
		"a name in its own case wins over one in another (Handler, not handler, when both exist). " +
		"Returns each definition with its signature, doc comment, body and provenance."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in SymbolInput) (*mcp.CallToolResult, SymbolOutput, error) {
			out, err := s.toolSymbol(ctx, p, in)
			if err != nil {
				return nil, SymbolOutput{}, err
			}
			return textResult(out.text()), out, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "references", Title: "Find references", Annotations: ro, InputSchema: toolSchema[ReferencesInput](), Description: "Find who uses a symbol or a file: the functions that call it or reference its type, " +
		"and for a file the files that import or use it, each once with all the ways it does (via import,call). " +
		"Give name (a symbol, written as symbol takes it: Mount, Router.Mount, http.ListenAndServe, json.loads) or path (a file). " +
		"Resolved from the code graph, across repositories too: an import of a package another of the tenant's repositories provides " +
		"(Go module, npm package, Python distribution, Maven artifact, Cargo crate) reaches that repository's files. " +
		"A name that is ambiguous in a repository gives no edge there. " +
		"At most 200 are listed (limit lowers it); more counts the rest."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in ReferencesInput) (*mcp.CallToolResult, ReferencesOutput, error) {
			out, err := s.toolReferences(ctx, p, in)
			if err != nil {
				return nil, ReferencesOutput{}, err
			}
			return textResult(out.text()), out, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "impact", Title: "What a change affects", Annotations: ro, InputSchema: toolSchema[ImpactInput](), Description: "List the files that depend on a file or symbol, directly or transitively (imports, calls, type references): " +
		"what a change there may break, nearest first, in the target's repository and in the tenant's other repositories that import it " +
		"(Go module, npm package, Python distribution, Maven artifact, Cargo crate). " +
		"Give path (a file) or name (a symbol, written as symbol takes it: Mount, Router.Mount, http.ListenAndServe, json.loads), optionally repo (the target's repository), depth (hops, default 3) and limit (files listed, default and most 500; more counts the rest)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in ImpactInput) (*mcp.CallToolResult, ImpactOutput, error) {
			out, err := s.toolImpact(ctx, p, in)
			if err != nil {
				return nil, ImpactOutput{}, err
			}
			return textResult(out.text()), out, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "read", Title: "Read a file", Annotations: ro, InputSchema: toolSchema[ReadInput](), Description: "Read an indexed file, or a line range of it, exactly as it is at the indexed commit. " +
		"path is relative to the repository root, as search results name it. " +
		"Without a range, the first 400 lines; at most 2000 lines (and 256 KiB) per call: end_line says where the text ends."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, ReadOutput, error) {
			out, err := s.toolRead(ctx, p, in)
			if err != nil {
				return nil, ReadOutput{}, err
			}
			return textResult(out.Provenance + "\n" + out.Text), out, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "repos", Title: "List repositories", Annotations: ro, InputSchema: toolSchema[ReposInput](), Description: "List the indexed repositories of the tenant with the commit each is indexed at, " +
		"when it was indexed, how many files it has, and, by reason, the files it left out (skipped: read cannot give them) or indexed as line windows (degraded). " +
		"Use the names in the repos argument of the other tools."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in ReposInput) (*mcp.CallToolResult, ReposOutput, error) {
			out, err := s.toolRepos(ctx, p, in)
			if err != nil {
				return nil, ReposOutput{}, err
			}
			return nil, out, nil
		})
	return srv
}

// plainRefusals rewrites the SDK's refusal of a tool call's arguments
// into plainer words: under two layers of prefix, its validator printed
// a bound as "minimum: 0/1 is less than 1.000000".
func plainRefusals(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.CallToolResult); ok && err == nil && r.IsError {
			for _, c := range r.Content {
				if t, ok := c.(*mcp.TextContent); ok {
					t.Text = plainRefusal(t.Text)
				}
			}
		}
		return res, err
	}
}

var boundRE = regexp.MustCompile(`: (-?\d+)/1 is (less|greater) than (-?\d+)\.0+$`)

func plainRefusal(s string) string {
	rest, ok := strings.CutPrefix(s, `validating "arguments": `)
	if !ok {
		return s
	}
	rest = strings.TrimPrefix(rest, "validating root: ")
	if names, ok := strings.CutPrefix(rest, "unexpected additional properties "); ok {
		// It listed every unknown argument in full, however many and
		// long: a megabyte of them came back.
		return "invalid arguments: unknown arguments " + boundNames(names)
	}
	if len(rest) > maxRefusal {
		// The validator quotes a bad value in full: a 200 KB budget
		// string came back whole.
		rest = codectx.Clip(rest, maxRefusal) + fmt.Sprintf("... (%d bytes)", len(rest))
	}
	rest = strings.ReplaceAll(rest, "validating /properties/", "argument ")
	return "invalid arguments: " + boundRE.ReplaceAllString(rest, ": $1 is $2 than $3")
}

// maxRefusal bounds the validator's refusal of a call's arguments, in
// bytes; maxNamed is how many unknown arguments a refusal names.
const maxRefusal = 1024

// maxNamed is how many unknown arguments a refusal names.
const maxNamed = 5

var quotedRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// boundNames renders the SDK's list of quoted names (["a" "b"]) as at most
// maxNamed names, each quoted within webhook.Quote's bound, and a count of
// the rest.
func boundNames(list string) string {
	qs := quotedRE.FindAllString(list, -1)
	var out []string
	for i, q := range qs {
		if i == maxNamed {
			out = append(out, fmt.Sprintf("and %d more", len(qs)-maxNamed))
			break
		}
		name, err := strconv.Unquote(q)
		if err != nil {
			name = q
		}
		out = append(out, webhook.Quote(name))
	}
	return strings.Join(out, ", ")
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// SearchInput is the argument of the search tool.
type SearchInput struct {
	Query     string   `json:"query" jsonschema:"the task or question, in natural language and/or identifiers; at most 8 KiB unless the server sets another limit"`
	Repo      string   `json:"repo,omitempty" jsonschema:"one repository to search (as the other tools take it); searched with those of repos if both are given"`
	Repos     []string `json:"repos,omitempty" jsonschema:"repositories to search, as the repos tool names them; [\"*\"] (the default) searches all of the tenant's"`
	Budget    *int     `json:"budget,omitempty" jsonschema:"token budget of the packed context (o200k tokens), 1 to 100000; default 6000 when left out"`
	Languages []string `json:"languages,omitempty" jsonschema:"only chunks in these languages"`
	Session   string   `json:"session,omitempty" jsonschema:"an id you choose for this conversation: later searches with it do not resend chunks already sent and name them instead"`
	Tenant    string   `json:"tenant,omitempty" jsonschema:"tenant to act for; only an operator key may name another than its own"`
}

// ChunkRef is one chunk of a tool's answer.
type ChunkRef struct {
	Provenance string `json:"provenance" jsonschema:"repo@commit:path#Lstart-Lend"`
	Repo       string `json:"repo"`
	Path       string `json:"path"`
	StartLine  int    `json:"start_line"`
	EndLine    int    `json:"end_line"`
	Symbol     string `json:"symbol,omitempty"`
	Kind       string `json:"kind"`
	Tokens     int    `json:"tokens,omitempty"`
	Stub       bool   `json:"stub,omitempty" jsonschema:"only the chunk's signature and doc comment were sent: read its lines for the body"`
}

// SearchOutput is the structured answer of the search tool.
type SearchOutput struct {
	Context     string         `json:"context" jsonschema:"the packed context: chunks headed by their provenance"`
	Chunks      []ChunkRef     `json:"chunks"`
	Tokens      int            `json:"tokens"`
	Budget      int            `json:"budget"`
	Trigger     string         `json:"trigger" jsonschema:"how the query was read: EXPLICIT_SYMBOL, SEMANTIC_CONCEPT, TEMPORAL_HISTORY or IMPLICIT_CONTEXT"`
	Repos       []string       `json:"repos"`
	AlreadySent []string       `json:"already_sent,omitempty" jsonschema:"provenance of relevant chunks left out because this session was already sent them"`
	TokensSaved int            `json:"tokens_saved,omitempty" jsonschema:"tokens those chunks would have cost"`
	Dropped     int            `json:"dropped,omitempty" jsonschema:"relevant chunks left out for the budget"`
	Commits     []query.Commit `json:"commits,omitempty" jsonschema:"for a history question: the commits that touched the files of the answer, most relevant first (also at the head of the context)"`
}

// text is what a model reads of a search: the context, headed by the
// chunks left out because the session was sent them. Many clients show
// the model the text alone, not already_sent.
//
// The head names at most maxSentNamed chunks, the most relevant first: a
// long session listed all of them, 60 lines above 200 tokens of context.
// An answer without code says why: nothing matched, nothing fit the
// budget, or all of it was sent before (it was an empty text).
func (o SearchOutput) text() string {
	empty := len(o.Chunks) == 0 && len(o.Commits) == 0
	if len(o.AlreadySent) == 0 && !empty {
		return o.Context
	}
	var b strings.Builder
	if len(o.AlreadySent) > 0 {
		fmt.Fprintf(&b, "// already sent in this session, not repeated (%d tokens saved):\n", o.TokensSaved)
		for i, p := range o.AlreadySent {
			if i == maxSentNamed {
				fmt.Fprintf(&b, "//   and %d more (already_sent lists them)\n", len(o.AlreadySent)-i)
				break
			}
			b.WriteString("//   " + p + "\n")
		}
		b.WriteString("\n")
	}
	if empty {
		switch {
		case o.Dropped > 0:
			fmt.Fprintf(&b, "no code fits: %d chunks matched, none within a budget of %d tokens; ask again with a larger budget\n", o.Dropped, o.Budget)
		case len(o.AlreadySent) > 0:
			b.WriteString("no new code: what matched was sent before in this session (above)\n")
		default:
			searched := fmt.Sprintf("the %d repositories searched", len(o.Repos))
			if len(o.Repos) <= 5 {
				searched = strings.Join(o.Repos, ", ")
			}
			fmt.Fprintf(&b, "no code matched in %s; other words, or the symbol tool for a name, may find it\n", searched)
		}
	}
	b.WriteString(o.Context)
	return b.String()
}

// maxSentNamed bounds the chunks a search's text names as sent before.
const maxSentNamed = 10

// mcpBudget is a tool's token budget: mcpDefaultBudget only when the
// argument is left out (0 is an error), within 1..mcpMaxBudget.
func mcpBudget(arg *int) (int, error) {
	budget := mcpDefaultBudget
	if arg != nil {
		budget = *arg
	}
	if budget < 1 || budget > mcpMaxBudget {
		return 0, fmt.Errorf("budget %d out of range (1..%d)", budget, mcpMaxBudget)
	}
	return budget, nil
}

func (s *Server) toolSearch(ctx context.Context, p Principal, in SearchInput) (SearchOutput, error) {
	tenant, err := p.tenantFor(in.Tenant)
	if err != nil {
		return SearchOutput{}, err
	}
	if strings.TrimSpace(in.Query) == "" {
		return SearchOutput{}, errors.New("empty query")
	}
	budget, err := mcpBudget(in.Budget)
	if err != nil {
		return SearchOutput{}, err
	}
	repos := in.Repos
	if len(repos) == 0 && in.Repo == "" {
		repos = []string{AllRepos}
	}
	resp, err := s.search(ctx, Search{Tenant: tenant, Repo: in.Repo, Repos: repos, Query: in.Query, Budget: budget, Languages: in.Languages, Session: in.Session, Payer: p.payer()})
	if err != nil {
		return SearchOutput{}, err
	}
	out := SearchOutput{Context: resp.Context, Tokens: resp.Tokens, Budget: resp.Budget, Trigger: resp.Trigger, Repos: resp.Repos, Chunks: []ChunkRef{},
		AlreadySent: resp.AlreadySent, TokensSaved: resp.TokensSaved, Dropped: resp.Dropped, Commits: resp.Commits}
	if out.Repos == nil {
		out.Repos = []string{resp.Repo}
	}
	for _, c := range resp.Chunks {
		out.Chunks = append(out.Chunks, ChunkRef{Provenance: c.Provenance, Repo: c.Repo, Path: c.Path, StartLine: c.StartLine, EndLine: c.EndLine, Symbol: c.Symbol, Kind: c.Kind, Tokens: c.Tokens,
			Stub: c.Granularity == string(pack.Stub)})
	}
	return out, nil
}

// SymbolInput is the argument of the symbol tool.
type SymbolInput struct {
	Name   string   `json:"name" jsonschema:"symbol name: short (Mount), qualified by its type (Router.Mount) or by its package or module (pkg.Func: http.ListenAndServe; module.func: json.loads)"`
	Budget *int     `json:"budget,omitempty" jsonschema:"o200k tokens of definition bodies at most (default 6000): a body past it is left out, its signature and doc kept (stub); read its lines for it"`
	Repo   string   `json:"repo,omitempty" jsonschema:"one repository to look in (with repos, both are)"`
	Repos  []string `json:"repos,omitempty" jsonschema:"repositories to look in; default all of the tenant's"`
	Tenant string   `json:"tenant,omitempty" jsonschema:"tenant to act for; only an operator key may name another than its own"`
}

// Definition is one definition found by the symbol tool.
type Definition struct {
	ChunkRef
	Signature string `json:"signature,omitempty"`
	Doc       string `json:"doc,omitempty"`
	Body      string `json:"body"`
}

// SymbolOutput is the answer of the symbol tool.
type SymbolOutput struct {
	Definitions []Definition `json:"definitions"`
	More        int          `json:"more,omitempty" jsonschema:"definitions left out beyond the first 20"`
	Tokens      int          `json:"tokens" jsonschema:"o200k tokens of the bodies given"`
	Budget      int          `json:"budget"`
}

func (o SymbolOutput) text() string {
	if len(o.Definitions) == 0 {
		return "no definition found: give a short name (Mount) or a qualified one (Router.Mount, (*Router).Mount, pkg.Func, module.func); search finds code by other words"
	}
	var b strings.Builder
	for _, d := range o.Definitions {
		if d.Stub {
			fmt.Fprintf(&b, "%s  %s %s (body left out: past the budget of %d tokens; read its lines)\n", d.Provenance, d.Kind, d.Symbol, o.Budget)
			if d.Doc != "" {
				fmt.Fprintf(&b, "%s\n", d.Doc)
			}
			fmt.Fprintf(&b, "%s\n\n", d.Signature)
			continue
		}
		fmt.Fprintf(&b, "%s  %s %s\n%s\n\n", d.Provenance, d.Kind, d.Symbol, d.Body)
	}
	if o.More > 0 {
		fmt.Fprintf(&b, "(%d more definitions: give repo, or a qualified name such as Type.method or pkg.Func, for fewer)\n", o.More)
	}
	return b.String()
}

// repoSegs resolves the repos of a tool call and its repo, one more name
// or "" (default: all of the tenant's), and loads their segments.
func (s *Server) repoSegs(ctx context.Context, p Principal, tenant string, repos []string, one string) ([]*segment.Segment, error) {
	tenant, err := p.tenantFor(tenant)
	if err != nil {
		return nil, err
	}
	if len(repos) == 0 && one == "" {
		repos = []string{AllRepos}
	}
	names, err := s.resolveRepos(ctx, tenant, repos, one)
	if err != nil {
		return nil, err
	}
	// Loading and walking many repositories costs what a search over them
	// does (search): the same charge, or symbol, references and impact
	// (MCP and /v1/references, /v1/impact) would be a way around it.
	// p's payer let the request in (an operator's: not tenant's).
	s.chargeRepos(p.payer(), len(names))
	return s.loadAll(ctx, tenant, names)
}

func chunkRef(seg *segment.Segment, id int) ChunkRef {
	c := seg.Chunks[id]
	return ChunkRef{
		Provenance: provenance(seg, c.Path, c.StartLine, c.EndLine),
		Repo:       seg.Meta.Repo, Path: c.Path, StartLine: c.StartLine, EndLine: c.EndLine, Symbol: c.Name, Kind: string(c.Kind),
	}
}

func provenance(seg *segment.Segment, path string, start, end int) string {
	return pack.Provenance(pack.Candidate{Repo: seg.Meta.Repo, Commit: seg.Meta.Commit, Path: path, StartLine: start, EndLine: end})
}

// isDecl reports whether a chunk declares something a name can refer to.
func isDecl(k codectx.Kind) bool { return k != codectx.KindModule && k != codectx.KindWindow }

func (s *Server) toolSymbol(ctx context.Context, p Principal, in SymbolInput) (SymbolOutput, error) {
	if strings.TrimSpace(in.Name) == "" {
		return SymbolOutput{}, errors.New("no name")
	}
	budget, err := mcpBudget(in.Budget)
	if err != nil {
		return SymbolOutput{}, err
	}
	segs, err := s.repoSegs(ctx, p, in.Tenant, in.Repos, in.Repo)
	if err != nil {
		return SymbolOutput{}, err
	}
	out := SymbolOutput{Definitions: []Definition{}, Budget: budget}
	for _, h := range symbolOrder(resolveSymbol(segs, in.Name)) {
		if len(out.Definitions) == maxDefinitions {
			out.More++
			continue
		}
		// Bodies while they fit, in the order found: 20 of a common
		// name's (run) were 62 KB, and one body of a big file may be far
		// more.
		c := h.seg.Chunks[h.id]
		d := Definition{ChunkRef: chunkRef(h.seg, h.id), Signature: c.Signature, Doc: c.Doc, Body: c.Body}
		if n, ok := tokens.CountAtMost(c.Body, budget-out.Tokens); ok {
			d.Tokens = n
			out.Tokens += n
		} else {
			d.Body, d.Stub = "", true
		}
		out.Definitions = append(out.Definitions, d)
	}
	return out, nil
}

// symbolOrder is the order the symbol tool gives definitions in, within
// its 20 and its budget: code before tests, and the repositories in turn,
// each its first definition before any its second. They came in the
// order of the repositories' names, so "get" over all of a tenant's gave
// twenty of the first repository's, seven of them tests, and none of
// the others'.
func symbolOrder(hits []symbolHit) []symbolHit {
	type slot struct {
		test bool
		turn int // this definition's place among its repository's
		i    int
	}
	slots := make([]slot, len(hits))
	turn := map[*segment.Segment]int{}
	for i, h := range hits {
		test := query.IsTestPath(h.seg.Chunks[h.id].Path)
		k := h.seg
		if test {
			k = nil // tests take their own turns, after all code
		}
		slots[i] = slot{test: test, turn: turn[k], i: i}
		turn[k]++
	}
	slices.SortStableFunc(slots, func(a, b slot) int {
		if a.test != b.test {
			if a.test {
				return 1
			}
			return -1
		}
		return a.turn - b.turn
	})
	out := make([]symbolHit, len(hits))
	for j, sl := range slots {
		out[j] = hits[sl.i]
	}
	return out
}

// ReferencesInput is the argument of the references tool.
type ReferencesInput struct {
	Name   string   `json:"name,omitempty" jsonschema:"symbol whose callers and users to find: short (Mount), qualified by its type (Router.Mount) or by its package or module (pkg.Func, module.func)"`
	Path   string   `json:"path,omitempty" jsonschema:"file whose importers and users to find: a path relative to the repository root, or a provenance (path#Lstart-Lend, repo@commit:path#Lstart-Lend)"`
	Repo   string   `json:"repo,omitempty" jsonschema:"one repository to look in (with repos, both are)"`
	Repos  []string `json:"repos,omitempty" jsonschema:"repositories to look in; default all of the tenant's"`
	Limit  int      `json:"limit,omitempty" jsonschema:"most references to list, 1..200; 0 or left out: 200. more counts the ones left out"`
	Tenant string   `json:"tenant,omitempty" jsonschema:"tenant to act for; only an operator key may name another than its own"`
}

// UnmarshalJSON decodes a references request, its limit a whole number
// written either way JSON allows (2 or 2.0).
func (in *ReferencesInput) UnmarshalJSON(b []byte) error {
	type plain ReferencesInput
	var aux struct {
		plain
		Limit *float64 `json:"limit"`
	}
	if err := decodeStrict(b, &aux); err != nil {
		return err
	}
	*in = ReferencesInput(aux.plain)
	var err error
	in.Limit, _, err = whole("limit", aux.Limit)
	return err
}

// listLimit is a references or impact call's limit: max when it is 0,
// else within 1..max.
func listLimit(limit, max int) (int, error) {
	if limit < 0 || limit > max {
		return 0, badRequest{fmt.Errorf("limit %d out of range (1..%d)", limit, max)}
	}
	if limit == 0 {
		return max, nil
	}
	return limit, nil
}

// Reference is one use of the symbol or file asked about.
type Reference struct {
	ChunkRef
	Via    string `json:"via" jsonschema:"how it uses the target: call, type or import; a file or symbol that uses it more than one way is listed once with them all, comma-separated (import,call)"`
	Target string `json:"target" jsonschema:"the symbol or file it uses"`
}

// ReferencesOutput is the answer of the references tool.
type ReferencesOutput struct {
	References []Reference `json:"references"`
	More       int         `json:"more,omitempty"`

	found bool   // the symbol or file asked about was found
	path  string // the file asked about, when it was a file
}

func (o ReferencesOutput) text() string {
	if len(o.References) == 0 {
		if !o.found {
			return "no references found: no symbol or file of that name in the repositories searched (search finds code by other words)"
		}
		if o.path != "" {
			return "no references found: no indexed file imports or uses " + o.path
		}
		return "no references found: calls through an interface, and calls by a name declared more than once in a repository, are not resolved; search for the name finds its uses by text"
	}
	var b strings.Builder
	for _, r := range o.References {
		name := r.Symbol
		if name == "" {
			name = r.Path
		}
		fmt.Fprintf(&b, "%s  %s %s -> %s\n", r.Provenance, name, r.Via, r.Target)
	}
	if o.More > 0 {
		fmt.Fprintf(&b, "(%d more)\n", o.More)
	}
	return b.String()
}

func (s *Server) toolReferences(ctx context.Context, p Principal, in ReferencesInput) (ReferencesOutput, error) {
	if (in.Name == "") == (in.Path == "") {
		return ReferencesOutput{}, badRequest{errors.New("give exactly one of name and path")}
	}
	limit, err := listLimit(in.Limit, maxReferences)
	if err != nil {
		return ReferencesOutput{}, err
	}
	var clean string
	if in.Path != "" {
		var err error
		if in.Repo, clean, err = targetPath(in.Repo, in.Path); err != nil {
			return ReferencesOutput{}, badRequest{err}
		}
	}
	tenant, segs, err := s.scopeSegs(ctx, p, in.Tenant, in.Repos, in.Repo, "")
	if err != nil {
		return ReferencesOutput{}, err
	}
	xg := s.crossGraph(ctx, tenant, segs)
	byRepo := reposOf(segs)
	out := ReferencesOutput{References: []Reference{}, path: clean}
	// One reference per user and target: a file that imports the target
	// and calls it is listed once, with both kinds in via.
	at := map[[2]string]int{} // provenance and target: index in References, -1 when left out
	add := func(r Reference) {
		key := [2]string{r.Provenance, r.Target}
		if i, ok := at[key]; ok {
			if i >= 0 {
				out.References[i].Via = joinVia(out.References[i].Via, r.Via)
			}
			return
		}
		if len(out.References) == limit {
			at[key] = -1
			out.More++
			return
		}
		at[key] = len(out.References)
		out.References = append(out.References, r)
	}
	var graphed []*segment.Segment
	for _, seg := range segs {
		if seg.Graph != nil {
			graphed = append(graphed, seg)
		}
	}
	if in.Name != "" {
		for _, h := range resolveSymbol(graphed, in.Name) {
			seg, c := h.seg, h.seg.Chunks[h.id]
			repo := seg.Meta.Repo
			out.found = true
			for _, n := range seg.Graph.SymbolNeighbors(h.id) {
				if n.Out || n.ID < 0 || n.ID >= len(seg.Chunks) || foreign(seg, n.Kind, n.Path, c.Path) {
					continue
				}
				add(Reference{ChunkRef: chunkRef(seg, n.ID), Via: n.Kind.String(), Target: c.Name})
			}
			// Across repositories: the symbols of files that import the
			// declaring file and call or name the symbol.
			for _, l := range crossImporters(xg, byRepo, repo, c.Path) {
				from := byRepo[l.From.Repo]
				f, _ := from.File(l.From.Path)
				u := crossUse(l, seg, c)
				for _, fid := range f.Chunks {
					if via := u.uses(from.Chunks[fid]); via != "" {
						add(Reference{ChunkRef: chunkRef(from, fid), Via: via, Target: repo + ":" + c.Name})
					}
				}
			}
		}
		return out, nil
	}
	for _, seg := range graphed {
		repo := seg.Meta.Repo
		if _, ok := seg.File(clean); !ok {
			continue
		}
		out.found = true
		for _, n := range seg.Graph.FileNeighbors(clean) {
			if n.Out || foreign(seg, n.Kind, n.Path, clean) {
				continue
			}
			add(Reference{ChunkRef: fileRef(seg, n.Path), Via: n.Kind.String(), Target: clean})
		}
		for _, l := range crossImporters(xg, byRepo, repo, clean) {
			add(Reference{ChunkRef: fileRef(byRepo[l.From.Repo], l.From.Path), Via: graph.EdgeImport.String(), Target: repo + ":" + clean})
		}
	}
	return out, nil
}

// joinVia adds kind to the edge kinds of a reference, comma-separated,
// each once, in the order import, call, type.
func joinVia(via, kind string) string {
	kinds := strings.Split(via, ",")
	if slices.Contains(kinds, kind) {
		return via
	}
	kinds = append(kinds, kind)
	order := func(k string) int {
		for e := graph.EdgeImport; e <= graph.EdgeType; e++ {
			if e.String() == k {
				return int(e)
			}
		}
		return int(graph.EdgeType) + 1
	}
	slices.SortStableFunc(kinds, func(a, b string) int { return order(a) - order(b) })
	return strings.Join(kinds, ",")
}

// scopeSegs resolves the tenant and repositories of a tool call (repos
// and one, as repoSegs) and loads their segments, plus the segment of
// target when it is named and not among them.
func (s *Server) scopeSegs(ctx context.Context, p Principal, asked string, repos []string, one, target string) (string, []*segment.Segment, error) {
	tenant, err := p.tenantFor(asked)
	if err != nil {
		return "", nil, err
	}
	if target != "" {
		if err := validRepo(tenant, target); err != nil {
			return "", nil, badRequest{err}
		}
	}
	segs, err := s.repoSegs(ctx, p, tenant, repos, one)
	if err != nil {
		return "", nil, err
	}
	if target != "" && !slices.ContainsFunc(segs, func(seg *segment.Segment) bool { return seg.Meta.Repo == target }) {
		seg, err := s.load(ctx, tenant, target)
		if err != nil {
			return "", nil, err
		}
		segs = append(segs, seg)
	}
	return tenant, segs, nil
}

func reposOf(segs []*segment.Segment) map[string]*segment.Segment {
	m := make(map[string]*segment.Segment, len(segs))
	for _, seg := range segs {
		m[seg.Meta.Repo] = seg
	}
	return m
}

// crossImporters are the links of g into repo:path from files of the
// repositories in scope.
func crossImporters(g *xrepo.Graph, scope map[string]*segment.Segment, repo, path string) []xrepo.Link {
	if g == nil {
		return nil
	}
	var out []xrepo.Link
	for _, l := range g.Importers(repo, path) {
		if from, ok := scope[l.From.Repo]; ok {
			if _, ok := from.File(l.From.Path); ok {
				out = append(out, l)
			}
		}
	}
	return out
}

// use is how code in another repository may spell a use of a symbol
// whose file it imports: the symbol's short name, qualified by one of
// quals (any qualifier when quals is nil), or unqualified unless qual is
// required.
type use struct {
	name     string
	quals    map[string]bool
	needQual bool
}

// crossUse is the use of symbol c (of segment decl) by the importer of l:
// qualified by the import's last element, the declaring module's name or
// the symbol's owner; in Go always qualified (by the package, or any
// receiver for a method), in JavaScript and TypeScript by any name (an
// import binds what the importer chooses).
func crossUse(l xrepo.Link, decl *segment.Segment, c codectx.Chunk) use {
	u := use{name: segment.ShortName(c.Name), quals: map[string]bool{}}
	owner, _ := splitOwner(c.Name)
	if owner != "" {
		u.quals[lastName(owner)] = true
	}
	el := splitQual(l.Spec)
	if n := len(el); n > 0 {
		u.quals[el[n-1]] = true
		if n > 1 && isMajorVersion(el[n-1]) {
			u.quals[el[n-2]] = true
		}
	}
	if f, ok := decl.File(c.Path); ok && len(f.Chunks) > 0 {
		if m := splitQual(decl.Chunks[f.Chunks[0]].Name); len(m) > 0 {
			u.quals[m[len(m)-1]] = true
		}
	}
	switch c.Language {
	case codectx.Go:
		u.needQual = true
		if owner != "" {
			u.quals = nil
		}
	case codectx.TypeScript, codectx.TSX, codectx.JavaScript:
		u.quals = nil
	}
	return u
}

// uses says how chunk c uses the symbol: "call", "type" or "".
func (u use) uses(c codectx.Chunk) string {
	if u.name == "" || !isDecl(c.Kind) {
		return ""
	}
	match := func(ref string) bool {
		qual, name := splitOwner(strings.TrimLeft(strings.TrimPrefix(ref, "new "), "*&"))
		if name != u.name {
			return false
		}
		if qual == "" {
			return !u.needQual
		}
		return u.quals == nil || u.quals[lastName(qual)]
	}
	for _, call := range c.Calls {
		if match(call) {
			return graph.EdgeCall.String()
		}
	}
	for _, t := range c.Types {
		if match(t) {
			return graph.EdgeType.String()
		}
	}
	return ""
}

// splitOwner splits a qualified name at its last "." or "::", type
// arguments and receiver parentheses dropped: "money.Round" -> ("money",
// "Round"), "(*Router).Mount" -> ("Router", "Mount"), "Vec<Money>" ->
// ("", "Vec").
func splitOwner(s string) (string, string) {
	if i := strings.IndexAny(s, "<["); i >= 0 {
		s = s[:i]
	}
	s = strings.NewReplacer("(*", "", "(", "", ")", "").Replace(s)
	i, w := strings.LastIndex(s, "::"), 2
	if d := strings.LastIndexByte(s, '.'); d > i {
		i, w = d, 1
	}
	if i < 0 {
		return "", s
	}
	return s[:i], s[i+w:]
}

// lastName is the last element of a qualified name.
func lastName(s string) string {
	_, n := splitOwner(s)
	return n
}

// splitQual splits an import spelling or module name into its elements
// at "/", "." and "::": "github.com/acme/money/round" -> [..., round],
// "com.acme.money.Money" -> [..., Money], "crate::round" -> [crate, round].
func splitQual(s string) []string {
	return strings.FieldsFunc(strings.Trim(s, `"' `), func(r rune) bool { return r == '/' || r == '.' || r == ':' })
}

func isMajorVersion(s string) bool {
	if len(s) < 2 || s[0] != 'v' {
		return false
	}
	for _, r := range s[1:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// fileRef is a ChunkRef naming a whole file.
func fileRef(seg *segment.Segment, path string) ChunkRef {
	end := 1
	if f, ok := seg.File(path); ok {
		for _, id := range f.Chunks {
			end = max(end, seg.Chunks[id].EndLine)
		}
	}
	return ChunkRef{Provenance: provenance(seg, path, 1, end), Repo: seg.Meta.Repo, Path: path, StartLine: 1, EndLine: end, Kind: "file"}
}

// ImpactInput is the argument of the impact tool.
type ImpactInput struct {
	Repo   string   `json:"repo,omitempty" jsonschema:"repository holding the target; default: the target is looked for in every repository searched"`
	Path   string   `json:"path,omitempty" jsonschema:"file that would change: a path relative to the repository root, or a provenance (path#Lstart-Lend, repo@commit:path#Lstart-Lend)"`
	Name   string   `json:"name,omitempty" jsonschema:"symbol that would change: short (Mount), qualified by its type (Router.Mount) or by its package or module (pkg.Func, module.func)"`
	Depth  int      `json:"depth,omitempty" jsonschema:"hops to follow, 1..6; 0 or left out: 3"`
	Repos  []string `json:"repos,omitempty" jsonschema:"repositories to look in; default all of the tenant's"`
	Limit  int      `json:"limit,omitempty" jsonschema:"most files to list, nearest first, 1..500; 0 or left out: 500. more counts the ones left out"`
	Tenant string   `json:"tenant,omitempty" jsonschema:"tenant to act for; only an operator key may name another than its own"`
}

// UnmarshalJSON decodes an impact request, its depth a whole number
// written either way JSON allows (2 or 2.0).
func (in *ImpactInput) UnmarshalJSON(b []byte) error {
	type plain ImpactInput
	var aux struct {
		plain
		Depth *float64 `json:"depth"`
		Limit *float64 `json:"limit"`
	}
	if err := decodeStrict(b, &aux); err != nil {
		return err
	}
	*in = ImpactInput(aux.plain)
	var err error
	if in.Depth, _, err = whole("depth", aux.Depth); err != nil {
		return err
	}
	in.Limit, _, err = whole("limit", aux.Limit)
	return err
}

// Impacted is one file that depends on the target.
type Impacted struct {
	Repo       string `json:"repo"`
	Path       string `json:"path"`
	Provenance string `json:"provenance"`
	Depth      int    `json:"depth" jsonschema:"hops from the target: 1 = uses it directly"`
	Via        string `json:"via" jsonschema:"kind of the edge that reached it: import, call or type"`
	From       string `json:"from" jsonschema:"what it depends on: the file, or for a symbol target's calls and type uses the symbol"`
	FromRepo   string `json:"from_repo,omitempty" jsonschema:"the repository of from, when it is another than repo: an import across repositories"`
}

// ImpactOutput is the answer of the impact tool.
type ImpactOutput struct {
	Targets []string   `json:"targets" jsonschema:"provenance of what was found to change"`
	Files   []Impacted `json:"files"`
	More    int        `json:"more,omitempty"`
}

func (o ImpactOutput) text() string {
	if len(o.Targets) == 0 {
		return "target not found: no file (a path relative to the repository root) or symbol of that name in the repositories searched; search finds code by other words"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "changing %s affects %d files\n", strings.Join(o.Targets, ", "), len(o.Files)+o.More)
	for _, f := range o.Files {
		fmt.Fprintf(&b, "  %d  %s  (%s %s)\n", f.Depth, f.Provenance, f.Via, f.From)
	}
	return b.String()
}

func (s *Server) toolImpact(ctx context.Context, p Principal, in ImpactInput) (ImpactOutput, error) {
	if (in.Name == "") == (in.Path == "") {
		return ImpactOutput{}, badRequest{errors.New("give exactly one of name and path")}
	}
	if in.Depth < 0 || in.Depth > maxImpactDepth {
		return ImpactOutput{}, badRequest{fmt.Errorf("depth %d out of range (1..%d)", in.Depth, maxImpactDepth)}
	}
	if in.Depth == 0 {
		in.Depth = 3
	}
	limit, err := listLimit(in.Limit, maxImpact)
	if err != nil {
		return ImpactOutput{}, err
	}
	if in.Path != "" {
		var err error
		if in.Repo, in.Path, err = targetPath(in.Repo, in.Path); err != nil {
			return ImpactOutput{}, badRequest{err}
		}
	}
	tenant, segs, err := s.scopeSegs(ctx, p, in.Tenant, in.Repos, "", in.Repo)
	if err != nil {
		return ImpactOutput{}, err
	}
	out := ImpactOutput{Targets: []string{}, Files: []Impacted{}}
	impact(segs, s.crossGraph(ctx, tenant, segs), in, &out)
	slices.SortStableFunc(out.Files, func(a, b Impacted) int { return a.Depth - b.Depth })
	if len(out.Files) > limit {
		out.More = len(out.Files) - limit
		out.Files = out.Files[:limit]
	}
	return out, nil
}

// impact walks the reverse edges from the target breadth first, within
// each repository's graph and across repositories over the links of xg
// (nil: none), and appends the files reached. The target is looked for in
// in.Repo, or in every segment when it is "".
//
// A file target's walk goes file to file: importers, and the files whose
// symbols call or name the file's. A symbol target's goes symbol to
// symbol within a repository: its callers and users, then theirs, each
// listed by its file. Only across repositories, where links are imports
// of files, does it go file to file. A symbol's walk went file to file
// after its first hop, so a helper with two callers reached every
// importer of their files: 84 of net/http's 112 files at depth 3.
func impact(segs []*segment.Segment, xg *xrepo.Graph, in ImpactInput, out *ImpactOutput) {
	scope := reposOf(segs)
	seen := map[xrepo.Ref]bool{}
	var frontier []xrepo.Ref // files whose dependents the next hop lists, file to file
	list := func(n xrepo.Ref, via, from, fromRepo string, depth int) bool {
		if seen[n] {
			return false
		}
		seen[n] = true
		im := Impacted{Repo: n.Repo, Path: n.Path, Provenance: fileRef(scope[n.Repo], n.Path).Provenance, Depth: depth, Via: via, From: from}
		if fromRepo != n.Repo {
			im.FromRepo = fromRepo
		}
		out.Files = append(out.Files, im)
		return true
	}
	visit := func(n xrepo.Ref, via, from, fromRepo string, depth int) {
		if list(n, via, from, fromRepo, depth) {
			frontier = append(frontier, n)
		}
	}
	// dependents visits the files that depend on n: in-edges of its
	// repository's graph and the imports of other repositories resolved
	// to it.
	dependents := func(n xrepo.Ref, depth int) {
		if seg := scope[n.Repo]; seg.Graph != nil {
			for _, nb := range seg.Graph.FileNeighbors(n.Path) {
				if !nb.Out && !foreign(seg, nb.Kind, nb.Path, n.Path) {
					visit(xrepo.Ref{Repo: n.Repo, Path: nb.Path}, nb.Kind.String(), n.Path, n.Repo, depth)
				}
			}
		}
		for _, l := range crossImporters(xg, scope, n.Repo, n.Path) {
			visit(l.From, graph.EdgeImport.String(), n.Path, n.Repo, depth)
		}
	}
	var targets []*segment.Segment
	for _, seg := range segs {
		if seg.Graph != nil && (in.Repo == "" || seg.Meta.Repo == in.Repo) {
			targets = append(targets, seg)
		}
	}
	if in.Path != "" {
		for _, seg := range targets {
			if _, ok := seg.File(in.Path); !ok {
				continue
			}
			n := xrepo.Ref{Repo: seg.Meta.Repo, Path: in.Path}
			seen[n] = true
			frontier = append(frontier, n)
			out.Targets = append(out.Targets, fileRef(seg, in.Path).Provenance)
		}
		for d := 1; d <= in.Depth && len(frontier) > 0; d++ {
			cur := frontier
			frontier = nil
			for _, n := range cur {
				dependents(n, d)
			}
		}
		return
	}
	// A symbol: the declaring files change too but are not listed.
	var syms []symbolHit // the symbols whose callers the next hop lists
	seenSym := map[symbolHit]bool{}
	for _, h := range resolveSymbol(targets, in.Name) {
		c := h.seg.Chunks[h.id]
		out.Targets = append(out.Targets, chunkRef(h.seg, h.id).Provenance)
		seen[xrepo.Ref{Repo: h.seg.Meta.Repo, Path: c.Path}] = true
		if !seenSym[h] {
			seenSym[h] = true
			syms = append(syms, h)
		}
	}
	for _, h := range syms {
		// An exported symbol may be used wherever its file is imported:
		// those files are listed at depth 1, in its repository and in
		// others. An unexported one is used by its callers only (63
		// files at depth 1 for a method with 2 callers). Only an import
		// from another repository is walked further, file to file.
		c := h.seg.Chunks[h.id]
		if !exported(c) {
			continue
		}
		repo := h.seg.Meta.Repo
		for _, nb := range h.seg.Graph.FileNeighbors(c.Path) {
			if !nb.Out && nb.Kind == graph.EdgeImport && !foreign(h.seg, nb.Kind, nb.Path, c.Path) {
				list(xrepo.Ref{Repo: repo, Path: nb.Path}, nb.Kind.String(), c.Path, repo, 1)
			}
		}
		for _, l := range crossImporters(xg, scope, repo, c.Path) {
			visit(l.From, graph.EdgeImport.String(), c.Path, repo, 1)
		}
	}
	for d := 1; d <= in.Depth && len(syms)+len(frontier) > 0; d++ {
		cur, files := syms, frontier
		syms, frontier = nil, nil
		for _, h := range cur {
			seg, c := h.seg, h.seg.Chunks[h.id]
			repo := seg.Meta.Repo
			for _, nb := range seg.Graph.SymbolNeighbors(h.id) {
				if nb.Out || nb.ID < 0 || nb.ID >= len(seg.Chunks) || foreign(seg, nb.Kind, nb.Path, c.Path) {
					continue
				}
				list(xrepo.Ref{Repo: repo, Path: nb.Path}, nb.Kind.String(), c.Name, repo, d)
				if u := (symbolHit{seg, nb.ID}); !seenSym[u] {
					seenSym[u] = true
					syms = append(syms, u)
				}
			}
			if d > 1 && exported(c) {
				// A caller found by the last hop, imported by another
				// repository.
				for _, l := range crossImporters(xg, scope, repo, c.Path) {
					visit(l.From, graph.EdgeImport.String(), c.Path, repo, d)
				}
			}
		}
		if d > 1 {
			for _, n := range files {
				dependents(n, d)
			}
		} else {
			frontier = files // the depth-1 imports across repositories go on at depth 2
		}
	}
}

// exported reports whether code outside a declaration's package or
// module may use it, by its language's convention: a Go name that starts
// with a capital, a Python name without a leading underscore; in Java,
// TypeScript and JavaScript a member that is not private (the private
// modifier of its signature, a #name), since a private one is used
// inside its class only, hence its file. Any other name counts as
// exported: Java's package-private members (an interface's are public
// without a modifier) and Rust's items without pub (a child module in
// another file uses them through an import) are not told apart.
func exported(c codectx.Chunk) bool {
	name := c.Name
	if i := strings.LastIndexAny(name, ".)"); i >= 0 {
		name = name[i+1:]
	}
	if name == "" {
		return true
	}
	switch c.Language {
	case codectx.Go:
		r, _ := utf8.DecodeRuneInString(name)
		return unicode.IsUpper(r)
	case codectx.Python:
		return !strings.HasPrefix(name, "_") || strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__")
	case codectx.Java, codectx.TypeScript, codectx.TSX, codectx.JavaScript:
		return !strings.HasPrefix(name, "#") && !private(c.Signature)
	}
	return true
}

// private reports whether a declaration's signature has the private
// modifier among the words before its name, parameters or value
// ("@Override private void run()", "private static readonly x =").
func private(sig string) bool {
	for _, w := range strings.Fields(sig) {
		if w == "private" {
			return true
		}
		if strings.ContainsAny(w, "(=:<{") {
			return false
		}
	}
	return false
}

// ReadInput is the argument of the read tool.
type ReadInput struct {
	Repo      string `json:"repo" jsonschema:"repository, as the repos tool or a provenance names it: repo, or repo@commit (the commit must be the indexed one)"`
	Path      string `json:"path" jsonschema:"file path relative to the repository root; path#Lstart-Lend, or a whole provenance repo@commit:path#Lstart-Lend, reads those lines"`
	StartLine int    `json:"start_line,omitempty" jsonschema:"first line, 1-based; 0 or left out: 1"`
	EndLine   int    `json:"end_line,omitempty" jsonschema:"last line, inclusive; 0 or left out: start_line+399"`
	Tenant    string `json:"tenant,omitempty" jsonschema:"tenant to act for; only an operator key may name another than its own"`
}

// ReadOutput is the answer of the read tool.
type ReadOutput struct {
	Provenance string `json:"provenance"`
	Text       string `json:"text"`
	StartLine  int    `json:"start_line"`
	EndLine    int    `json:"end_line"`
	TotalLines int    `json:"total_lines"`
}

// cleanPath checks a repository-relative path. Files are only ever found
// by exact lookup in the segment's file list and read by their blob hash,
// never by joining the path to a directory, so a path cannot leave the
// repository; this only turns nonsense into a clear error.
func cleanPath(p string) (string, error) {
	p = strings.TrimPrefix(p, "./")
	c := path.Clean(p)
	if p == "" || c == "." || strings.HasPrefix(p, "/") || c == ".." || strings.HasPrefix(c, "../") || strings.Contains(p, "\x00") || strings.Contains(p, "\\") {
		return "", fmt.Errorf("path %s: want a path relative to the repository root", quoteArg(p))
	}
	return c, nil
}

// provenanceRE is a whole provenance as every answer writes it,
// repo@commit:path (then #Lstart-Lend, part of the path here): a
// repository name's characters, a commit (hex, or worktree-hex for a
// snapshot of a directory), the path.
var provenanceRE = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._/-]*)@([0-9A-Za-z-]+):(.+)$`)

// splitProvenance splits a whole provenance into its repository, commit
// and path (with its #L lines, if any); ok is false for anything else.
func splitProvenance(s string) (repo, commit, path string, ok bool) {
	m := provenanceRE.FindStringSubmatch(s)
	if m == nil {
		return "", "", "", false
	}
	return m[1], m[2], m[3], true
}

// targetPath is the file a references or impact call names, in any form
// an answer writes a file: path, path#Lstart-Lend, or a whole provenance
// repo@commit:path#Lstart-Lend, whose repository becomes repo when the
// call names none (and must be it when the call does). Only read took the
// first two; a provenance copied whole was "no file" everywhere.
func targetPath(repo, p string) (string, string, error) {
	if r, _, rest, ok := splitProvenance(p); ok {
		if repo != "" && repo != r {
			return "", "", fmt.Errorf("the provenance in path is of repository %s, not %s", r, repo)
		}
		repo, p = r, rest
	}
	p, _ = cutLines(p)
	clean, err := cleanPath(p)
	return repo, clean, err
}

// cutLines cuts the lines a provenance appends to a path, "#Lstart-Lend",
// at its last "#L", when what follows reads as lines: a path may hold
// "#L" itself (a file "x#L1.go" is given as "x#L1.go#L1-2", and was read
// as the file "x"; given alone, as "x" with lines "1.go").
func cutLines(p string) (path, lines string) {
	if i := strings.LastIndex(p, "#L"); i >= 0 && linesRE.MatchString(p[i+2:]) {
		return p[:i], p[i+2:]
	}
	return p, ""
}

// linesRE is the lines of a provenance after its "#L": "3", "3-5" or
// "3-L5".
var linesRE = regexp.MustCompile(`^[0-9]+(-L?[0-9]+)?$`)

// provenanceParts reads the parts of a provenance an agent copies into
// read's arguments: repo@commit as the repository (returning the commit)
// and path#Lstart-Lend as the path (its lines unless the call gives
// some). Both were refused: the first by the repository name's pattern,
// the second as a file that does not exist.
func provenanceParts(in ReadInput) (ReadInput, string, error) {
	if r, c, rest, ok := splitProvenance(in.Path); ok {
		// A whole provenance as the path: its repository must be the
		// call's (with or without the same commit).
		if name, _, _ := strings.Cut(in.Repo, "@"); in.Repo != "" && name != r {
			return in, "", badRequest{fmt.Errorf("the provenance in path is of repository %s, not %s", r, name)}
		}
		if !strings.Contains(in.Repo, "@") {
			in.Repo = r + "@" + c
		}
		in.Path = rest
	}
	repo, commit, at := strings.Cut(in.Repo, "@")
	if at && commit == "" {
		return in, "", badRequest{fmt.Errorf("repo %s: want repo or repo@commit", quoteArg(in.Repo))}
	}
	in.Repo = repo
	if path, lines := cutLines(in.Path); path != in.Path {
		in.Path = path
		from, to, _ := strings.Cut(lines, "-")
		to = strings.TrimPrefix(to, "L")
		start, err1 := strconv.Atoi(from)
		end, err2 := strconv.Atoi(cmp.Or(to, from))
		if err1 != nil || err2 != nil || start < 1 || end < start {
			return in, "", badRequest{fmt.Errorf("path %s: want path#Lstart-Lend, as a provenance writes it", quoteArg(path+"#L"+lines))}
		}
		if in.StartLine == 0 && in.EndLine == 0 {
			in.StartLine, in.EndLine = start, end
		}
	}
	return in, commit, nil
}

func (s *Server) toolRead(ctx context.Context, p Principal, in ReadInput) (ReadOutput, error) {
	tenant, err := p.tenantFor(in.Tenant)
	if err != nil {
		return ReadOutput{}, err
	}
	in, commit, err := provenanceParts(in)
	if err != nil {
		return ReadOutput{}, err
	}
	if err := validRepo(tenant, in.Repo); err != nil {
		return ReadOutput{}, err
	}
	clean, err := cleanPath(in.Path)
	if err != nil {
		return ReadOutput{}, err
	}
	if in.StartLine < 0 || in.EndLine < 0 || (in.EndLine > 0 && in.EndLine < in.StartLine) {
		return ReadOutput{}, fmt.Errorf("bad line range %d-%d", in.StartLine, in.EndLine)
	}
	seg, err := s.load(ctx, tenant, in.Repo)
	if err != nil {
		return ReadOutput{}, err
	}
	if commit != "" && !strings.HasPrefix(seg.Meta.Commit, commit) {
		commit = codectx.Clip(commit, 64)
		return ReadOutput{}, fmt.Errorf("%s is indexed at %.12s, not %s: read it without @%s for the text at the indexed commit", in.Repo, seg.Meta.Commit, commit, commit)
	}
	f, ok := seg.File(clean)
	if !ok {
		return ReadOutput{}, noFile(seg, clean)
	}
	data, err := index.ReadContent(ctx, s.Store, seg.Meta.Tenant, f.Path, f.Blob)
	if err != nil {
		return ReadOutput{}, fmt.Errorf("text of %s is not stored (indexed without it, or skipped: binary or too large): %w", clean, err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1]
	}
	start := max(in.StartLine, 1)
	end := in.EndLine
	if end == 0 {
		end = start + defaultReadLines - 1
	}
	end = min(end, start+maxReadLines-1, len(lines))
	if start > len(lines) {
		return ReadOutput{}, fmt.Errorf("%s has %d lines; start_line %d is past the end", clean, len(lines), start)
	}
	// At most maxReadBytes of text (at least one line): 2000 long lines
	// of a file near the 1 MiB limit cost about 10 MB of heap per call
	// as the answer is built and encoded (audit 5: a tenant's burst of
	// 100 such calls grew the shared heap by 880 MB).
	for i, n := start-1, 0; i < end; i++ {
		if n += len(lines[i]); n > maxReadBytes && i > start-1 {
			end = i
			break
		}
	}
	text := string(bytes.Join(lines[start-1:end], nil))
	return ReadOutput{Provenance: provenance(seg, clean, start, end), Text: text, StartLine: start, EndLine: end, TotalLines: len(lines)}, nil
}

// noFile is read's error for a path the index does not hold. A file the
// index left out (generated, minified, too large) is named with its
// reason: "no file" alone told an agent that net/http's h2_bundle.go does
// not exist. An index that does not name all it left out (built before
// they were named, or past segment.MaxListed) says the path may be one.
func noFile(seg *segment.Segment, path string) error {
	if reason, skipped, ok := seg.Meta.Why(path); ok && skipped {
		return fmt.Errorf("%s was left out of the index of %s at %.12s: %s (its text is not kept)", quoteArg(path), seg.Meta.Repo, seg.Meta.Commit, reason)
	}
	// A file under a directory left out (a submodule, a symlink, a bad
	// name) is not named itself: it was "no file".
	for dir := path; strings.Contains(dir, "/"); {
		dir = dir[:strings.LastIndexByte(dir, '/')]
		if reason, skipped, ok := seg.Meta.Why(dir); ok && skipped {
			return fmt.Errorf("%s is under %s, which was left out of the index of %s at %.12s: %s (its text is not kept)", quoteArg(path), quoteArg(dir), seg.Meta.Repo, seg.Meta.Commit, reason)
		}
	}
	n := index.Total(seg.Meta.Skipped)
	if n == len(seg.Meta.SkippedFiles) {
		hint := "a path relative to the repository root"
		if strings.Contains(path, "#L") {
			// Lines that do not read as lines stay in the path (a name
			// may hold "#L"): "a.go#Lx" is no file.
			hint += "; path#Lstart-Lend reads lines"
		}
		return fmt.Errorf("no file %s in %s at %.12s (%s)", quoteArg(path), seg.Meta.Repo, seg.Meta.Commit, hint)
	}
	return fmt.Errorf("no file %s in the index of %s at %.12s: no such file, or one of the %d files left out when indexed (%s), whose text is not kept", quoteArg(path), seg.Meta.Repo, seg.Meta.Commit, n-len(seg.Meta.SkippedFiles), index.FormatCounts(seg.Meta.Skipped))
}

// ReposInput is the argument of the repos tool.
type ReposInput struct {
	Tenant string `json:"tenant,omitempty" jsonschema:"tenant to act for; only an operator key may name another than its own"`
}

// RepoSummary is one indexed repository as the repos tool lists it.
type RepoSummary struct {
	Repo      string `json:"repo"`
	Commit    string `json:"commit"`
	IndexedAt string `json:"indexed_at" jsonschema:"RFC 3339"`
	Files     int    `json:"files"`
	// Skipped and Degraded count, by reason, the files the index left out
	// and those it cut into line windows, as GET /v1/repos sums them.
	Skipped  map[string]int `json:"skipped,omitempty" jsonschema:"files left out of the index, by reason (binary, too_large, generated, minified, ...): read cannot give their text"`
	Degraded map[string]int `json:"degraded,omitempty" jsonschema:"files indexed as line windows, not symbols, by reason (parse timeout, invalid UTF-8, ...)"`
	// Provides are the packages other repositories can import from it.
	Provides []xrepo.Identity `json:"provides,omitempty" jsonschema:"what other repositories import it by: Go modules, npm packages, Python distributions, Maven artifacts, Cargo crates"`
}

// ReposOutput is the answer of the repos tool.
type ReposOutput struct {
	Tenant string        `json:"tenant"`
	Repos  []RepoSummary `json:"repos"`
}

func (s *Server) toolRepos(ctx context.Context, p Principal, in ReposInput) (ReposOutput, error) {
	tenant, err := p.tenantFor(in.Tenant)
	if err != nil {
		return ReposOutput{}, err
	}
	names, err := s.repoNames(ctx, tenant)
	if err != nil {
		return ReposOutput{}, err
	}
	// Every repository's HEAD and segment are read and the graph across
	// them built: the call pays what a search over them does (repoSegs),
	// on the rate that let it in.
	s.chargeRepos(p.payer(), len(names))
	out := ReposOutput{Tenant: tenant, Repos: make([]RepoSummary, len(names))}
	segs := make([]*segment.Segment, len(names))
	err = forEach(len(names), func(i int) error {
		head, err := index.ReadHead(ctx, s.Store, tenant, names[i])
		if err != nil {
			return err
		}
		rs := RepoSummary{Repo: names[i], Commit: head.Commit, IndexedAt: head.Built}
		if seg, err := s.segs.get(ctx, head.Segment); err == nil {
			rs.Files, rs.Skipped, rs.Degraded = len(seg.Files), seg.Meta.Skipped, seg.Meta.Degraded
			segs[i] = seg
		}
		out.Repos[i] = rs
		return nil
	})
	if err != nil {
		return out, err
	}
	if g := s.crossGraph(ctx, tenant, segs); g != nil {
		for i := range out.Repos {
			out.Repos[i].Provides = g.Provides(out.Repos[i].Repo)
		}
	}
	return out, nil
}

// atoi is strconv.Atoi for ids known to be decimal.
func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// quoteArg quotes an argument an error echoes: at most maxQuotedArg bytes
// of it (an 800 KB path came back whole), enough for any indexed path.
func quoteArg(s string) string { return codectx.Quote(s, maxQuotedArg) }

const maxQuotedArg = 1024
