package chunk

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode"

	sitter "github.com/smacker/go-tree-sitter"

	"codectx/pkg/codectx"
)

// capture kinds of a language query.
const (
	capCall   = iota // callee expression of a call
	capJCall         // Java method_invocation (object + name)
	capType          // type identifier
	capQType         // qualified type (pkg.Type); suppresses the type identifiers inside it
	capImport        // import statement or its module string
)

var capNames = map[string]int{"call": capCall, "jcall": capJCall, "type": capType, "qtype": capQType, "import": capImport}

// spec describes how one language is chunked.
type spec struct {
	lang      codectx.Language
	ts        func() *sitter.Language
	query     string
	walk      func(x *ex, root *sitter.Node)
	imports   func(x *ex, n *sitter.Node) // adds the modules imported by a capImport node
	modName   func(p, pkg string) string
	comments  map[string]bool // node types that are comments
	prefixes  map[string]bool // node types glued to the next declaration (Rust attributes)
	docOK     func(text string) bool
	elide     string // appended to a member's header in a container outline
	skipTypes map[string]bool
	skipCalls map[string]bool

	once  sync.Once
	q     *sitter.Query
	kinds []int // capture index -> cap*
	qerr  error
	pool  sync.Pool // *worker
}

// worker is a parser and query cursor bound to one language. Workers are
// pooled; one dropped by the pool is freed by the binding's finalizers.
type worker struct {
	p  *sitter.Parser
	qc *sitter.QueryCursor
}

func (w *worker) close() {
	w.qc.Close()
	w.p.Close()
}

func (sp *spec) compiled() (*sitter.Query, []int, error) {
	sp.once.Do(func() {
		q, err := sitter.NewQuery([]byte(sp.query), sp.ts())
		if err != nil {
			sp.qerr = fmt.Errorf("chunk: %s query: %w", sp.lang, err)
			return
		}
		sp.q = q
		sp.kinds = make([]int, q.CaptureCount())
		for i := range sp.kinds {
			k, ok := capNames[q.CaptureNameForId(uint32(i))]
			if !ok {
				sp.qerr = fmt.Errorf("chunk: %s query: unknown capture %q", sp.lang, q.CaptureNameForId(uint32(i)))
				return
			}
			sp.kinds[i] = k
		}
	})
	return sp.q, sp.kinds, sp.qerr
}

func (sp *spec) get() *worker {
	if w, ok := sp.pool.Get().(*worker); ok {
		return w
	}
	p := sitter.NewParser()
	p.SetLanguage(sp.ts())
	return &worker{p: p, qc: sitter.NewQueryCursor()}
}

// testHookParsed runs after a successful parse; tests use it to inject panics.
var testHookParsed func()

type parsed struct {
	pkg     string
	imports []string
	chunks  []codectx.Chunk
}

// parseCode parses src with tree-sitter and extracts symbol chunks within
// what is left of the budget b. A non-empty degraded reason means the
// caller should fall back to windows.
func parseCode(ctx context.Context, sp *spec, p string, src string, opt Options, b *budget) (out parsed, degraded string) {
	if ctx.Err() != nil {
		return out, codectx.DegradedParseTimeout
	}
	q, kinds, err := sp.compiled()
	if err != nil {
		return out, codectx.DegradedParseError
	}
	w := sp.get()
	healthy := false
	defer func() {
		if r := recover(); r != nil {
			out, degraded = parsed{}, codectx.DegradedParseError
			healthy = false
		}
		if healthy {
			sp.pool.Put(w)
		} else {
			w.close()
		}
	}()
	cpu, clock := b.left() // a Go file's budget is shared with go/parser
	if b.spent() || min(cpu, clock) <= 0 {
		healthy = true
		return out, codectx.DegradedParseTimeout
	}
	// The budget, not a cancellable context, bounds the parse: the
	// binding's context watcher can leave a pooled parser's cancel flag set.
	tree, err := parseBounded(w.p, []byte(src), cpu, clock)
	if err != nil {
		w.p.Reset() // a halted parse would otherwise resume on the next call
		healthy = true
		if errors.Is(err, sitter.ErrOperationLimit) {
			return out, codectx.DegradedParseTimeout
		}
		return out, codectx.DegradedParseError
	}
	defer tree.Close()
	if testHookParsed != nil {
		testHookParsed()
	}
	root := tree.RootNode()
	cur := sitter.NewTreeCursor(root)
	defer cur.Close()
	x := &ex{sp: sp, path: p, src: src, ln: newLines(src), cur: cur, hdrStart: -1, window: opt.WindowLines, b: b}
	if root.IsError() {
		healthy = true
		return out, codectx.DegradedParseError
	}
	x.top = x.kids(root)
	if x.mostlyErrors() {
		healthy = true
		return out, codectx.DegradedParseError
	}
	if len(src) > maxTreeDepth && tooDeep(root, maxTreeDepth, b) {
		// The query below would take minutes in one call the budget
		// cannot interrupt.
		healthy = true
		return out, codectx.DegradedParseTimeout
	}
	healthy = true
	if sp.walk(x, root); b.spent() {
		return out, codectx.DegradedParseTimeout
	}
	x.layout()
	if x.capture(w.qc, q, kinds, root); b.spent() {
		return out, codectx.DegradedParseTimeout
	}
	chunks := x.build()
	if b.spent() {
		return out, codectx.DegradedParseTimeout
	}
	return parsed{pkg: x.pkg, imports: x.imports.list, chunks: chunks}, ""
}

// maxTreeDepth bounds the nesting of a syntax tree the chunker queries.
// Tree-sitter's query cursor takes time quadratic in a tree's depth once it
// passes about 32,000 levels: 300 KB of nested generics, calls or
// subscripts (A<A<...>>, g(g(...)), A[A[...]]) took 28 s to over 2
// minutes of CPU in one call the parse timeout does not reach. Code nests
// a few dozen levels (a call or a generic is two or three levels of the
// tree); a file no longer than the bound is not walked, as a tree that
// deep is far too small to cost.
const maxTreeDepth = 4096

// tooDeep reports whether the tree under root is more than limit levels
// deep, or the budget b was spent looking. A node nests about as many
// levels as it spans bytes (a unit chain repeats a span a few times), so
// only nodes spanning at least an eighth of the levels still allowed are
// entered: in code, the top few levels (but every node of a long chain).
func tooDeep(root *sitter.Node, limit int, b *budget) bool {
	c := sitter.NewTreeCursor(root)
	defer c.Close()
	depth := 0
	for {
		if depth > limit || b.spend(1) {
			return true
		}
		n := c.CurrentNode()
		if int(n.EndByte()-n.StartByte())*8 >= limit-depth && c.GoToFirstChild() {
			depth++
			continue
		}
		for !c.GoToNextSibling() {
			if !c.GoToParent() {
				return false
			}
			depth--
		}
	}
}

// sym is a chunk under construction.
type sym struct {
	kind      codectx.Kind
	name      string
	sig       string
	doc       string
	start     int // span, doc comment and decorators included
	end       int
	nameStart int // byte of the name identifier, -1 if none
	keepStart int // member header kept in the parent's outline: [keepStart, keepEnd)
	keepEnd   int // 0 when the member has no body to elide
	container bool
	parent    int
	calls     strset
	types     strset
}

type strset struct {
	list []string
	seen map[string]struct{}
}

func (s *strset) add(v string) {
	if v == "" {
		return
	}
	if _, ok := s.seen[v]; ok {
		return
	}
	if s.seen == nil {
		s.seen = make(map[string]struct{})
	}
	s.seen[v] = struct{}{}
	s.list = append(s.list, v)
}

// kid is a named child node with its cached type, field and span.
type kid struct {
	n     *sitter.Node
	typ   string
	field string
	start int
	end   int
}

// ex holds the extraction state of one file.
type ex struct {
	sp       *spec
	path     string
	src      string
	ln       *lines
	cur      *sitter.TreeCursor
	window   int
	top      []kid // named children of the root
	syms     []sym
	pkg      string
	modDoc   string
	hdrStart int
	hdrEnd   int
	covered  [][2]int // spans owned by no chunk but not loose code (Go "type (" groups)
	imports  strset
	b        *budget // of the whole file's chunking
}

func (x *ex) text(n *sitter.Node) string {
	if n == nil {
		return ""
	}
	return x.src[n.StartByte():n.EndByte()]
}

// kids lists the named children of n, walking with the shared cursor
// (indexing children one by one would be quadratic); only some of them
// where the budget is spent.
func (x *ex) kids(n *sitter.Node) []kid {
	if n == nil {
		return nil
	}
	x.cur.Reset(n)
	if !x.cur.GoToFirstChild() {
		return nil
	}
	var out []kid
	for {
		if x.b.spend(1) {
			return out // the budget is spent: the caller's result is dropped
		}
		c := x.cur.CurrentNode()
		if c.IsNamed() {
			out = append(out, kid{n: c, typ: c.Type(), field: x.cur.CurrentFieldName(), start: int(c.StartByte()), end: int(c.EndByte())})
		}
		if !x.cur.GoToNextSibling() {
			return out
		}
	}
}

// mostlyErrors reports a tree whose top-level ERROR nodes cover more than
// half of the file: the language guess or the file is too broken to chunk.
func (x *ex) mostlyErrors() bool {
	bad := 0
	for _, k := range x.top {
		if k.typ == "ERROR" {
			bad += k.end - k.start
		}
	}
	return bad*2 > len(x.src)
}

// header extends the module header span to cover [start, end).
func (x *ex) header(start, end int) {
	if x.hdrStart < 0 || start < x.hdrStart {
		x.hdrStart = start
	}
	x.hdrEnd = max(x.hdrEnd, end)
}

// leading returns where the declaration kids[i] starts once its adjacent
// doc comments and prefix nodes (attributes) are included, and the doc text.
func (x *ex) leading(kids []kid, i int) (int, string) {
	first := i
	line := x.ln.line(kids[i].start)
	var docs []string
	for j := i - 1; j >= 0; j-- {
		k := kids[j]
		isC, isP := x.sp.comments[k.typ], x.sp.prefixes[k.typ]
		if !isC && !isP {
			break
		}
		if x.ln.line(max(k.end-1, k.start)) < line-1 {
			break
		}
		if isC {
			txt := x.src[k.start:k.end]
			if x.sp.docOK != nil && !x.sp.docOK(txt) {
				break
			}
			if j > 0 && x.ln.line(max(kids[j-1].end-1, kids[j-1].start)) == x.ln.line(k.start) {
				break // trailing comment of the previous statement
			}
			docs = append(docs, txt)
		}
		first = j
		line = x.ln.line(k.start)
	}
	for a, b := 0, len(docs)-1; a < b; a, b = a+1, b-1 {
		docs[a], docs[b] = docs[b], docs[a]
	}
	return kids[first].start, cleanComments(docs)
}

// decl describes a declaration found by a language walker.
type decl struct {
	kind      codectx.Kind
	name      string
	nameNode  *sitter.Node
	sigStart  int          // where the signature text starts (-1: the span node)
	body      *sitter.Node // nil when the declaration has no body
	sigEnd    int          // signature end when body is nil and the text should be cut (e.g. before "{"); 0: span end
	doc       string       // overrides the comment doc (Python docstrings)
	container bool
}

// add records the declaration spanning kids[i] and returns its index.
func (x *ex) add(kids []kid, i int, d decl) int {
	nameStart, bodyStart := -1, -1
	if d.nameNode != nil {
		nameStart = int(d.nameNode.StartByte())
	}
	if d.body != nil {
		bodyStart = int(d.body.StartByte())
	}
	return x.addAt(kids, i, d, nameStart, bodyStart)
}

// addAt is add with the name's and the body's first bytes given (-1:
// none) instead of d.nameNode and d.body, which it ignores; the go/parser
// path, which has no tree-sitter nodes, calls it directly.
func (x *ex) addAt(kids []kid, i int, d decl, nameStart, bodyStart int) int {
	k := kids[i]
	start, doc := x.leading(kids, i)
	if d.doc != "" {
		doc = d.doc
	}
	s := sym{kind: d.kind, name: d.name, doc: doc, start: start, end: k.end, nameStart: nameStart, keepStart: k.start, container: d.container}
	sigStart := d.sigStart
	if sigStart < 0 {
		sigStart = k.start
	}
	sigEnd := k.end
	switch {
	case bodyStart >= 0:
		sigEnd = bodyStart
		s.keepEnd = sigEnd
	case d.sigEnd > 0:
		sigEnd = d.sigEnd
	}
	s.sig = normSig(x.src[sigStart:max(sigStart, sigEnd)])
	x.syms = append(x.syms, s)
	return len(x.syms) - 1
}

// braceEnd returns the offset of the first '{' in n, or 0 when there is none.
func (x *ex) braceEnd(start, end int) int {
	if i := strings.IndexByte(x.src[start:end], '{'); i >= 0 {
		return start + i
	}
	return 0
}

// layout sorts the symbols, links each to its innermost enclosing symbol
// and adds windows for top-level code outside every symbol and the header.
func (x *ex) layout() {
	x.sortSyms()
	covered := x.covered
	if x.hdrStart >= 0 {
		covered = append(covered, [2]int{x.hdrStart, x.hdrEnd})
	}
	for _, s := range x.syms {
		if s.parent < 0 {
			covered = append(covered, [2]int{s.start, s.end})
		}
	}
	sort.Slice(covered, func(a, b int) bool { return covered[a][0] < covered[b][0] })
	pos, n := 0, len(x.syms)
	gap := func(a, b int) {
		if a >= b || !x.gapHasCode(a, b) {
			return
		}
		for _, w := range x.ln.windows(x.path, x.sp.lang, a, b, x.window) {
			x.syms = append(x.syms, sym{kind: codectx.KindWindow, name: w.Name, start: w.StartByte, end: w.EndByte, nameStart: -1})
		}
	}
	for _, c := range covered {
		gap(pos, c[0])
		pos = max(pos, c[1])
	}
	gap(pos, len(x.src))
	if len(x.syms) > n {
		x.sortSyms()
	}
}

func (x *ex) sortSyms() {
	sort.SliceStable(x.syms, func(a, b int) bool {
		if x.syms[a].start != x.syms[b].start {
			return x.syms[a].start < x.syms[b].start
		}
		return x.syms[a].end > x.syms[b].end
	})
	var stack []int
	for i := range x.syms {
		for len(stack) > 0 && x.syms[stack[len(stack)-1]].end <= x.syms[i].start {
			stack = stack[:len(stack)-1]
		}
		x.syms[i].parent = -1
		if len(stack) > 0 {
			x.syms[i].parent = stack[len(stack)-1]
		}
		stack = append(stack, i)
	}
}

// gapHasCode reports whether [a, b) overlaps a top-level node that is not
// a comment and holds a line of code.
func (x *ex) gapHasCode(a, b int) bool {
	i := sort.Search(len(x.top), func(i int) bool { return x.top[i].end > a })
	for ; i < len(x.top) && x.top[i].start < b; i++ {
		switch x.top[i].typ {
		case "comment", "line_comment", "block_comment":
			continue
		}
		return hasCode(x.src[a:b])
	}
	return false
}

// hasCode reports whether text has a line that is neither blank, nor a
// comment, nor bare punctuation such as a closing brace.
func hasCode(text string) bool {
	for line := range strings.SplitSeq(text, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "//") || strings.HasPrefix(t, "/*") || strings.HasPrefix(t, "*") || strings.HasPrefix(t, "#") {
			continue
		}
		if strings.IndexFunc(t, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0 {
			return true
		}
	}
	return false
}

// capture runs the language query once over the tree and files every
// call, type and import under the innermost symbol holding it. It stops
// where the budget is spent.
func (x *ex) capture(qc *sitter.QueryCursor, q *sitter.Query, kinds []int, root *sitter.Node) {
	qc.Exec(q, root)
	var f filer
	f.reset()
	for {
		if x.b.spend(1) {
			return
		}
		m, ci, ok := qc.NextCapture()
		if !ok {
			return
		}
		c := m.Captures[ci]
		n := c.Node
		kind := kinds[c.Index]
		if kind == capImport {
			x.sp.imports(x, n)
			continue
		}
		b := int(n.StartByte())
		switch kind {
		case capCall, capJCall:
			name := x.callee(n, kind, 0)
			if name == "require" && (x.sp.lang == codectx.JavaScript || x.sp.lang == codectx.TypeScript || x.sp.lang == codectx.TSX) {
				x.requireImport(n)
			}
			x.fileCall(&f, b, name)
		case capQType:
			x.fileQType(&f, b, int(n.EndByte()), x.text(n))
		case capType:
			x.fileType(&f, b, x.text(n))
		}
	}
}

// filer is the state of filing captures in document order: the owner
// cursor and the end of the last qualified type.
type filer struct{ cur, qEnd int }

func (f *filer) reset() { f.cur, f.qEnd = -1, -1 }

// fileCall files a call named name whose callee starts at byte b.
func (x *ex) fileCall(f *filer, b int, name string) {
	if o := x.owner(b, &f.cur); o >= 0 && !x.sp.skipCalls[name] {
		x.syms[o].calls.add(name)
	}
}

// fileQType files the qualified type text spanning [b, end); type
// identifiers inside it are not filed on their own.
func (x *ex) fileQType(f *filer, b, end int, text string) {
	f.qEnd = end
	if o := x.owner(b, &f.cur); o >= 0 {
		x.syms[o].types.add(compact(text))
	}
}

// fileType files the type identifier text starting at byte b, unless it
// is inside the last qualified type, a built-in or its symbol's own name.
func (x *ex) fileType(f *filer, b int, text string) {
	o := x.owner(b, &f.cur)
	if b < f.qEnd || o < 0 || x.syms[o].nameStart == b {
		return
	}
	if !x.sp.skipTypes[text] {
		x.syms[o].types.add(text)
	}
}

// owner returns the innermost symbol holding byte b. Captures arrive in
// document order, so cur only moves forward.
func (x *ex) owner(b int, cur *int) int {
	for *cur+1 < len(x.syms) && x.syms[*cur+1].start <= b {
		*cur++
	}
	o := *cur
	for o >= 0 && x.syms[o].end <= b {
		o = x.syms[o].parent
	}
	return o
}

var calleeFields = []string{"field", "property", "attribute", "name", "function"}

// callee names the function called: the expression as written when it is
// a plain (dotted) name, else the last name of it ("a.b().c" -> "c").
func (x *ex) callee(n *sitter.Node, kind, depth int) string {
	if kind == capJCall {
		name := x.text(n.ChildByFieldName("name"))
		if obj := n.ChildByFieldName("object"); obj != nil {
			if o := plainName(x.text(obj)); o != "" {
				return o + "." + name
			}
		}
		return name
	}
	if s := plainName(x.text(n)); s != "" {
		return s
	}
	if depth >= 3 {
		return ""
	}
	for _, f := range calleeFields {
		if c := n.ChildByFieldName(f); c != nil {
			return x.callee(c, kind, depth+1)
		}
	}
	return ""
}

func (x *ex) requireImport(fn *sitter.Node) {
	call := fn.Parent()
	if call == nil {
		return
	}
	args := call.ChildByFieldName("arguments")
	if args == nil || args.NamedChildCount() == 0 {
		return
	}
	if a := args.NamedChild(0); a.Type() == "string" {
		x.imports.add(unquote(x.text(a)))
	}
}

// maxNameText bounds the source text plainName reads. A call's callee
// spans everything it is made of: in a chain x.m().m()...m() or a nested
// func() { func() { ... }() }(), each call's callee holds all the calls
// inside it, so compacting every callee whole took time quadratic in the
// nesting: 160 KB of a Go chain 40,000 calls long took 45 s of CPU, past
// the parse timeout, which then bounded only the parse. A plain name is at most
// 120 bytes; longer text than this would have to be mostly whitespace.
const maxNameText = 512

// plainName returns s without its whitespace when that is a plain name
// (isPlainName), else "", reading at most maxNameText bytes of s.
func plainName(s string) string {
	if len(s) > maxNameText {
		return ""
	}
	if s = compact(s); isPlainName(s) {
		return s
	}
	return ""
}

func isPlainName(s string) bool {
	if s == "" || len(s) > 120 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '$' || c == '.' || c == ':' || c == '@' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80) {
			return false
		}
	}
	return true
}

// compact drops all whitespace ("a.\n\tb" -> "a.b").
func compact(s string) string {
	if strings.IndexAny(s, " \t\r\n") < 0 {
		return s
	}
	return strings.Join(strings.Fields(s), "")
}

func unquote(s string) string {
	return strings.Trim(s, "\"'`")
}

// build turns the symbols into chunks, the module chunk first; nil
// where the budget is spent.
func (x *ex) build() []codectx.Chunk {
	kidsOf := map[int][]int{}
	for i, s := range x.syms {
		if s.parent >= 0 && x.syms[s.parent].container && s.keepEnd > 0 {
			kidsOf[s.parent] = append(kidsOf[s.parent], i)
		}
	}
	out := make([]codectx.Chunk, 0, len(x.syms)+1)
	hs, he := 0, 0
	if x.hdrStart >= 0 {
		hs, he = x.hdrStart, x.hdrEnd
	}
	m := x.ln.chunk(x.path, x.sp.lang, codectx.KindModule, x.sp.modName(x.path, x.pkg), hs, he)
	m.Doc = x.modDoc
	m.Imports = x.imports.list
	out = append(out, m)
	for i := range x.syms {
		s := &x.syms[i]
		if x.b.spend(1 + (s.end-s.start)>>10) {
			return nil
		}
		c := x.ln.chunk(x.path, x.sp.lang, s.kind, s.name, s.start, s.end)
		if kids := kidsOf[i]; len(kids) > 0 {
			c.Body = x.outline(s, kids)
			c.Hash = codectx.HashText(c.Body)
		}
		c.Signature, c.Doc = s.sig, s.doc
		c.Calls, c.Types = s.calls.list, s.types.list
		out = append(out, c)
	}
	return out
}

// outline is the container's source with each member replaced by its
// header and the language's elision marker.
func (x *ex) outline(s *sym, kids []int) string {
	var b strings.Builder
	pos := s.start
	for _, k := range kids {
		m := &x.syms[k]
		if m.start < pos {
			continue
		}
		b.WriteString(x.src[pos:m.start])
		b.WriteString(strings.TrimRight(x.src[m.keepStart:m.keepEnd], " \t\r\n"))
		b.WriteString(x.sp.elide)
		pos = m.end
	}
	b.WriteString(x.src[pos:s.end])
	return b.String()
}

// normSig collapses whitespace, drops a trailing "{" or ":" and caps the length.
func normSig(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.TrimRight(s, " {")
	if strings.HasSuffix(s, ":") && !strings.HasSuffix(s, "::") {
		s = strings.TrimRight(s[:len(s)-1], " ")
	}
	if len(s) > 400 {
		s = strings.ToValidUTF8(s[:400], "")
	}
	return s
}

// cleanComments strips comment markers from consecutive comments.
func cleanComments(texts []string) string {
	var out []string
	for _, t := range texts {
		out = append(out, stripComment(t)...)
	}
	for len(out) > 0 && strings.TrimSpace(out[0]) == "" {
		out = out[1:]
	}
	for len(out) > 0 && strings.TrimSpace(out[len(out)-1]) == "" {
		out = out[:len(out)-1]
	}
	return strings.Join(out, "\n")
}

func stripComment(text string) []string {
	text = strings.TrimRight(text, "\r\n")
	switch {
	case strings.HasPrefix(text, "//"):
		s := text[2:]
		if strings.HasPrefix(s, "go:") || strings.HasPrefix(s, "+build") || strings.HasPrefix(s, "nolint") {
			return nil // directives are not documentation
		}
		if strings.HasPrefix(s, "/") || strings.HasPrefix(s, "!") {
			s = s[1:]
		}
		return []string{strings.TrimRight(strings.TrimPrefix(s, " "), " \t\r")}
	case strings.HasPrefix(text, "/*"):
		s := strings.TrimSuffix(text[2:], "*/")
		s = strings.TrimLeft(s, "*!")
		var out []string
		for l := range strings.SplitSeq(s, "\n") {
			l = strings.TrimLeft(l, " \t")
			if strings.HasPrefix(l, "*") {
				l = strings.TrimPrefix(l[1:], " ")
			}
			out = append(out, strings.TrimRight(l, " \t\r"))
		}
		return out
	case strings.HasPrefix(text, "#"):
		return []string{strings.TrimPrefix(strings.TrimLeft(text, "#"), " ")}
	}
	return []string{text}
}
