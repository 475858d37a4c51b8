package chunk

import (
	"path"
	"strings"

	sitter "github.com/smacker/go-tree-sitter"
	"github.com/smacker/go-tree-sitter/golang"
	"github.com/smacker/go-tree-sitter/java"
	"github.com/smacker/go-tree-sitter/javascript"
	"github.com/smacker/go-tree-sitter/python"
	"github.com/smacker/go-tree-sitter/rust"
	"github.com/smacker/go-tree-sitter/typescript/tsx"
	"github.com/smacker/go-tree-sitter/typescript/typescript"

	"codectx/pkg/codectx"
)

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

var goBuiltinTypes = set("bool", "byte", "complex64", "complex128", "error", "float32", "float64",
	"int", "int8", "int16", "int32", "int64", "rune", "string",
	"uint", "uint8", "uint16", "uint32", "uint64", "uintptr", "any", "comparable")

var goBuiltinCalls = func() map[string]bool {
	m := set("append", "cap", "clear", "close", "complex", "copy", "delete", "imag", "len",
		"make", "max", "min", "new", "panic", "print", "println", "real", "recover")
	for t := range goBuiltinTypes {
		m[t] = true
	}
	return m
}()

var (
	cComments = set("comment")
	jComments = set("line_comment", "block_comment")
)

// jsDoc accepts line comments and /** */ blocks, not /* */ license blocks.
func jsDoc(t string) bool {
	return strings.HasPrefix(t, "//") || strings.HasPrefix(t, "/**")
}

func rustDoc(t string) bool {
	return (strings.HasPrefix(t, "///") && !strings.HasPrefix(t, "////")) ||
		(strings.HasPrefix(t, "/**") && !strings.HasPrefix(t, "/**/"))
}

const tsQuery = `
(call_expression function: (_) @call)
(new_expression constructor: (identifier) @type)
(extends_clause value: (_) @type)
(nested_type_identifier) @qtype
(type_identifier) @type
(import_statement source: (string) @import)
(export_statement source: (string) @import)
`

var (
	goSpec = &spec{
		lang: codectx.Go, ts: golang.GetLanguage, walk: walkGo,
		query: `
(call_expression function: (_) @call)
(qualified_type) @qtype
(type_identifier) @type
(import_spec path: (_) @import)
`,
		imports:   func(x *ex, n *sitter.Node) { x.imports.add(unquote(x.text(n))) },
		modName:   func(_, pkg string) string { return pkg },
		comments:  cComments,
		elide:     " { ... }",
		skipTypes: goBuiltinTypes,
		skipCalls: goBuiltinCalls,
	}
	pySpec = &spec{
		lang: codectx.Python, ts: python.GetLanguage, walk: walkPython,
		query: `
(call function: (_) @call)
(type (attribute) @qtype)
(type (identifier) @type)
(generic_type (identifier) @type)
(class_definition superclasses: (argument_list (attribute) @qtype))
(class_definition superclasses: (argument_list (identifier) @type))
(import_statement) @import
(import_from_statement) @import
(future_import_statement) @import
`,
		imports:   pyImports,
		modName:   pyModule,
		elide:     " ...",
		skipTypes: set("str", "int", "float", "bool", "bytes", "object", "None", "list", "dict", "set", "tuple", "type", "complex"),
	}
	javaSpec = &spec{
		lang: codectx.Java, ts: java.GetLanguage, walk: walkJava,
		query: `
(method_invocation) @jcall
(scoped_type_identifier) @qtype
(type_identifier) @type
(import_declaration) @import
`,
		imports: func(x *ex, n *sitter.Node) {
			s := strings.TrimSpace(strings.TrimPrefix(x.text(n), "import"))
			s = strings.TrimPrefix(s, "static ")
			x.imports.add(compact(strings.TrimSuffix(strings.TrimSpace(s), ";")))
		},
		modName: func(p, pkg string) string {
			base := strings.TrimSuffix(path.Base(p), path.Ext(p))
			if pkg == "" {
				return base
			}
			return pkg + "." + base
		},
		comments: jComments,
		docOK:    jsDoc,
		elide:    " { ... }",
	}
	tsSpec = &spec{
		lang: codectx.TypeScript, ts: typescript.GetLanguage, walk: walkTS, query: tsQuery,
		imports: tsImport, modName: tsModule, comments: cComments, docOK: jsDoc, elide: " { ... }",
	}
	tsxSpec = &spec{
		lang: codectx.TSX, ts: tsx.GetLanguage, walk: walkTS, query: tsQuery,
		imports: tsImport, modName: tsModule, comments: cComments, docOK: jsDoc, elide: " { ... }",
	}
	jsSpec = &spec{
		lang: codectx.JavaScript, ts: javascript.GetLanguage, walk: walkTS,
		query: `
(call_expression function: (_) @call)
(new_expression constructor: (identifier) @type)
(class_heritage (identifier) @type)
(import_statement source: (string) @import)
(export_statement source: (string) @import)
`,
		imports: tsImport, modName: tsModule, comments: cComments, docOK: jsDoc, elide: " { ... }",
	}
	rustSpec = &spec{
		lang: codectx.Rust, ts: rust.GetLanguage, walk: walkRust,
		query: `
(call_expression function: (_) @call)
(scoped_type_identifier) @qtype
(type_identifier) @type
(use_declaration argument: (_) @import)
(extern_crate_declaration name: (identifier) @import)
`,
		imports: func(x *ex, n *sitter.Node) {
			if n.Type() == "identifier" {
				x.imports.add(x.text(n))
				return
			}
			x.useTree(n, "")
		},
		modName:   func(p, _ string) string { return rustModule(p) },
		comments:  jComments,
		prefixes:  set("attribute_item"),
		docOK:     rustDoc,
		elide:     " { ... }",
		skipTypes: set("Self"),
	}
)

func specFor(l codectx.Language) *spec {
	switch l {
	case codectx.Go:
		return goSpec
	case codectx.Python:
		return pySpec
	case codectx.Java:
		return javaSpec
	case codectx.TypeScript:
		return tsSpec
	case codectx.TSX:
		return tsxSpec
	case codectx.JavaScript:
		return jsSpec
	case codectx.Rust:
		return rustSpec
	}
	return nil
}

// ---- Go ----

func walkGo(x *ex, root *sitter.Node) {
	kids := x.top
	for i, k := range kids {
		n := k.n
		switch k.typ {
		case "package_clause":
			start, doc := x.leading(kids, i)
			x.header(start, k.end)
			x.modDoc = doc
			if n.NamedChildCount() > 0 {
				x.pkg = x.text(n.NamedChild(0))
			}
		case "import_declaration":
			x.header(k.start, k.end)
		case "function_declaration":
			name := n.ChildByFieldName("name")
			x.add(kids, i, decl{kind: codectx.KindFunction, name: x.text(name), nameNode: name, sigStart: -1, body: n.ChildByFieldName("body")})
		case "method_declaration":
			name := n.ChildByFieldName("name")
			full := goReceiver(x, n.ChildByFieldName("receiver")) + "." + x.text(name)
			x.add(kids, i, decl{kind: codectx.KindMethod, name: full, nameNode: name, sigStart: -1, body: n.ChildByFieldName("body")})
		case "type_declaration":
			var specs []int
			inner := x.kids(n)
			for j, s := range inner {
				if s.typ == "type_spec" || s.typ == "type_alias" {
					specs = append(specs, j)
				}
			}
			if len(specs) == 1 {
				s := inner[specs[0]]
				x.add(kids, i, goTypeDecl(x, s.n, k.start, k.end))
				continue
			}
			x.covered = append(x.covered, [2]int{k.start, k.end})
			for _, j := range specs {
				s := inner[j]
				d := goTypeDecl(x, s.n, s.start, s.end)
				idx := x.add(inner, j, d)
				x.syms[idx].sig = "type " + x.syms[idx].sig
			}
		}
	}
}

func goTypeDecl(x *ex, s *sitter.Node, start, end int) decl {
	name := s.ChildByFieldName("name")
	kind := codectx.KindType
	if t := s.ChildByFieldName("type"); t != nil && s.Type() == "type_spec" {
		switch t.Type() {
		case "struct_type":
			kind = codectx.KindStruct
		case "interface_type":
			kind = codectx.KindInterface
		}
	}
	return decl{kind: kind, name: x.text(name), nameNode: name, sigStart: start, sigEnd: x.braceEnd(start, end)}
}

// goReceiver renders a method receiver as "(*T)" or "(T)", type arguments dropped.
func goReceiver(x *ex, params *sitter.Node) string {
	if params == nil || params.NamedChildCount() == 0 {
		return "()"
	}
	t := params.NamedChild(0).ChildByFieldName("type")
	star := ""
	if t != nil && t.Type() == "pointer_type" {
		star = "*"
		t = t.NamedChild(0)
	}
	if t != nil && t.Type() == "generic_type" {
		t = t.ChildByFieldName("type")
	}
	return "(" + star + x.text(t) + ")"
}

// ---- Python ----

func walkPython(x *ex, root *sitter.Node) {
	kids := x.top
	inHeader, first := true, true
	for i, k := range kids {
		if inHeader {
			isFirst := first && k.typ != "comment"
			if isFirst {
				first = false
			}
			switch {
			case isFirst && k.typ == "expression_statement" && isDocString(k.n):
				x.header(k.start, k.end)
				x.modDoc = pyDocstring(x.text(k.n.NamedChild(0)))
				continue
			case k.typ == "import_statement" || k.typ == "import_from_statement" || k.typ == "future_import_statement":
				x.header(k.start, k.end)
				continue
			case k.typ == "comment":
				continue
			}
			inHeader = false
		}
		x.pyStmt(kids, i, "", false)
	}
}

func (x *ex) pyBlock(block *sitter.Node, prefix string) {
	kids := x.kids(block)
	for i := range kids {
		x.pyStmt(kids, i, prefix, true)
	}
}

func (x *ex) pyStmt(kids []kid, i int, prefix string, inClass bool) {
	def := kids[i].n
	if kids[i].typ == "decorated_definition" {
		def = def.ChildByFieldName("definition")
		if def == nil {
			return
		}
	}
	switch def.Type() {
	case "function_definition":
		name := def.ChildByFieldName("name")
		body := def.ChildByFieldName("body")
		kind := codectx.KindFunction
		if inClass {
			kind = codectx.KindMethod
		}
		x.add(kids, i, decl{kind: kind, name: prefix + x.text(name), nameNode: name, sigStart: int(def.StartByte()), body: body, doc: x.pyBodyDoc(body)})
	case "class_definition":
		name := def.ChildByFieldName("name")
		body := def.ChildByFieldName("body")
		full := prefix + x.text(name)
		x.add(kids, i, decl{kind: codectx.KindClass, name: full, nameNode: name, sigStart: int(def.StartByte()), body: body, doc: x.pyBodyDoc(body), container: true})
		if body != nil {
			x.pyBlock(body, full+".")
		}
	}
}

func isDocString(stmt *sitter.Node) bool {
	return stmt.NamedChildCount() == 1 && stmt.NamedChild(0).Type() == "string"
}

func (x *ex) pyBodyDoc(body *sitter.Node) string {
	if body == nil || body.NamedChildCount() == 0 {
		return ""
	}
	first := body.NamedChild(0)
	if first.Type() != "expression_statement" || !isDocString(first) {
		return ""
	}
	return pyDocstring(x.text(first.NamedChild(0)))
}

// pyDocstring strips the prefix and quotes of a string literal and dedents
// it like inspect.cleandoc.
func pyDocstring(lit string) string {
	lit = strings.TrimLeft(lit, "rRuUbBfF")
	for _, q := range []string{`"""`, `'''`, `"`, `'`} {
		if len(lit) >= 2*len(q) && strings.HasPrefix(lit, q) && strings.HasSuffix(lit, q) {
			lit = lit[len(q) : len(lit)-len(q)]
			break
		}
	}
	ls := strings.Split(lit, "\n")
	indent := -1
	for _, l := range ls[1:] {
		if t := strings.TrimLeft(l, " \t"); t != "" {
			if d := len(l) - len(t); indent < 0 || d < indent {
				indent = d
			}
		}
	}
	ls[0] = strings.TrimSpace(ls[0])
	for i := 1; i < len(ls); i++ {
		if indent > 0 && len(ls[i]) >= indent {
			ls[i] = ls[i][indent:]
		}
		ls[i] = strings.TrimRight(ls[i], " \t\r")
	}
	return strings.Trim(strings.Join(ls, "\n"), "\n")
}

func pyImports(x *ex, n *sitter.Node) {
	switch n.Type() {
	case "future_import_statement":
		x.imports.add("__future__")
	case "import_from_statement":
		x.imports.add(compact(x.text(n.ChildByFieldName("module_name"))))
	case "import_statement":
		for _, k := range x.kids(n) {
			switch {
			case k.field != "name":
			case k.typ == "aliased_import":
				x.imports.add(compact(x.text(k.n.ChildByFieldName("name"))))
			default:
				x.imports.add(compact(x.text(k.n)))
			}
		}
	}
}

// pyModule is the dotted module path of a file: "pkg/sub/mod.py" ->
// "pkg.sub.mod", "pkg/__init__.py" -> "pkg".
func pyModule(p, _ string) string {
	p = strings.TrimSuffix(strings.TrimSuffix(p, ".py"), ".pyi")
	p = strings.TrimSuffix(strings.TrimSuffix(p, "/__init__"), "__init__")
	return strings.ReplaceAll(strings.Trim(p, "/"), "/", ".")
}

// ---- Java ----

func walkJava(x *ex, root *sitter.Node) {
	kids := x.top
	for i, k := range kids {
		switch k.typ {
		case "package_declaration":
			start, doc := x.leading(kids, i)
			x.header(start, k.end)
			x.modDoc = doc
			for _, c := range x.kids(k.n) {
				if c.typ == "scoped_identifier" || c.typ == "identifier" {
					x.pkg = compact(x.src[c.start:c.end])
				}
			}
		case "import_declaration":
			x.header(k.start, k.end)
		default:
			x.javaType(kids, i, "")
		}
	}
}

var javaKinds = map[string]codectx.Kind{
	"class_declaration":           codectx.KindClass,
	"record_declaration":          codectx.KindClass,
	"interface_declaration":       codectx.KindInterface,
	"enum_declaration":            codectx.KindType,
	"annotation_type_declaration": codectx.KindType,
}

func (x *ex) javaType(kids []kid, i int, prefix string) {
	kind, ok := javaKinds[kids[i].typ]
	if !ok {
		return
	}
	n := kids[i].n
	name := n.ChildByFieldName("name")
	body := n.ChildByFieldName("body")
	full := prefix + x.text(name)
	x.add(kids, i, decl{kind: kind, name: full, nameNode: name, sigStart: -1, body: body, container: true})
	x.javaBody(body, full)
}

func (x *ex) javaBody(body *sitter.Node, owner string) {
	kids := x.kids(body)
	for i, k := range kids {
		switch k.typ {
		case "method_declaration", "constructor_declaration", "compact_constructor_declaration":
			name := k.n.ChildByFieldName("name")
			x.add(kids, i, decl{kind: codectx.KindMethod, name: owner + "." + x.text(name), nameNode: name, sigStart: -1, body: k.n.ChildByFieldName("body")})
		case "enum_body_declarations":
			x.javaBody(k.n, owner)
		default:
			x.javaType(kids, i, owner+".")
		}
	}
}

// ---- TypeScript, TSX, JavaScript ----

func walkTS(x *ex, root *sitter.Node) {
	kids := x.top
	inHeader := true
	for i, k := range kids {
		if inHeader {
			switch {
			case k.typ == "import_statement":
				x.header(k.start, k.end)
				continue
			case k.typ == "comment":
				continue
			case k.typ == "expression_statement" && x.hdrStart < 0 && isDirective(x.text(k.n)):
				x.header(k.start, k.end)
				continue
			case (k.typ == "lexical_declaration" || k.typ == "variable_declaration") && k.end-k.start < 300 &&
				strings.Contains(x.src[k.start:k.end], "require("):
				x.header(k.start, k.end) // CommonJS imports
				continue
			}
			inHeader = false
		}
		x.tsDecl(kids, i, k.n, "")
	}
}

func isDirective(s string) bool {
	s = strings.TrimSuffix(strings.TrimSpace(s), ";")
	return s == `"use strict"` || s == `'use strict'` || s == `"use client"` || s == `'use client'`
}

var tsFuncValues = set("arrow_function", "function_expression", "function", "generator_function")

// tsDecl records the declaration n; kids[i] is the statement holding it
// (the export statement for "export function f").
func (x *ex) tsDecl(kids []kid, i int, n *sitter.Node, prefix string) {
	switch n.Type() {
	case "export_statement":
		if d := n.ChildByFieldName("declaration"); d != nil {
			x.tsDecl(kids, i, d, prefix)
		} else if v := n.ChildByFieldName("value"); v != nil {
			x.tsDecl(kids, i, v, prefix)
		}
	case "ambient_declaration":
		if n.NamedChildCount() > 0 {
			x.tsDecl(kids, i, n.NamedChild(0), prefix)
		}
	case "expression_statement":
		if n.NamedChildCount() == 1 {
			if c := n.NamedChild(0); c.Type() == "internal_module" {
				x.tsDecl(kids, i, c, prefix)
			}
		}
	case "internal_module", "module":
		if body := n.ChildByFieldName("body"); body != nil {
			ns := unquote(x.text(n.ChildByFieldName("name")))
			inner := x.kids(body)
			for j, k := range inner {
				x.tsDecl(inner, j, k.n, prefix+ns+".")
			}
		}
	case "function_declaration", "generator_function_declaration", "function_signature", "function", "function_expression", "generator_function":
		x.tsNamed(kids, i, n, prefix, codectx.KindFunction, n.ChildByFieldName("body"), false)
	case "class_declaration", "abstract_class_declaration", "class":
		body := n.ChildByFieldName("body")
		full := x.tsNamed(kids, i, n, prefix, codectx.KindClass, body, true)
		x.tsClass(body, full)
	case "interface_declaration":
		x.tsNamed(kids, i, n, prefix, codectx.KindInterface, nil, false)
	case "type_alias_declaration", "enum_declaration":
		x.tsNamed(kids, i, n, prefix, codectx.KindType, nil, false)
	case "lexical_declaration", "variable_declaration":
		var decls []*sitter.Node
		for _, k := range x.kids(n) {
			if k.typ == "variable_declarator" {
				decls = append(decls, k.n)
			}
		}
		if len(decls) != 1 {
			return
		}
		v := decls[0].ChildByFieldName("value")
		if v == nil {
			return
		}
		name := decls[0].ChildByFieldName("name")
		full := prefix + x.text(name)
		switch {
		case tsFuncValues[v.Type()]:
			x.add(kids, i, decl{kind: codectx.KindFunction, name: full, nameNode: name, sigStart: -1, body: v.ChildByFieldName("body")})
		case v.Type() == "class":
			body := v.ChildByFieldName("body")
			x.add(kids, i, decl{kind: codectx.KindClass, name: full, nameNode: name, sigStart: -1, body: body, container: true})
			x.tsClass(body, full)
		}
	}
}

// tsNamed records a named declaration; without a body the signature stops
// at the first "{" (interfaces, enums).
func (x *ex) tsNamed(kids []kid, i int, n *sitter.Node, prefix string, kind codectx.Kind, body *sitter.Node, container bool) string {
	name := n.ChildByFieldName("name")
	full := prefix + "default"
	if name != nil {
		full = prefix + x.text(name)
	}
	d := decl{kind: kind, name: full, nameNode: name, sigStart: -1, body: body, container: container}
	if body == nil {
		d.sigEnd = x.braceEnd(kids[i].start, kids[i].end)
	}
	x.add(kids, i, d)
	return full
}

func (x *ex) tsClass(body *sitter.Node, owner string) {
	kids := x.kids(body)
	for i, k := range kids {
		switch k.typ {
		case "method_definition", "method_signature", "abstract_method_signature":
			name := k.n.ChildByFieldName("name")
			x.add(kids, i, decl{kind: codectx.KindMethod, name: owner + "." + x.text(name), nameNode: name, sigStart: -1, body: k.n.ChildByFieldName("body")})
		case "public_field_definition", "field_definition":
			v := k.n.ChildByFieldName("value")
			if v == nil || !tsFuncValues[v.Type()] {
				continue
			}
			name := k.n.ChildByFieldName("name")
			if name == nil {
				name = k.n.ChildByFieldName("property")
			}
			x.add(kids, i, decl{kind: codectx.KindMethod, name: owner + "." + x.text(name), nameNode: name, sigStart: -1, body: v.ChildByFieldName("body")})
		}
	}
}

func tsImport(x *ex, n *sitter.Node) { x.imports.add(unquote(x.text(n))) }

// tsModule is the file path without its extension (".d.ts" included).
func tsModule(p, _ string) string {
	if strings.HasSuffix(p, ".d.ts") {
		return strings.TrimSuffix(p, ".d.ts")
	}
	return strings.TrimSuffix(p, path.Ext(p))
}

// ---- Rust ----

func walkRust(x *ex, root *sitter.Node) {
	x.pkg = rustModule(x.path)
	x.rsItems(x.top, "", "", true)
}

func (x *ex) rsItems(kids []kid, prefix, owner string, top bool) {
	inHeader := top
	var modDoc []string
	for i, k := range kids {
		n := k.n
		if inHeader {
			switch {
			case k.typ == "use_declaration" || k.typ == "extern_crate_declaration" || k.typ == "inner_attribute_item" ||
				k.typ == "mod_item" && n.ChildByFieldName("body") == nil:
				x.header(k.start, k.end)
				continue
			case jComments[k.typ]:
				t := x.src[k.start:k.end]
				if strings.HasPrefix(t, "//!") || strings.HasPrefix(t, "/*!") {
					x.header(k.start, k.end)
					modDoc = append(modDoc, t)
				}
				continue
			}
			inHeader = false
		}
		name := n.ChildByFieldName("name")
		switch k.typ {
		case "function_item":
			if owner != "" {
				x.add(kids, i, decl{kind: codectx.KindMethod, name: owner + "::" + x.text(name), nameNode: name, sigStart: -1, body: n.ChildByFieldName("body")})
			} else {
				x.add(kids, i, decl{kind: codectx.KindFunction, name: prefix + x.text(name), nameNode: name, sigStart: -1, body: n.ChildByFieldName("body")})
			}
		case "struct_item", "union_item", "enum_item", "type_item":
			kind := codectx.KindStruct
			if k.typ == "enum_item" || k.typ == "type_item" {
				kind = codectx.KindType
			}
			x.add(kids, i, decl{kind: kind, name: prefix + x.text(name), nameNode: name, sigStart: -1, sigEnd: x.braceEnd(k.start, k.end)})
		case "trait_item":
			full := prefix + x.text(name)
			body := n.ChildByFieldName("body")
			x.add(kids, i, decl{kind: codectx.KindInterface, name: full, nameNode: name, sigStart: -1, body: body, container: true})
			x.rsItems(x.kids(body), prefix, full, false)
		case "impl_item":
			typ := rsTypeBase(x, n.ChildByFieldName("type"))
			label := "impl " + typ
			if tr := n.ChildByFieldName("trait"); tr != nil {
				label = "impl " + rsTypeName(x, tr) + " for " + typ
			}
			body := n.ChildByFieldName("body")
			x.add(kids, i, decl{kind: codectx.KindType, name: prefix + label, sigStart: -1, body: body, container: true})
			x.rsItems(x.kids(body), prefix, prefix+typ, false)
		case "mod_item":
			if body := n.ChildByFieldName("body"); body != nil {
				x.rsItems(x.kids(body), prefix+x.text(name)+"::", "", false)
			}
		}
	}
	if top {
		x.modDoc = cleanComments(modDoc)
	}
}

// rsTypeName is a type path without generic arguments: "de::Deserializer".
func rsTypeName(x *ex, t *sitter.Node) string {
	if t != nil && t.Type() == "generic_type" {
		t = t.ChildByFieldName("type")
	}
	return compact(x.text(t))
}

// rsTypeBase is the last segment of an impl's self type: "&mut Deserializer<R>" -> "Deserializer".
func rsTypeBase(x *ex, t *sitter.Node) string {
	for t != nil && (t.Type() == "reference_type" || t.Type() == "pointer_type") {
		t = t.ChildByFieldName("type")
	}
	s := rsTypeName(x, t)
	if i := strings.LastIndex(s, "::"); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// useTree adds the paths named by a use tree, expanding braces:
// "std::{fmt, io::{self, Read}}" -> std::fmt, std::io, std::io::Read.
func (x *ex) useTree(n *sitter.Node, prefix string) {
	join := func(a, b string) string {
		if a == "" {
			return b
		}
		if b == "" {
			return a
		}
		return a + "::" + b
	}
	switch n.Type() {
	case "scoped_use_list":
		p := join(prefix, compact(x.text(n.ChildByFieldName("path"))))
		if l := n.ChildByFieldName("list"); l != nil {
			x.useTree(l, p)
		}
	case "use_list":
		for _, k := range x.kids(n) {
			x.useTree(k.n, prefix)
		}
	case "use_as_clause":
		x.useTree(n.ChildByFieldName("path"), prefix)
	case "self":
		x.imports.add(prefix)
	case "line_comment", "block_comment":
	default:
		x.imports.add(join(prefix, compact(x.text(n))))
	}
}

// rustModule is the crate-relative module of a file: "src/de/mod.rs" ->
// "crate::de", "src/lib.rs" -> "crate".
func rustModule(p string) string {
	p = strings.TrimSuffix(p, ".rs")
	if i := strings.LastIndex("/"+p, "/src/"); i >= 0 {
		p = p[i+4:]
	}
	parts := strings.Split(strings.Trim(p, "/"), "/")
	if last := parts[len(parts)-1]; last == "mod" || (len(parts) == 1 && (last == "lib" || last == "main")) {
		parts = parts[:len(parts)-1]
	}
	if len(parts) == 0 || parts[0] == "" {
		return "crate"
	}
	return "crate::" + strings.Join(parts, "::")
}
