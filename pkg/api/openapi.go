package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"codectx/pkg/codectx"
	"codectx/pkg/query"
)

// routeDoc documents one route of the API in the OpenAPI document. The
// schemas are inferred from the Go types the handlers encode, so the
// document cannot drift from what they send.
type routeDoc struct {
	pattern string // as registered on the mux: "GET /v1/repos/{tenant}/{rest...}"
	path    string // OpenAPI path template
	id      string
	summary string
	routes  Routes // which servers register it (0: every one)
	scope   string // key scope needed; "" = no key
	params  []paramDoc
	body    reflect.Type
	example any // of the body (scripts/schemathesis.sh indexes a repository it fits)
	ok      int
	out     reflect.Type // nil: not JSON (text) or no body
	text    string       // content type of a non-JSON answer
	errors  []int
	// notes describe error codes beyond their status text.
	notes map[int]string
}

// repoCapNote describes the 409 of a route that may create a repository.
const repoCapNote = "the tenant already holds as many repositories as the server's per-tenant limit (--tenant-repos) and this one is new; the error names the limit. Repositories the tenant holds may still be pushed and reindexed; DELETE one to free a slot"

type paramDoc struct {
	name, in, desc string
	required       bool
	schema         map[string]any
	example        any // nil: none
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// Patterns of the names index.ValidTenant and index.ValidName accept:
// elements of letters, digits, . _ and -, none of them "." and none
// holding ".." (no element has two dots in a row), at most 200
// characters (TestNamePatterns checks them against the functions).
// spaceChars are the characters unicode.IsSpace reports: a query needs
// one character outside them, as the server trims with strings.TrimSpace.
const (
	nameElem      = `\.?([A-Za-z0-9_-]\.?)+`
	repoName      = nameElem + `(/` + nameElem + `)*`
	tenantPattern = `^` + nameElem + `$`
	repoPattern   = `^` + repoName + `$`
	orDefault     = `^(` + nameElem + `)?$` // a tenant, or empty for the default
	maxName       = 200
	spaceChars    = "\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
)

var (
	tenantPath = paramDoc{name: "tenant", in: "path", desc: "tenant", required: true, schema: map[string]any{"type": "string", "pattern": tenantPattern, "maxLength": maxName}, example: "default"}
	repoPath   = paramDoc{name: "repo", in: "path", desc: "repository name; may contain '/' (acme/shop), sent as is", required: true, schema: map[string]any{"type": "string", "pattern": repoPattern, "maxLength": maxName}, example: "shop"}
)

var routeDocs = []routeDoc{
	{pattern: "GET /healthz", path: "/healthz", id: "healthz", summary: "Liveness: 200 while the process runs", ok: 200, out: typeOf[map[string]string]()},
	{pattern: "GET /readyz", path: "/readyz", id: "readyz", summary: "Readiness: 200 when every dependency answers, else 503 with the failing checks", ok: 200, out: typeOf[Readiness](), errors: []int{503}},
	{pattern: "GET /metrics", path: "/metrics", id: "metrics", scope: "operator", summary: "Prometheus metrics in the text format", ok: 200, text: "text/plain", errors: []int{401, 403}},
	{pattern: "GET /v1/openapi.json", path: "/v1/openapi.json", id: "openapi", summary: "This document", ok: 200, out: typeOf[map[string]any]()},
	{pattern: "POST /v1/query", path: "/v1/query", id: "query", routes: QueryRoutes, scope: "query",
		summary: "Packed, token-budgeted context for a question over one repository, a list, or all of the tenant's (repos [\"*\"]), fused into one ranking",
		body:    typeOf[QueryRequest](), example: map[string]any{"repo": "shop", "query": "How is the cart total computed?", "budget": 2000}, ok: 200, out: typeOf[query.Response](), errors: []int{400, 401, 403, 404, 413, 415, 429, 503}},
	{pattern: "/v1/mcp", path: "/v1/mcp", id: "mcp", routes: QueryRoutes, scope: "query",
		summary: "Model Context Protocol over Streamable HTTP (stateless, JSON responses): tools search, symbol, references, impact, read, repos. JSON-RPC 2.0 messages; see the MCP specification",
		body:    typeOf[map[string]any](), ok: 200, out: typeOf[map[string]any](), errors: []int{400, 401, 403, 405, 429}},
	{pattern: "POST /v1/impact", path: "/v1/impact", id: "impact", routes: QueryRoutes, scope: "query",
		summary: "The files that depend on a file or symbol, nearest first, within each repository's graph and across the tenant's repositories (imports one repository resolves into another): the MCP tool impact",
		body:    typeOf[ImpactInput](), example: map[string]any{"name": "Total", "depth": 2}, ok: 200, out: typeOf[ImpactOutput](), errors: []int{400, 401, 403, 404, 413, 415, 429, 503}},
	{pattern: "POST /v1/references", path: "/v1/references", id: "references", routes: QueryRoutes, scope: "query",
		summary: "Who uses a symbol (callers, type users) or a file (importers), in its repository and across the tenant's repositories: the MCP tool references",
		body:    typeOf[ReferencesInput](), example: map[string]any{"path": "cart.go"}, ok: 200, out: typeOf[ReferencesOutput](), errors: []int{400, 401, 403, 404, 413, 415, 429, 503}},
	{pattern: "POST /v1/index", path: "/v1/index", id: "index", routes: AdminRoutes, scope: "index",
		summary: "Ask the orchestrator to index a repository (clone URL; a path on the server needs an operator key)",
		body:    typeOf[IndexRequest](), example: map[string]any{"location": "https://git.example.com/acme/shop.git", "commit": "main"}, ok: 202, out: typeOf[IndexResponse](), errors: []int{400, 401, 403, 409, 413, 415, 429, 503},
		notes: map[int]string{409: "Conflict: " + repoCapNote + "; or the request names no repo and the name taken from its location (a directory's name; a URL's owner/name) is a repository indexed from another location: name this one, or name that repository to move it"}},
	{pattern: "POST /v1/webhooks/{host}/{tenant}", path: "/v1/webhooks/{host}/{tenant}", id: "webhook", routes: AdminRoutes,
		summary: "A signed push delivery of GitHub, GitLab or Gitea; reindexes the files it changed",
		params:  []paramDoc{{name: "host", in: "path", desc: "github, gitlab or gitea", required: true, schema: map[string]any{"type": "string", "enum": []string{"github", "gitlab", "gitea"}}}, tenantPath},
		body:    typeOf[map[string]any](), ok: 202, out: typeOf[map[string]any](), errors: []int{400, 401, 403, 404, 409, 413, 429, 503},
		notes: map[int]string{409: "Conflict: " + repoCapNote}},
	{pattern: "GET /v1/repos", path: "/v1/repos", id: "listRepos", scope: "query",
		summary: "The tenant's indexed repositories, by name, a page at a time",
		params: []paramDoc{
			{name: "tenant", in: "query", desc: "tenant (default: the API key's tenant for a tenant's key, else default)", schema: map[string]any{"type": "string", "pattern": orDefault, "maxLength": maxName}},
			{name: "limit", in: "query", desc: "page size, 1..500 (default 50)", schema: map[string]any{"type": "integer", "minimum": 1, "maximum": maxPage}},
			{name: "cursor", in: "query", desc: "next from the previous page", schema: map[string]any{"type": "string"}},
		},
		ok: 200, out: typeOf[RepoPage](), errors: []int{400, 401, 403, 429, 503}},
	{pattern: "GET /v1/repos/{tenant}/{rest...}", path: "/v1/repos/{tenant}/{repo}/status", id: "status", scope: "query",
		summary: "What the orchestrator is doing for a repository and what is published",
		params:  []paramDoc{tenantPath, repoPath}, ok: 200, out: typeOf[RepoStatus](), errors: []int{400, 401, 403, 404, 429, 503}},
	{pattern: "POST /v1/repos/{tenant}/{rest...}", path: "/v1/repos/{tenant}/{repo}/reindex", id: "reindex", routes: AdminRoutes, scope: "index",
		summary: "Index the repository again from the location of its last push",
		params:  []paramDoc{tenantPath, repoPath}, ok: 202, out: typeOf[IndexResponse](), errors: []int{400, 401, 403, 404, 409, 429, 503},
		notes: map[int]string{409: "Conflict: no location recorded for the repository, neither by the orchestrator nor with the repository in the store (a published repository last indexed by an earlier version, whose workflow was lost: POST /v1/index with the location); or " + repoCapNote + " (a deleted repository is new again)"}},
	{pattern: "DELETE /v1/repos/{tenant}/{rest...}", path: "/v1/repos/{tenant}/{repo}", id: "deleteRepo", routes: AdminRoutes, scope: "admin",
		summary: "Delete a repository: its workflow, HEAD, segments, manifests, plans and vectors, and its registration (which frees a slot of the tenant's --tenant-repos)",
		params:  []paramDoc{tenantPath, repoPath}, ok: 200, out: typeOf[DeleteResponse](), errors: []int{400, 401, 403, 404, 429, 503}},
}

var (
	schemaOnce sync.Once
	schemaDefs map[string]*jsonschema.Schema
	schemaErr  error
)

// schemaName is the components name of a documented type.
func schemaName(t reflect.Type) string {
	if t.Name() == "" {
		return ""
	}
	return strings.ReplaceAll(t.String(), ".", "_")
}

func schemaFor(t reflect.Type) (*jsonschema.Schema, error) {
	return jsonschema.ForType(t, &jsonschema.ForOptions{})
}

// schemas infers the schema of every named type the routes use.
func schemas() (map[string]*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		schemaDefs = map[string]*jsonschema.Schema{}
		for _, t := range []reflect.Type{typeOf[ErrorBody]()} {
			s, err := schemaFor(t)
			if err != nil {
				schemaErr = err
				return
			}
			schemaDefs[schemaName(t)] = s
		}
		for _, r := range routeDocs {
			for _, t := range []reflect.Type{r.body, r.out} {
				if t == nil || schemaName(t) == "" {
					continue
				}
				s, err := schemaFor(t)
				if err != nil {
					schemaErr = fmt.Errorf("openapi: schema of %s: %w", t, err)
					return
				}
				if refine := requestRules[t]; refine != nil {
					refine(s)
				}
				if t == r.body {
					nullable(s)
				}
				schemaDefs[schemaName(t)] = s
			}
		}
	})
	return schemaDefs, schemaErr
}

// requestRules add to the schemas inferred from the request types what
// their handlers check and a Go type cannot say: name patterns, ranges,
// enums, non-empty strings and which fields are needed. Clients read
// them, and the API's fuzz (scripts/schemathesis.sh) generates from them:
// without them it sent 261 queries, none of which reached the search
// (255 were refused as malformed). Each rule says what the handler
// enforces, no more: a request the schema calls valid is not refused as
// malformed, one it calls invalid is (TestRequestSchemasAgreeWithServer).
var requestRules = map[reflect.Type]func(*jsonschema.Schema){
	typeOf[QueryRequest](): func(s *jsonschema.Schema) {
		tenantProp(s.Properties["tenant"])
		repoProp(s.Properties["repo"], true, true)
		reposProp(s.Properties["repos"])
		textProp(s.Properties["query"])
		b := s.Properties["budget"]
		b.Minimum, b.Maximum = ptr(1.0), ptr(1_000_000.0)
		s.Properties["arms"].Items.Enum = anys(query.AllArms)
		languagesProp(s.Properties["languages"])
		sessionProp(s.Properties["session"])
		// repo, repos or both name what to search.
		s.AnyOf = []*jsonschema.Schema{
			{Required: []string{"repo"}, Properties: map[string]*jsonschema.Schema{"repo": {Type: "string", MinLength: ptr(1)}}},
			{Required: []string{"repos"}, Properties: map[string]*jsonschema.Schema{"repos": {Type: "array", MinItems: ptr(1)}}},
		}
	},
	typeOf[ImpactInput](): func(s *jsonschema.Schema) {
		toolRules[typeOf[ImpactInput]()](s)
		s.Properties["repo"].Examples = []any{"shop"}
		exactlyOne(s, "name", "path")
	},
	typeOf[ReferencesInput](): func(s *jsonschema.Schema) {
		toolRules[typeOf[ReferencesInput]()](s)
		exactlyOne(s, "name", "path")
	},
	typeOf[IndexRequest](): func(s *jsonschema.Schema) {
		tenantProp(s.Properties["tenant"])
		repoProp(s.Properties["repo"], true, false)
		l := s.Properties["location"]
		l.MinLength, l.MaxLength = ptr(1), ptr(MaxLocation)
		c := s.Properties["commit"]
		c.MaxLength, c.Pattern = ptr(MaxRev), `^[^\x00-\x20\x7f]*$`
	},
}

// nullable lets each optional property of a request schema be null: the
// handlers decode JSON into Go values, where null leaves a field unset
// as leaving it out does.
func nullable(s *jsonschema.Schema) {
	for name, p := range s.Properties {
		if p.Type != "" && !slices.Contains(s.Required, name) {
			p.Types, p.Type = []string{"null", p.Type}, ""
		}
	}
}

// tenantProp constrains a tenant name of a body; empty is the default
// tenant, or the key's.
func tenantProp(p *jsonschema.Schema) {
	p.Pattern, p.MaxLength = orDefault, ptr(maxName)
}

// repoProp constrains a repository name; empty leaves it to a default,
// all lets "*" stand for every repository of the tenant.
func repoProp(p *jsonschema.Schema, empty, all bool) {
	name := repoName
	if all {
		name = `\*|` + name
	}
	p.Pattern, p.MaxLength = `^(`+name+`)$`, ptr(maxName)
	if empty {
		p.Pattern = `^(` + name + `)?$`
	}
}

// reposProp constrains a list of repositories to search ("*": all).
func reposProp(p *jsonschema.Schema) {
	repoProp(p.Items, false, true)
	p.MaxItems = ptr(maxRepos)
}

// textProp constrains a query or a name the handler trims: it needs a
// character outside unicode.IsSpace.
func textProp(p *jsonschema.Schema) {
	p.MinLength, p.Pattern = ptr(1), "[^"+spaceChars+"]"
}

// languagesProp constrains a list of languages to restrict answers to.
func languagesProp(p *jsonschema.Schema) {
	p.Items.Enum, p.MaxItems = anys(codectx.LanguageNames()), ptr(maxLanguages)
	p.Description += " (" + languageList + ")"
}

// sessionProp constrains a session id (session.Key's rule).
func sessionProp(p *jsonschema.Schema) {
	p.Pattern = `^[A-Za-z0-9_-]{0,128}$`
}

// exactlyOne says that exactly one of fields a and b is given, not empty.
func exactlyOne(s *jsonschema.Schema, a, b string) {
	given := func(f string) *jsonschema.Schema {
		return &jsonschema.Schema{Required: []string{f}, Properties: map[string]*jsonschema.Schema{f: {Type: "string", MinLength: ptr(1)}}}
	}
	s.OneOf = []*jsonschema.Schema{given(a), given(b)}
}

func ptr[T any](v T) *T { return &v }

func anys[T any](vs []T) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

func ref(t reflect.Type) any {
	if n := schemaName(t); n != "" {
		return map[string]any{"$ref": "#/components/schemas/" + n}
	}
	return map[string]any{"type": "object"}
}

// OpenAPI returns the OpenAPI 3.1 document of the routes this server
// registers.
func (s *Server) OpenAPI() (map[string]any, error) {
	defs, err := schemas()
	if err != nil {
		return nil, err
	}
	paths := map[string]any{}
	for _, r := range routeDocs {
		if r.routes != 0 && s.Routes&r.routes == 0 || r.routes == 0 && s.Routes == 0 && strings.HasPrefix(r.path, "/v1/") && r.id != "openapi" {
			continue
		}
		op := map[string]any{"operationId": r.id, "summary": r.summary}
		if len(r.params) > 0 {
			var ps []any
			for _, p := range r.params {
				doc := map[string]any{"name": p.name, "in": p.in, "description": p.desc, "required": p.required, "schema": p.schema}
				if p.example != nil {
					doc["example"] = p.example
				}
				ps = append(ps, doc)
			}
			op["parameters"] = ps
		}
		if r.body != nil {
			media := map[string]any{"schema": ref(r.body)}
			if r.example != nil {
				media["example"] = r.example
			}
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": media}}
		}
		resps := map[string]any{}
		ok := map[string]any{"description": "success"}
		switch {
		case r.out != nil:
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": ref(r.out)}}
		case r.text != "":
			ok["content"] = map[string]any{r.text: map[string]any{"schema": map[string]any{"type": "string"}}}
		}
		resps[fmt.Sprint(r.ok)] = ok
		for _, code := range r.errors {
			schema := ref(typeOf[ErrorBody]())
			if r.id == "readyz" {
				schema = ref(typeOf[Readiness]())
			}
			desc := http.StatusText(code)
			if n := r.notes[code]; n != "" {
				desc = n
			}
			resps[fmt.Sprint(code)] = map[string]any{"description": desc, "content": map[string]any{"application/json": map[string]any{"schema": schema}}}
		}
		op["responses"] = resps
		switch r.scope {
		case "":
		case "operator":
			op["security"] = []any{map[string]any{"bearer": []string{}}, map[string]any{}}
			op["description"] = "Needs an operator's API key (tenant \"*\", any scope) when the server has keys, unless it serves metrics publicly (--metrics-public)."
		default:
			op["security"] = []any{map[string]any{"bearer": []string{}}}
			op["description"] = "Needs an API key of scope " + r.scope + " or wider for the tenant when the server has keys."
		}
		methods := []string{strings.ToLower(strings.Fields(r.pattern)[0])}
		if !strings.Contains(r.pattern, " ") { // any method: MCP answers POST (and DELETE/GET with 405)
			methods = []string{"post"}
		}
		item, _ := paths[r.path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[r.path] = item
		}
		for _, m := range methods {
			item[m] = op
		}
	}
	comps := map[string]any{}
	for name, sc := range defs {
		comps[name] = sc
	}
	if s.Dense == nil {
		// Without an embedder the dense arm is refused (400).
		q := defs[schemaName(typeOf[QueryRequest]())].CloneSchemas()
		arms := q.Properties["arms"].Items
		arms.Enum = slices.DeleteFunc(slices.Clone(arms.Enum), func(a any) bool { return a == query.ArmDense })
		comps[schemaName(typeOf[QueryRequest]())] = q
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "codectx", "version": Version,
			"description": "Code context for coding agents: token-budgeted, provenance-carrying context from an organisation's indexed repositories. Errors are {\"error\": \"...\"}."},
		"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
		"paths":             paths,
		"components": map[string]any{
			"schemas":         comps,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "an API key (codectx key create)"}},
		},
	}, nil
}

// openapi serves the OpenAPI document, encoded once: anyone may fetch it,
// and building and encoding it took about 5 ms of CPU a request (27 KB),
// 40 times a refused request, so a few anonymous clients fetching it in a
// loop slowed every tenant's queries (TestSecurityOpenAPICost).
func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	s.openapiOnce.Do(func() {
		doc, err := s.OpenAPI()
		if err == nil {
			s.openapiDoc, err = json.Marshal(doc)
		}
		s.openapiErr = err
	})
	if s.openapiErr != nil {
		writeError(w, http.StatusInternalServerError, s.openapiErr)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(s.openapiDoc)
}

// Patterns returns the route patterns Handler registered, and the
// documented pattern of each route of the OpenAPI document.
func (s *Server) Patterns() (registered []string, documented map[string]string) {
	documented = map[string]string{}
	for _, r := range routeDocs {
		documented[r.pattern] = r.path
	}
	return append([]string(nil), s.patterns...), documented
}
