package chunk

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"sort"
	"strings"
	"unicode/utf8"

	"codectx/pkg/codectx"
)

// The go/parser path chunks Go files without tree-sitter: go/parser is
// several times faster than tree-sitter's Go grammar, and the chunks it
// gives are those of the tree-sitter path exactly (every field of every
// chunk). It rebuilds the top-level nodes tree-sitter's walker sees and the
// captures its query returns (calls, type identifiers, qualified types,
// imports) from the go/ast tree, mapping each construct to the node
// tree-sitter's Go grammar gives it, and then runs the tree-sitter path's
// own layout and build. A file go/parser rejects, or holding a construct
// whose tree-sitter parse is not modelled here, gets a fallback reason and
// is chunked by tree-sitter instead.

// GoParser picks how Parse chunks Go files.
type GoParser int

const (
	// GoDefault is the package default: GoAST.
	GoDefault GoParser = iota
	// GoAST chunks Go files with go/parser, falling back to tree-sitter
	// for files it cannot chunk exactly as tree-sitter does.
	GoAST
	// GoTreeSitter chunks Go files with tree-sitter only.
	GoTreeSitter
)

// goASTDefault is whether GoDefault means GoAST: it does, as chunking Go
// on go/parser is several times faster than on tree-sitter
// (`codectx bench-parse` measures both on the same files).
var goASTDefault = true

func (o Options) goAST() bool {
	switch o.GoParser {
	case GoAST:
		return true
	case GoTreeSitter:
		return false
	}
	return goASTDefault
}

// Fallback reasons of the go/parser path.
const (
	fbSyntax   = "syntax"          // go/parser reported an error
	fbUnicode  = "unicode_ident"   // non-ASCII identifier: Go's and tree-sitter's letter classes differ
	fbComment  = "comment_in_node" // comment where tree-sitter's walker indexes named children
	fbReceiver = "receiver"        // receiver shape the walker would render differently
	fbConstr   = "construct"       // expression or type whose tree-sitter parse is not modelled
	fbNewline  = "newline_join"    // a line tree-sitter may join to the one before
	fbPanic    = "panic"           // the walk panicked (a bug here): tree-sitter decides
	fbDeep     = "deep"            // nested deeper than maxTreeDepth: tree-sitter decides
	fbBudget   = "budget"          // the budget is spent: not a fallback, the file degrades
)

// GoFallback reports why Parse's go/parser path would hand the Go file p to
// tree-sitter, or "" when it chunks the file itself (also for files that
// are not Go, are screened out, that no parser would chunk, or over the
// budget). It is for comparisons such as `codectx bench-parse`.
func GoFallback(p string, content []byte, opt Options) string {
	opt = opt.withDefaults()
	if Detect(p, content) != codectx.Go || screen(p, content, opt) != "" {
		return ""
	}
	if !utf8.Valid(content) {
		content = []byte(strings.ToValidUTF8(string(content), "\uFFFD"))
	}
	b := startBudget(context.Background(), opt.ParseTimeout)
	defer b.stop()
	_, _, fb := parseGoAST(context.Background(), p, string(content), opt, b)
	return fb
}

// parseGoAST chunks the Go source src with go/parser within the budget b.
// A non-empty fallback means the caller must chunk the file with
// tree-sitter (within what is left of b); a non-empty degraded reason
// means line windows, as parseCode's: parse_timeout once b is spent.
func parseGoAST(ctx context.Context, p, src string, opt Options, b *budget) (out parsed, degraded, fallback string) {
	if ctx.Err() != nil || b.spent() {
		return out, codectx.DegradedParseTimeout, ""
	}
	defer func() {
		if r := recover(); r != nil {
			out, degraded, fallback = parsed{}, "", fbPanic // tree-sitter's path decides
		}
	}()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, p, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil || f.Name == nil {
		return out, "", fbSyntax
	}
	if testHookParsed != nil {
		testHookParsed()
	}
	if hasNonASCIIIdent(src, f) {
		return out, "", fbUnicode
	}
	if len(src) > maxTreeDepth && astDeeper(f, maxTreeDepth) {
		// go/ast finds a node's position by descending to its first
		// leaf, so the walk's time grows with the square of the nesting:
		// 160 KB of x.m().m()... took 45 s of CPU. Tree-sitter's path
		// degrades such a file; one just under the bound is the
		// budget's.
		return out, "", fbDeep
	}
	g := &goWalk{
		x:    &ex{sp: goSpec, path: p, src: src, ln: newLines(src), hdrStart: -1, window: opt.WindowLines, b: b},
		base: fset.File(f.Pos()).Base(),
	}
	g.top(f)
	if g.bad != "" {
		return out, "", g.bad
	}
	g.x.layout()
	g.f.reset()
	for _, d := range f.Decls {
		g.decl(d)
	}
	switch {
	case g.bad == fbBudget:
		return out, codectx.DegradedParseTimeout, ""
	case g.bad != "":
		return out, "", g.bad
	}
	x := g.x
	chunks := x.build()
	if b.spent() {
		return out, codectx.DegradedParseTimeout, ""
	}
	return parsed{pkg: x.pkg, imports: x.imports.list, chunks: chunks}, "", ""
}

// astDeeper reports whether the syntax tree of f is more than limit
// levels deep.
func astDeeper(f *ast.File, limit int) bool {
	depth, deep := 0, false
	ast.Inspect(f, func(n ast.Node) bool {
		switch {
		case deep:
			return false
		case n == nil:
			depth--
			return false
		}
		if depth++; depth > limit {
			deep = true
			return false
		}
		return true
	})
	return deep
}

// hasNonASCIIIdent reports an identifier of f that is not ASCII.
func hasNonASCIIIdent(src string, f *ast.File) bool {
	ascii := true
	for i := 0; i < len(src); i++ {
		if src[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return false
	}
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			for i := 0; i < len(id.Name); i++ {
				if id.Name[i] >= utf8.RuneSelf {
					found = true
				}
			}
		}
		return !found
	})
	return found
}

// goWalk holds the go/parser path's state for one file.
type goWalk struct {
	x        *ex
	base     int
	f        filer
	bad      string   // fallback reason, "" while the file is chunked exactly
	comments [][2]int // spans of every comment, in order
	scores   map[ast.Expr]int
}

func (g *goWalk) off(p token.Pos) int { return int(p) - g.base }

func (g *goWalk) fail(reason string) {
	if g.bad == "" {
		g.bad = reason
	}
}

func (g *goWalk) text(n ast.Node) string { return g.x.src[g.off(n.Pos()):g.off(n.End())] }

// commentEnd is where tree-sitter's comment token starting at s ends: a
// line comment runs to the newline, a "\r" before it included.
func (g *goWalk) commentEnd(s int) int {
	src := g.x.src
	if strings.HasPrefix(src[s:], "//") {
		if i := strings.IndexByte(src[s:], '\n'); i >= 0 {
			return s + i
		}
		return len(src)
	}
	if i := strings.Index(src[s+2:], "*/"); i >= 0 {
		return s + 2 + i + 2
	}
	return len(src)
}

// kidsIn lists the comments inside [start, end) that are in none of the
// spans (sorted) merged with the spans, as tree-sitter's named children.
func (g *goWalk) kidsIn(start, end int, spans []kid) []kid {
	lo := sort.Search(len(g.comments), func(i int) bool { return g.comments[i][0] >= start })
	out := make([]kid, 0, len(spans)+4)
	j := 0
	for i := lo; i < len(g.comments) && g.comments[i][0] < end; i++ {
		c := g.comments[i]
		for j < len(spans) && spans[j].start <= c[0] {
			out = append(out, spans[j])
			j++
		}
		if len(out) > 0 && c[0] < out[len(out)-1].end {
			continue // inside a span
		}
		out = append(out, kid{typ: "comment", start: c[0], end: c[1]})
	}
	return append(out, spans[j:]...)
}

// hasComment reports a comment inside [start, end).
func (g *goWalk) hasComment(start, end int) bool {
	i := sort.Search(len(g.comments), func(i int) bool { return g.comments[i][0] >= start })
	return i < len(g.comments) && g.comments[i][0] < end
}

var goDeclTypes = map[token.Token]string{
	token.IMPORT: "import_declaration",
	token.TYPE:   "type_declaration",
	token.VAR:    "var_declaration",
	token.CONST:  "const_declaration",
}

// top rebuilds the root's named children and runs walkGo's rules on them.
func (g *goWalk) top(f *ast.File) {
	x := g.x
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			s := g.off(c.Slash)
			g.comments = append(g.comments, [2]int{s, g.commentEnd(s)})
		}
	}
	pkgStart, pkgEnd := g.off(f.Package), g.off(f.Name.End())
	if g.hasComment(pkgStart, pkgEnd) {
		g.fail(fbComment)
		return
	}
	spans := make([]kid, 0, len(f.Decls)+1)
	spans = append(spans, kid{typ: "package_clause", start: pkgStart, end: pkgEnd})
	for _, d := range f.Decls {
		k := kid{start: g.off(d.Pos()), end: g.off(d.End())}
		switch d := d.(type) {
		case *ast.FuncDecl:
			k.typ = "function_declaration"
			if d.Recv != nil {
				k.typ = "method_declaration"
			}
		case *ast.GenDecl:
			k.typ = goDeclTypes[d.Tok]
		default:
			g.fail(fbConstr)
			return
		}
		spans = append(spans, k)
	}
	x.top = g.kidsIn(0, len(x.src), spans)
	di := 0
	for i, k := range x.top {
		switch k.typ {
		case "comment":
			continue
		case "package_clause":
			start, doc := x.leading(x.top, i)
			x.header(start, k.end)
			x.modDoc = doc
			x.pkg = x.src[g.off(f.Name.Pos()):pkgEnd]
			continue
		}
		d := f.Decls[di]
		di++
		switch d := d.(type) {
		case *ast.FuncDecl:
			g.funcDecl(i, d)
		case *ast.GenDecl:
			switch d.Tok {
			case token.IMPORT:
				x.header(k.start, k.end)
				for _, s := range d.Specs {
					x.imports.add(unquote(s.(*ast.ImportSpec).Path.Value))
				}
			case token.TYPE:
				g.typeDecl(i, d)
			}
		}
	}
}

func (g *goWalk) funcDecl(i int, d *ast.FuncDecl) {
	x := g.x
	body := -1
	if d.Body != nil {
		body = g.off(d.Body.Lbrace)
	}
	nd := decl{kind: codectx.KindFunction, name: d.Name.Name, sigStart: -1}
	if d.Recv != nil {
		recv, ok := g.receiver(d.Recv)
		if !ok {
			g.fail(fbReceiver)
			return
		}
		nd.kind, nd.name = codectx.KindMethod, recv+"."+d.Name.Name
	}
	x.addAt(x.top, i, nd, g.off(d.Name.Pos()), body)
}

// receiver renders a receiver as goReceiver does: "(*T)" or "(T)", type
// arguments dropped.
func (g *goWalk) receiver(l *ast.FieldList) (string, bool) {
	if len(l.List) != 1 || len(l.List[0].Names) > 1 || g.hasComment(g.off(l.Opening), g.off(l.Closing)) {
		return "", false
	}
	t := l.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = "*", s.X
	}
	switch tt := t.(type) {
	case *ast.IndexExpr:
		t = tt.X
	case *ast.IndexListExpr:
		t = tt.X
	case *ast.Ellipsis:
		return "", false
	}
	return "(" + star + g.text(t) + ")", true
}

func (g *goWalk) typeDecl(i int, d *ast.GenDecl) {
	x := g.x
	k := x.top[i]
	if len(d.Specs) == 1 {
		s := d.Specs[0].(*ast.TypeSpec)
		x.addAt(x.top, i, g.typeSpecDecl(s, k.start, k.end), g.off(s.Name.Pos()), -1)
		return
	}
	x.covered = append(x.covered, [2]int{k.start, k.end})
	spans := make([]kid, len(d.Specs))
	for j, s := range d.Specs {
		spans[j] = kid{typ: "type_spec", start: g.off(s.Pos()), end: g.off(s.End())}
	}
	inner := g.kidsIn(k.start, k.end, spans)
	j := 0
	for n, ik := range inner {
		if ik.typ == "comment" {
			continue
		}
		s := d.Specs[j].(*ast.TypeSpec)
		j++
		idx := x.addAt(inner, n, g.typeSpecDecl(s, ik.start, ik.end), g.off(s.Name.Pos()), -1)
		x.syms[idx].sig = "type " + x.syms[idx].sig
	}
}

// typeSpecDecl is goTypeDecl for a go/ast type spec.
func (g *goWalk) typeSpecDecl(s *ast.TypeSpec, start, end int) decl {
	kind := codectx.KindType
	if !s.Assign.IsValid() {
		switch s.Type.(type) {
		case *ast.StructType:
			kind = codectx.KindStruct
		case *ast.InterfaceType:
			kind = codectx.KindInterface
		}
	}
	return decl{kind: kind, name: s.Name.Name, sigStart: start, sigEnd: g.x.braceEnd(start, end)}
}

// ---- captures ----

// The walk below visits the tree in source order and files what the Go
// query captures, in the order tree-sitter returns the captures: the
// callee of each call_expression, every type_identifier and every
// qualified_type. It follows the node each construct gets in tree-sitter's
// Go grammar: an identifier in a type position is a type_identifier, an
// identifier in an expression is not, and an ambiguous construct gets the
// parse tree-sitter's dynamic precedences choose (checked by the
// differential tests against the tree-sitter path).

func (g *goWalk) typeIdent(id *ast.Ident) {
	g.x.fileType(&g.f, g.off(id.Pos()), id.Name)
}

func (g *goWalk) qualified(s *ast.SelectorExpr) {
	g.x.fileQType(&g.f, g.off(s.Pos()), g.off(s.End()), g.text(s))
}

func (g *goWalk) decl(d ast.Decl) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv != nil {
			g.fields(d.Recv)
		}
		g.funcType(d.Type)
		if d.Body != nil {
			g.block(d.Body)
		}
	case *ast.GenDecl:
		g.genDecl(d)
	}
}

func (g *goWalk) genDecl(d *ast.GenDecl) {
	for _, s := range d.Specs {
		switch s := s.(type) {
		case *ast.TypeSpec:
			if s.Assign.IsValid() && s.TypeParams != nil {
				g.fail(fbConstr) // generic alias: no type_alias in the grammar
				return
			}
			g.typeIdent(s.Name)
			if s.TypeParams != nil {
				g.typeParams(s.TypeParams)
			}
			g.typ(s.Type)
		case *ast.ValueSpec:
			if s.Type != nil {
				g.typ(s.Type)
			}
			g.exprs(s.Values)
		}
	}
}

func (g *goWalk) typeParams(l *ast.FieldList) {
	for _, f := range l.List {
		g.elem(f.Type)
	}
}

func (g *goWalk) funcType(t *ast.FuncType) {
	if t.TypeParams != nil {
		g.typeParams(t.TypeParams)
	}
	g.fields(t.Params)
	if t.Results != nil {
		g.fields(t.Results)
	}
}

// fields walks the types of a parameter or result list. In a group of
// n >= 10 names ("a0, a1, ..., a9 int") tree-sitter's parse (its GLR
// stack versions are capped) reads the first n-9 names as type-only
// parameters, so they are type identifiers.
//
// tree-sitter also misreads an unnamed map or chan parameter after an
// unnamed parameter of a bare type name ("(A, map[K]V)" as the names A
// and map of an array type [K]V): such lists fall back.
func (g *goWalk) fields(l *ast.FieldList) {
	for i, f := range l.List {
		if i > 0 && len(f.Names) == 0 && len(l.List[i-1].Names) == 0 {
			_, prevIdent := l.List[i-1].Type.(*ast.Ident)
			switch t := f.Type.(type) {
			case *ast.MapType:
				if prevIdent {
					g.fail(fbConstr)
				}
			case *ast.ChanType:
				if prevIdent && t.Arrow != t.Begin {
					g.fail(fbConstr)
				}
			}
		}
		for i := 0; i+9 < len(f.Names); i++ {
			g.typeIdent(f.Names[i])
		}
		t := f.Type
		if e, ok := t.(*ast.Ellipsis); ok {
			t = e.Elt
		}
		g.typ(t)
	}
}

// elem walks a type_elem: types joined by "|".
func (g *goWalk) elem(t ast.Expr) {
	if b, ok := t.(*ast.BinaryExpr); ok && b.Op == token.OR {
		g.elem(b.X)
		g.elem(b.Y)
		return
	}
	g.typ(t)
}

// typ walks t in a type position (tree-sitter's _type).
func (g *goWalk) typ(t ast.Expr) {
	switch t := t.(type) {
	case *ast.Ident, *ast.SelectorExpr:
		g.typeName(t)
	case *ast.StarExpr:
		g.typ(t.X)
	case *ast.ParenExpr:
		g.typ(t.X)
	case *ast.ArrayType:
		if t.Len != nil {
			if _, ok := t.Len.(*ast.Ellipsis); ok {
				g.fail(fbConstr) // [...]T outside a composite literal
				return
			}
			g.expr(t.Len)
		}
		g.typ(t.Elt)
	case *ast.MapType:
		g.typ(t.Key)
		g.typ(t.Value)
	case *ast.ChanType:
		g.typ(t.Value)
	case *ast.FuncType:
		g.funcType(t)
	case *ast.StructType:
		for _, f := range t.Fields.List {
			g.typ(f.Type)
		}
	case *ast.InterfaceType:
		for _, f := range t.Methods.List {
			if ft, ok := f.Type.(*ast.FuncType); ok && len(f.Names) > 0 {
				g.funcType(ft)
				continue
			}
			g.elem(f.Type)
		}
	case *ast.IndexExpr:
		g.generic(t.X, []ast.Expr{t.Index})
	case *ast.IndexListExpr:
		g.generic(t.X, t.Indices)
	case *ast.UnaryExpr:
		if t.Op != token.TILDE {
			g.fail(fbConstr)
			return
		}
		g.typ(t.X)
	default:
		g.fail(fbConstr)
	}
}

// typeName walks a type name (tree-sitter's type_identifier, or a
// qualified_type of a package name); anything else falls back.
func (g *goWalk) typeName(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		g.typeIdent(e)
		return true
	case *ast.SelectorExpr:
		if _, ok := e.X.(*ast.Ident); ok {
			g.qualified(e)
			return true
		}
	}
	g.fail(fbConstr)
	return false
}

// generic walks a generic_type: its type name and its type arguments.
func (g *goWalk) generic(head ast.Expr, args []ast.Expr) {
	if !g.typeName(head) {
		return
	}
	for _, a := range args {
		g.elem(a)
	}
}

// isTypeHead reports an expression that can name a generic type.
func isTypeHead(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return true
	case *ast.SelectorExpr:
		_, ok := e.X.(*ast.Ident)
		return ok
	}
	return false
}

// isType reports whether tree-sitter can parse e as a type.
func isType(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return true
	case *ast.SelectorExpr:
		_, ok := e.X.(*ast.Ident)
		return ok
	case *ast.StarExpr:
		return isType(e.X)
	case *ast.ParenExpr:
		return isType(e.X)
	case *ast.ArrayType:
		_, ell := e.Len.(*ast.Ellipsis)
		return !ell
	case *ast.MapType, *ast.ChanType, *ast.FuncType, *ast.StructType, *ast.InterfaceType:
		return true
	case *ast.IndexExpr:
		return isTypeHead(e.X) && isElem(e.Index)
	case *ast.IndexListExpr:
		if !isTypeHead(e.X) {
			return false
		}
		for _, a := range e.Indices {
			if !isElem(a) {
				return false
			}
		}
		return true
	case *ast.UnaryExpr:
		return e.Op == token.TILDE && isType(e.X)
	}
	return false
}

func isElem(e ast.Expr) bool {
	if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.OR {
		return isElem(b.X) && isElem(b.Y)
	}
	return isType(e)
}

// isExpr reports whether tree-sitter can parse e as an expression.
func isExpr(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident, *ast.BasicLit, *ast.CompositeLit, *ast.FuncLit, *ast.CallExpr, *ast.SliceExpr:
		return true
	case *ast.SelectorExpr:
		return isExpr(e.X)
	case *ast.TypeAssertExpr:
		return isExpr(e.X)
	case *ast.StarExpr:
		return isExpr(e.X)
	case *ast.ParenExpr:
		return isExpr(e.X)
	case *ast.UnaryExpr:
		return e.Op != token.TILDE && isExpr(e.X)
	case *ast.BinaryExpr:
		return isExpr(e.X) && isExpr(e.Y)
	case *ast.IndexExpr:
		return isExpr(e.X) && isExpr(e.Index) || isType(e)
	case *ast.IndexListExpr:
		return isType(e)
	}
	return false
}

func (g *goWalk) exprs(l []ast.Expr) {
	for _, e := range l {
		g.expr(e)
	}
}

// stop reports whether the walk is over: a fallback reason is known (the
// first is the one given), or the budget is spent.
func (g *goWalk) stop() bool {
	if g.x.b.spend(1) {
		g.fail(fbBudget)
	}
	return g.bad != ""
}

// expr walks e in an expression position (tree-sitter's _expression).
func (g *goWalk) expr(e ast.Expr) {
	if g.stop() {
		return
	}
	switch e := e.(type) {
	case nil, *ast.Ident, *ast.BasicLit:
	case *ast.CompositeLit:
		g.composite(e)
	case *ast.FuncLit:
		g.funcType(e.Type)
		g.block(e.Body)
	case *ast.ParenExpr:
		g.expr(e.X)
	case *ast.SelectorExpr:
		g.expr(e.X)
	case *ast.IndexExpr:
		if !g.indexIsInst(e) {
			g.expr(e.X)
			g.expr(e.Index)
			return
		}
		g.instantiation(e.X, []ast.Expr{e.Index})
	case *ast.IndexListExpr:
		g.instantiation(e.X, e.Indices)
	case *ast.SliceExpr:
		g.expr(e.X)
		g.expr(e.Low)
		g.expr(e.High)
		g.expr(e.Max)
	case *ast.TypeAssertExpr:
		g.expr(e.X)
		if e.Type == nil {
			g.fail(fbConstr) // x.(type) outside a type switch
			return
		}
		g.typ(e.Type)
	case *ast.CallExpr:
		g.call(e)
	case *ast.StarExpr:
		g.expr(e.X)
	case *ast.UnaryExpr:
		if e.Op == token.TILDE {
			g.fail(fbConstr)
			return
		}
		g.expr(e.X)
	case *ast.BinaryExpr:
		g.expr(e.X)
		g.expr(e.Y)
	case *ast.KeyValueExpr:
		g.expr(e.Key)
		g.expr(e.Value)
	default:
		g.fail(fbConstr) // a type where tree-sitter wants an expression
	}
}

// instantiation walks a type_instantiation_expression: f[int, string].
func (g *goWalk) instantiation(head ast.Expr, args []ast.Expr) {
	if !isType(head) {
		g.fail(fbConstr)
		return
	}
	g.typ(head)
	for _, a := range args {
		if !isType(a) {
			g.fail(fbConstr)
			return
		}
		g.typ(a)
	}
}

func (g *goWalk) composite(c *ast.CompositeLit) {
	switch t := c.Type.(type) {
	case nil:
	case *ast.ArrayType:
		if t.Len != nil {
			if _, ok := t.Len.(*ast.Ellipsis); !ok {
				g.expr(t.Len)
			}
		}
		g.typ(t.Elt)
	case *ast.Ident, *ast.SelectorExpr, *ast.MapType, *ast.StructType, *ast.IndexExpr, *ast.IndexListExpr:
		g.typ(t)
	default:
		g.fail(fbConstr)
		return
	}
	for _, el := range c.Elts {
		g.expr(el)
	}
}

// The node tree-sitter gives an ambiguous construct is the parse of the
// highest dynamic precedence (the grammar's prec.dynamic: -1 for a type
// identifier reached through _simple_type, +1 for generic_type, +2 for
// type_arguments, -1 for type_conversion_expression and
// type_instantiation_expression); on a tie it is the type reading
// (type_instantiation over index_expression, type_conversion over a call).
// The scores below are those sums over the parts where readings differ.

const noParse = -1 << 30

// tyScore is the dynamic precedence of e read as a _type.
func (g *goWalk) tyScore(e ast.Expr) int {
	switch e := e.(type) {
	case *ast.Ident:
		return -1
	case *ast.SelectorExpr:
		if _, ok := e.X.(*ast.Ident); ok {
			return 0
		}
	case *ast.StarExpr:
		return g.tyScore(e.X)
	case *ast.ParenExpr:
		return g.tyScore(e.X)
	case *ast.UnaryExpr:
		if e.Op == token.TILDE {
			return g.tyScore(e.X)
		}
	case *ast.ArrayType:
		switch e.Len.(type) {
		case nil:
			return g.tyScore(e.Elt)
		case *ast.Ellipsis:
			return noParse
		}
		return sum(g.exScore(e.Len), g.tyScore(e.Elt))
	case *ast.MapType:
		return sum(g.tyScore(e.Key), g.tyScore(e.Value))
	case *ast.ChanType:
		return g.tyScore(e.Value)
	case *ast.FuncType, *ast.StructType, *ast.InterfaceType:
		return 0 // never read otherwise
	case *ast.IndexExpr:
		if isTypeHead(e.X) {
			return sum(3, g.elemScore(e.Index))
		}
	case *ast.IndexListExpr:
		if isTypeHead(e.X) {
			s := 3
			for _, a := range e.Indices {
				s = sum(s, g.elemScore(a))
			}
			return s
		}
	}
	return noParse
}

func (g *goWalk) elemScore(e ast.Expr) int {
	if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.OR {
		return sum(g.elemScore(b.X), g.elemScore(b.Y))
	}
	return g.tyScore(e)
}

// sum adds scores, noParse absorbing.
func sum(a, b int) int {
	if a <= noParse/2 || b <= noParse/2 {
		return noParse
	}
	return a + b
}

// exScore is the dynamic precedence of e's best reading as an _expression.
func (g *goWalk) exScore(e ast.Expr) int {
	switch e := e.(type) {
	case nil, *ast.Ident, *ast.BasicLit, *ast.FuncLit:
		return 0
	case *ast.CompositeLit:
		s := 0
		for _, el := range e.Elts {
			s = sum(s, g.exScore(el))
		}
		return s
	case *ast.KeyValueExpr:
		return sum(g.exScore(e.Key), g.exScore(e.Value))
	case *ast.ParenExpr:
		return g.exScore(e.X)
	case *ast.SelectorExpr:
		return g.exScore(e.X)
	case *ast.StarExpr:
		return g.exScore(e.X)
	case *ast.UnaryExpr:
		if e.Op != token.TILDE {
			return g.exScore(e.X)
		}
	case *ast.BinaryExpr:
		return sum(g.exScore(e.X), g.exScore(e.Y))
	case *ast.SliceExpr:
		return sum(sum(g.exScore(e.X), g.exScore(e.Low)), sum(g.exScore(e.High), g.exScore(e.Max)))
	case *ast.TypeAssertExpr:
		if e.Type == nil {
			return g.exScore(e.X)
		}
		return sum(g.exScore(e.X), g.tyScore(e.Type))
	case *ast.IndexExpr, *ast.IndexListExpr, *ast.CallExpr:
		if s, ok := g.scores[e]; ok {
			return s
		}
		s := g.exScoreOf(e)
		if g.scores == nil {
			g.scores = map[ast.Expr]int{}
		}
		g.scores[e] = s
		return s
	}
	return noParse
}

func (g *goWalk) exScoreOf(e ast.Expr) int {
	switch e := e.(type) {
	case *ast.IndexExpr:
		return max(g.indexScore(e), g.instScore(e.X, []ast.Expr{e.Index}))
	case *ast.IndexListExpr:
		return g.instScore(e.X, e.Indices)
	case *ast.CallExpr:
		r := g.readCall(e)
		s := r.score
		for _, a := range e.Args {
			s = sum(s, g.exScore(a))
		}
		return s
	}
	return noParse
}

func (g *goWalk) indexScore(e *ast.IndexExpr) int {
	return sum(g.exScore(e.X), g.exScore(e.Index))
}

// instScore reads head[args] as a type_instantiation_expression.
func (g *goWalk) instScore(head ast.Expr, args []ast.Expr) int {
	s := sum(-1, g.tyScore(head))
	for _, a := range args {
		s = sum(s, g.tyScore(a))
	}
	return s
}

// indexIsInst reports whether tree-sitter reads e, in an expression, as a
// type_instantiation_expression rather than an index_expression.
func (g *goWalk) indexIsInst(e *ast.IndexExpr) bool {
	inst := g.instScore(e.X, []ast.Expr{e.Index})
	return inst > noParse/2 && inst >= g.indexScore(e)
}

// callRead is how tree-sitter reads a call: a call_expression whose
// function field is fn (type arguments targs), or a
// type_conversion_expression (conv); score is the reading's dynamic
// precedence over the call's function part (noParse: no reading).
type callRead struct {
	fn    ast.Expr
	targs []ast.Expr
	conv  bool
	score int
}

func (g *goWalk) readCall(c *ast.CallExpr) callRead {
	best := callRead{score: noParse}
	pick := func(r callRead) {
		if r.score > noParse/2 && r.score >= best.score {
			best = r // later candidates win ties
		}
	}
	if isExpr(c.Fun) {
		pick(callRead{fn: c.Fun, score: g.exScore(c.Fun)})
	}
	var head ast.Expr
	var idx []ast.Expr
	switch f := c.Fun.(type) {
	case *ast.IndexExpr:
		head, idx = f.X, []ast.Expr{f.Index}
	case *ast.IndexListExpr:
		head, idx = f.X, f.Indices
	}
	if head != nil && isExpr(head) {
		s := sum(g.exScore(head), 2)
		for _, a := range idx {
			s = sum(s, g.elemScore(a))
		}
		pick(callRead{fn: head, targs: idx, score: s})
	}
	if len(c.Args) == 1 && !c.Ellipsis.IsValid() {
		pick(callRead{conv: true, score: sum(-1, g.tyScore(c.Fun))})
	}
	return best
}

func (g *goWalk) call(c *ast.CallExpr) {
	if id, ok := c.Fun.(*ast.Ident); ok && (id.Name == "new" || id.Name == "make") {
		// tree-sitter always reads new( and make( with a type first
		// (special_argument_list); anything else is an ERROR there.
		if len(c.Args) == 0 || c.Ellipsis.IsValid() || !isType(c.Args[0]) {
			g.fail(fbConstr)
			return
		}
		g.typ(c.Args[0])
		g.exprs(c.Args[1:])
		return
	}
	r := g.readCall(c)
	switch {
	case r.score <= noParse/2:
		g.fail(fbConstr)
	case r.conv:
		g.typ(c.Fun)
		g.expr(c.Args[0])
	default:
		g.x.fileCall(&g.f, g.off(r.fn.Pos()), g.callee(r.fn, 0))
		g.expr(r.fn)
		for _, a := range r.targs {
			g.elem(a)
		}
		g.exprs(c.Args)
	}
}

// callee is ex.callee on the go/ast node fn, a call_expression's function.
func (g *goWalk) callee(fn ast.Expr, depth int) string {
	if s := plainName(g.text(fn)); s != "" {
		return s
	}
	if depth >= 3 {
		return ""
	}
	switch f := fn.(type) {
	case *ast.SelectorExpr:
		return g.callee(f.Sel, depth+1)
	case *ast.CallExpr:
		if r := g.readCall(f); !r.conv && r.fn != nil {
			return g.callee(r.fn, depth+1)
		}
	}
	return ""
}

func (g *goWalk) block(b *ast.BlockStmt) {
	for _, s := range b.List {
		g.stmt(s)
	}
}

func (g *goWalk) stmts(l []ast.Stmt) {
	for _, s := range l {
		g.stmt(s)
	}
}

// joinsPrevious reports a statement starting at b that tree-sitter may
// read as the end of the previous line's expression: it treats a newline
// as a terminator only where it must, so "a[b]" then a line "(c).d()" is
// the conversion a[b](c), and "a[b]" or "pkg.T" then a block is a
// composite literal. (A bare name or a call before the line is not
// joined: the joined reading has the lower dynamic precedence.)
func (g *goWalk) joinsPrevious(b int) bool {
	src := g.x.src
	if b >= len(src) || src[b] != '(' && src[b] != '{' {
		return false
	}
	nl := false
	for i := b - 1; i >= 0; i-- {
		c := src[i]
		switch {
		case c == '\n':
			nl = true
		case isSpace(c):
		default:
			// a comment ending here is skipped whole
			j := sort.Search(len(g.comments), func(k int) bool { return g.comments[k][1] > i })
			if j < len(g.comments) && g.comments[j][0] <= i {
				i = g.comments[j][0]
				continue
			}
			if !nl {
				return false
			}
			if c == ']' {
				return true
			}
			if src[b] == '(' {
				return false
			}
			for i >= 0 && isIdentByte(src[i]) {
				i--
			}
			return i >= 0 && src[i] == '.' // pkg.T, a qualified type
		}
	}
	return false
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= utf8.RuneSelf || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func (g *goWalk) stmt(s ast.Stmt) {
	if g.stop() {
		return
	}
	if s != nil && g.joinsPrevious(g.off(s.Pos())) {
		g.fail(fbNewline)
		return
	}
	switch s := s.(type) {
	case nil, *ast.EmptyStmt, *ast.BranchStmt:
	case *ast.BlockStmt:
		g.block(s)
	case *ast.ExprStmt:
		g.expr(s.X)
	case *ast.AssignStmt:
		g.exprs(s.Lhs)
		g.exprs(s.Rhs)
	case *ast.DeclStmt:
		g.genDecl(s.Decl.(*ast.GenDecl))
	case *ast.IncDecStmt:
		g.expr(s.X)
	case *ast.SendStmt:
		g.expr(s.Chan)
		g.expr(s.Value)
	case *ast.GoStmt:
		g.expr(s.Call)
	case *ast.DeferStmt:
		g.expr(s.Call)
	case *ast.ReturnStmt:
		g.exprs(s.Results)
	case *ast.LabeledStmt:
		g.stmt(s.Stmt)
	case *ast.IfStmt:
		g.stmt(s.Init)
		g.expr(s.Cond)
		g.block(s.Body)
		g.stmt(s.Else)
	case *ast.ForStmt:
		g.stmt(s.Init)
		g.expr(s.Cond)
		g.stmt(s.Post)
		g.block(s.Body)
	case *ast.RangeStmt:
		g.expr(s.Key)
		g.expr(s.Value)
		g.expr(s.X)
		g.block(s.Body)
	case *ast.SwitchStmt:
		g.stmt(s.Init)
		g.expr(s.Tag)
		for _, c := range s.Body.List {
			cc := c.(*ast.CaseClause)
			g.exprs(cc.List)
			g.stmts(cc.Body)
		}
	case *ast.TypeSwitchStmt:
		g.stmt(s.Init)
		switch a := s.Assign.(type) {
		case *ast.AssignStmt: // v := x.(type)
			g.exprs(a.Lhs)
			g.expr(a.Rhs[0].(*ast.TypeAssertExpr).X)
		case *ast.ExprStmt:
			g.expr(a.X.(*ast.TypeAssertExpr).X)
		}
		for _, c := range s.Body.List {
			cc := c.(*ast.CaseClause)
			for _, t := range cc.List {
				g.typ(t)
			}
			g.stmts(cc.Body)
		}
	case *ast.SelectStmt:
		for _, c := range s.Body.List {
			cc := c.(*ast.CommClause)
			g.stmt(cc.Comm)
			g.stmts(cc.Body)
		}
	default:
		g.fail(fbConstr)
	}
}
