package api

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolRules add to the MCP tools' input schemas what the tools check on
// each argument and a Go type cannot say: the name patterns, ranges,
// enums and non-blank strings of the OpenAPI document's request schemas
// (requestRules builds on the two that are also HTTP bodies). An agent
// reads them before it calls, and the SDK refuses a call that breaks
// them with the argument named. Each rule says what the tool enforces,
// no more (TestToolSchemasAgreeWithTools). Which arguments go together
// (exactly one of name and path) stays with the tools' own errors:
// several MCP clients refuse a tool whose input schema has anyOf or
// oneOf at its top.
var toolRules = map[reflect.Type]func(*jsonschema.Schema){
	typeOf[SearchInput](): func(s *jsonschema.Schema) {
		tenantProp(s.Properties["tenant"])
		repoProp(s.Properties["repo"], true, true)
		reposProp(s.Properties["repos"])
		textProp(s.Properties["query"])
		b := s.Properties["budget"]
		b.Minimum, b.Maximum = ptr(1.0), ptr(float64(mcpMaxBudget))
		languagesProp(s.Properties["languages"])
		sessionProp(s.Properties["session"])
	},
	typeOf[SymbolInput](): func(s *jsonschema.Schema) {
		tenantProp(s.Properties["tenant"])
		repoProp(s.Properties["repo"], true, true)
		reposProp(s.Properties["repos"])
		textProp(s.Properties["name"])
		b := s.Properties["budget"]
		b.Minimum, b.Maximum = ptr(1.0), ptr(float64(mcpMaxBudget))
	},
	typeOf[ReferencesInput](): func(s *jsonschema.Schema) {
		tenantProp(s.Properties["tenant"])
		repoProp(s.Properties["repo"], true, true)
		reposProp(s.Properties["repos"])
		l := s.Properties["limit"]
		l.Minimum, l.Maximum = ptr(0.0), ptr(float64(maxReferences))
	},
	typeOf[ImpactInput](): func(s *jsonschema.Schema) {
		tenantProp(s.Properties["tenant"])
		repoProp(s.Properties["repo"], true, false)
		reposProp(s.Properties["repos"])
		d := s.Properties["depth"]
		d.Minimum, d.Maximum = ptr(0.0), ptr(float64(maxImpactDepth))
		l := s.Properties["limit"]
		l.Minimum, l.Maximum = ptr(0.0), ptr(float64(maxImpact))
	},
	typeOf[ReadInput](): func(s *jsonschema.Schema) {
		tenantProp(s.Properties["tenant"])
		r := s.Properties["repo"]
		r.Pattern, r.MaxLength = `^(`+repoName+`)(@[A-Za-z0-9_-]{1,80})?$`, ptr(maxName+81)
		s.Properties["path"].MinLength = ptr(1)
		s.Properties["start_line"].Minimum = ptr(0.0)
		s.Properties["end_line"].Minimum = ptr(0.0)
	},
	typeOf[ReposInput](): func(s *jsonschema.Schema) {
		tenantProp(s.Properties["tenant"])
	},
}

var (
	toolSchemaOnce sync.Once
	toolSchemaDefs map[reflect.Type]*jsonschema.Schema
	toolSchemaErr  error
	// toolCache keeps the tools' resolved schemas across the servers
	// built (one per /v1/mcp caller, one per `codectx mcp`): without it
	// each build inferred and resolved the six output schemas again.
	toolCache = mcp.NewSchemaCache()
)

// toolSchema returns the input schema of a tool whose argument is of
// type T: inferred from T, with T's toolRules. The same value is
// returned each time, so the SDK resolves it once (toolCache).
func toolSchema[T any]() *jsonschema.Schema {
	toolSchemaOnce.Do(func() {
		toolSchemaDefs = map[reflect.Type]*jsonschema.Schema{}
		for t, refine := range toolRules {
			s, err := jsonschema.ForType(t, &jsonschema.ForOptions{})
			if err != nil {
				toolSchemaErr = fmt.Errorf("input schema of %s: %w", t, err)
				return
			}
			refine(s)
			toolSchemaDefs[t] = s
		}
	})
	s := toolSchemaDefs[typeOf[T]()]
	if toolSchemaErr != nil || s == nil {
		// A programming error, found by every test that builds a server.
		panic(fmt.Sprintf("api: no input schema for %s: %v", typeOf[T](), toolSchemaErr))
	}
	return s
}
