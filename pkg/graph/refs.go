package graph

import (
	"slices"
	"strings"

	"codectx/pkg/codectx"
)

// commonNames are short names too generic to resolve by repo-wide
// uniqueness: a call to get() or a reference to Error says nothing about
// which declaration is meant. Compared lower-case.
var commonNames = map[string]bool{}

func init() {
	for _, n := range strings.Fields(`
		get set new init __init__ run close string len main test setup teardown
		to_string tostring clone default from into fmt write read open start stop
		update add remove delete call apply push pop append insert next has
		contains equals hashcode error errorf info debug warn log print println
		printf sprintf format size length value values keys items name id type
		map filter reduce foreach then catch is_empty isempty iter reset load save
		send handle process execute create build make copy free done wait lock
		unlock flush emit on off parse validate check list dict object result
		option vec box rc arc self this super some none ok err any bool int
		str float char byte bytes number boolean array promise void unit
		`) {
		commonNames[n] = true
	}
}

// builtinMethods are, per language, the methods of its built-in and
// standard-library types (Python's str, bytes, list, dict; JavaScript's
// String, Array, Promise): a call of one on a receiver of unknown type
// (data.decode(), s.trim()) is most likely of that type, so it is not
// resolved to the repository's only method of the name (every
// bytes.decode() call became a call of JSONDecoder.decode). Compared
// lower-case; a call through self, this or a type still resolves.
//
// Java and Rust have none here: their types define such names
// themselves (the http crate's HeaderMap.entry, get_mut, extend), and
// lists for them lowered validation MRR from 0.750 to 0.744 and packed
// recall at 8k and 16k (0.974 to 0.970, 0.989 to 0.983); the Python and
// JavaScript lists changed no figure.
var builtinMethods = map[codectx.Language]map[string]bool{}

func init() {
	for lang, names := range map[codectx.Language]string{
		codectx.Python: `decode encode split rsplit splitlines join strip lstrip rstrip lower
			upper title capitalize casefold replace startswith endswith find rfind index
			rindex count isdigit isalpha isalnum isspace isupper islower zfill ljust rjust
			center partition rpartition expandtabs translate extend sort reverse
			setdefault popitem discard union intersection difference issubset
			issuperset readline readlines writelines seek tell fileno isoformat
			strftime total_seconds group groups groupdict match search sub findall
			finditer fullmatch hexdigest digest`,
		codectx.JavaScript: jsBuiltinMethods,
		codectx.TypeScript: jsBuiltinMethods,
		codectx.TSX:        jsBuiltinMethods,
	} {
		m := map[string]bool{}
		for _, n := range strings.Fields(names) {
			m[n] = true
		}
		builtinMethods[lang] = m
	}
}

const jsBuiltinMethods = `slice splice indexof lastindexof includes concat some every find
	findindex trim trimstart trimend tolowercase touppercase substring substr charat
	charcodeat padstart padend match matchall replace replaceall split join sort
	reverse fill flat flatmap entries assign freeze stringify resolve reject finally
	bind valueof localecompare startswith endswith repeat at getitem setitem
	removeitem addeventlistener removeeventlistener queryselector queryselectorall
	preventdefault stoppropagation json text getattribute setattribute appendchild`

func firstSegment(s string) string {
	i := strings.Index(s, ".")
	if j := strings.Index(s, "::"); j >= 0 && (i < 0 || j < i) {
		i = j
	}
	if i >= 0 {
		return s[:i]
	}
	return s
}

func isCommon(name string) bool { return commonNames[strings.ToLower(name)] }

// outcome of one lookup tier.
type outcome int

const (
	none outcome = iota
	found
	ambiguous
)

// pick reduces a candidate list to one symbol: a single candidate wins; of
// several, a single one of the best rank wins; otherwise ambiguous.
//
// Overloads (Java methods, redefinitions under if/else, Go build-tag
// variants) share owner, name and file or package; they count as one
// target, the lowest id.
func (b *builder) pick(cands []int32, exclude int32) (int32, outcome) {
	best, n, top := int32(-1), 0, -1
	overload := true
	for _, c := range cands {
		if c == exclude {
			continue
		}
		r := rank(b.syms[c].kind)
		switch {
		case r > top:
			best, n, top, overload = c, 1, r, true
		case r == top:
			n++
			if !b.sameDecl(b.syms[best], b.syms[c]) {
				overload = false
				if top == maxRank {
					return -1, ambiguous // nothing can outrank these two
				}
			}
			if c < best {
				best = c
			}
		}
	}
	switch {
	case n == 0:
		return -1, none
	case n == 1 || overload:
		return best, found
	}
	return -1, ambiguous
}

// sameDecl reports whether x and y are variants of one declaration.
func (b *builder) sameDecl(x, y *symInfo) bool {
	if x.owner != y.owner || x.short != y.short {
		return false
	}
	if x.file == y.file {
		return true
	}
	g := b.files[x.file].group
	return g != "" && g == b.files[y.file].group
}

// addKeys records the names a symbol looks up (Memo.Build), each with
// its last separator.
func (r *resolver) addKeys(names []string) {
	r.keys = append(r.keys, names...)
	for _, n := range names {
		r.seps = append(r.seps, sepOf(n))
	}
}

func (r *resolver) resolveRefs(s *symInfo) {
	b := r.b
	e0 := len(r.sedges)
	names := r.names[:0]
	for _, c := range s.calls {
		if n := cleanCallee(c); n != "" {
			names = append(names, n)
		}
	}
	names = uniq(names)
	if b.memo {
		r.addKeys(names)
	}
	for _, name := range names {
		t, o := b.resolveCall(s, name)
		switch o {
		case found:
			r.addSymEdge(s.idx, t, EdgeCall)
		case ambiguous:
			r.ambiguous++
		}
	}
	names = names[:0]
	for _, ty := range s.types {
		names = append(names, typeNames(ty)...)
	}
	names = uniq(names)
	if b.memo {
		r.addKeys(names)
	}
	for _, name := range names {
		t, o := b.resolveType(s, name)
		switch o {
		case found:
			r.addSymEdge(s.idx, t, EdgeType)
		case ambiguous:
			r.ambiguousTypes++
		}
	}
	r.names = names
	// The symbol's edges sorted (by target, then kind): the parts' lists,
	// symbol after symbol, are then sorted as a whole, and graph only
	// checks that instead of sorting them (a memo build takes a symbol's
	// edges in their last order, their targets mapped in order).
	slices.SortFunc(r.sedges[e0:], cmpEdge)
}

// uniq sorts and dedups names in place.
func uniq(names []string) []string {
	slices.Sort(names)
	return slices.Compact(names)
}

// cleanCallee normalises a callee spelling: "foo()" -> "foo", "new Foo" ->
// "Foo", "Vec::<T>::new" -> "Vec::new", "&x.f" -> "x.f". Macros ("println!")
// and empty names give "".
func cleanCallee(c string) string {
	c = strings.TrimSpace(c)
	if i := strings.IndexByte(c, '('); i >= 0 {
		c = c[:i]
	}
	c = strings.TrimPrefix(c, "new ")
	c = strings.TrimLeft(c, "&*! ")
	c = strings.TrimSpace(stripGeneric(c))
	c = strings.ReplaceAll(c, "::::", "::") // from "Vec::<T>::new"
	c = strings.ReplaceAll(c, "?.", ".")
	c = strings.TrimRight(c, ":.")
	if c == "" || strings.HasSuffix(c, "!") || strings.ContainsAny(c, " \t\n") {
		return ""
	}
	return c
}

// typeNames splits a type reference into the type names it mentions:
// "*http.Header" -> [http.Header], "Result<u8, Error>" -> [Result u8
// Error], "&'a mut Foo" -> [Foo], "[]pkg.T" -> [pkg.T].
func typeNames(t string) []string {
	var out []string
	isID := func(c byte) bool {
		return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
	}
	for i := 0; i < len(t); {
		if !isID(t[i]) {
			i++
			continue
		}
		lifetime := i > 0 && t[i-1] == '\''
		j := i
		for j < len(t) {
			switch {
			case isID(t[j]):
				j++
				continue
			case t[j] == '.' && j+1 < len(t) && isID(t[j+1]):
				j++
				continue
			case strings.HasPrefix(t[j:], "::") && j+2 < len(t) && isID(t[j+2]):
				j += 2
				continue
			}
			break
		}
		name := t[i:j]
		i = j
		if lifetime || name[0] >= '0' && name[0] <= '9' || typeKeywords[name] {
			continue
		}
		out = append(out, name)
	}
	return out
}

var typeKeywords = map[string]bool{
	"mut": true, "dyn": true, "impl": true, "const": true, "fn": true, "func": true,
	"chan": true, "map": true, "struct": true, "interface": true, "extends": true,
	"keyof": true, "typeof": true, "readonly": true, "unique": true,
}

// lookupTiers searches name in a per-file index by tier (same file,
// package, imported files) and then repo-wide (see repoWide).
//
// The package tier takes the group's joined index (perGroup): it holds
// the caller's own file too, but when that tier is reached the file's
// candidates are at most the caller itself, which pick excludes, so the
// candidates are those of the other files of the package, in file order.
func (b *builder) lookupTiers(s *symInfo, name string, ix fileIndex, all map[string][]int32) (int32, outcome) {
	f := b.files[s.file]
	if t, o := b.pick(ix.file(f.idx, name), s.idx); o != none {
		return t, o
	}
	// The package (Go directory package, Java package), then the files
	// the caller's file imports.
	if f.gidx >= 0 {
		if t, o := b.pick(ix.group(f, name), s.idx); o != none {
			return t, o
		}
	}
	var cands []int32
	for _, fi := range f.imports {
		cands = append(cands, ix.file(fi, name)...)
	}
	if t, o := b.pick(cands, s.idx); o != none {
		return t, o
	}
	return b.repoWide(all[name], name, s.idx)
}

// repoWide picks among repository-wide candidates: a single one counts
// only for an uncommon name; several are ambiguous either way.
func (b *builder) repoWide(cands []int32, name string, exclude int32) (int32, outcome) {
	t, o := b.pick(cands, exclude)
	if o == found && isCommon(name) {
		return -1, none
	}
	return t, o
}

// resolveCall applies the conservative rules: bare names through the
// scope tiers; self/this/cls/Self to the enclosing class; a qualifier
// naming an imported module or package to that module's top level; a
// qualifier naming a unique type to that type's method; otherwise a
// method name unique in the repository.
func (b *builder) resolveCall(s *symInfo, name string) (int32, outcome) {
	f := b.files[s.file]
	i, w := lastSep(name)
	if i < 0 {
		if f.Language != codectx.Java {
			return b.lookupTiers(s, name, b.topIndex(), b.topAll)
		}
		// Java has no free functions: a bare call is a method of the
		// enclosing class, else a static import.
		if t, o := b.selfMethod(s, name); o != none {
			return t, o
		}
		if t, o := b.lookupTiers(s, name, b.topIndex(), b.topAll); o != none {
			return t, o
		}
		return b.pick(b.inFile(b.methAll[name], f.imports), s.idx)
	}
	q, m := name[:i], name[i+w:]
	if m == "" {
		return -1, none
	}
	switch q {
	case "self", "this", "cls", "Self":
		if !(q == "self" && w == 2) { // Rust self::foo is a module path
			return b.selfMethod(s, m)
		}
	}
	// Qualifier naming an imported module / package / Rust path.
	if files, ok := b.qualFiles(f, q, w); ok {
		var cands []int32
		for _, fi := range files {
			cands = append(cands, b.topIndex().file(fi, m)...)
		}
		return b.pick(cands, s.idx)
	}
	// Qualifier naming a type: static method or constructor. A type-like
	// qualifier that names no type of the repository is external.
	if tq := lastSegment(q); isTypeLike(tq) {
		t, o := b.lookupTiers(s, tq, b.typesIndex(), b.typesAll)
		if o == found {
			return b.methodOf(s, t, m)
		}
		return -1, o
	}
	// obj.method on an unknown receiver: not on an external module, not a
	// common name.
	if head := firstSegment(q); f.ext[head] || f.ext[q] {
		return -1, none
	}
	if f.Language == codectx.Go && s.ownerShort != "" && !isCommon(m) {
		// Go receiver calls (r.routes()): a method of the caller's own type.
		if t, o := b.pick(b.inFile(b.methods[ownerKey{s.ownerShort, m}], b.groupOf(f)), s.idx); o == found {
			return t, o
		}
	}
	if builtinMethods[f.Language][strings.ToLower(m)] {
		return -1, none
	}
	return b.repoWide(b.methAll[m], m, s.idx)
}

// isTypeLike reports whether a qualifier could name a type: by the
// convention of every supported language, a capitalised identifier.
func isTypeLike(q string) bool {
	return q != "" && q[0] >= 'A' && q[0] <= 'Z'
}

// qualFiles resolves a call qualifier to module files.
func (b *builder) qualFiles(f *fileInfo, q string, sepWidth int) ([]int32, bool) {
	if files := f.quals[q]; len(files) > 0 {
		return files, true
	}
	if f.Language == codectx.Rust && sepWidth == 2 {
		head, _, _ := strings.Cut(q, "::")
		switch head {
		case "crate", "self", "super":
			if t, _, ok := b.rustPath(f, q); ok {
				return []int32{t}, true
			}
		}
	}
	return nil, false
}

// selfMethod resolves a method m of the caller's enclosing class: same
// file first, then the package, then the repository.
func (b *builder) selfMethod(s *symInfo, m string) (int32, outcome) {
	owner := s.ownerShort
	if owner == "" && isType(s.kind) {
		owner = s.short
	}
	if owner == "" {
		return -1, none
	}
	cands := b.methods[ownerKey{owner, m}]
	f := b.files[s.file]
	if t, o := b.pick(b.inFile(cands, []int32{f.idx}), s.idx); o != none {
		return t, o
	}
	if t, o := b.pick(b.inFile(cands, b.groupOf(f)), s.idx); o != none {
		return t, o
	}
	return b.pick(cands, s.idx)
}

// methodOf resolves method m of type symbol t: in t's file first, then any
// method with that owner name in the repository.
func (b *builder) methodOf(s *symInfo, t int32, m string) (int32, outcome) {
	ts := b.syms[t]
	cands := b.methods[ownerKey{ts.short, m}]
	if r, o := b.pick(b.inFile(cands, []int32{ts.file}), s.idx); o != none {
		return r, o
	}
	return b.pick(cands, s.idx)
}

func (b *builder) groupOf(f *fileInfo) []int32 {
	if f.group == "" {
		return []int32{f.idx}
	}
	return b.groups[f.group]
}

// inFile keeps the candidates declared in one of files.
func (b *builder) inFile(cands, files []int32) []int32 {
	var out []int32
	for _, c := range cands {
		if containsIdx(files, b.syms[c].file) {
			out = append(out, c)
		}
	}
	return out
}

// resolveType resolves a type reference: a qualified "pkg.T" through the
// qualifier's files, a bare "T" through the scope tiers.
func (b *builder) resolveType(s *symInfo, name string) (int32, outcome) {
	f := b.files[s.file]
	i, w := lastSep(name)
	if i < 0 {
		return b.lookupTiers(s, name, b.typesIndex(), b.typesAll)
	}
	q, m := name[:i], name[i+w:]
	if files, ok := b.qualFiles(f, q, w); ok {
		var cands []int32
		for _, fi := range files {
			cands = append(cands, b.typesIndex().file(fi, m)...)
		}
		return b.pick(cands, s.idx)
	}
	// Unknown qualifier (external package, nested type path): only a
	// repo-wide unique, uncommon name.
	if f.Language == codectx.Go {
		return -1, none // Go: a qualifier we did not resolve is another module
	}
	return b.repoWide(b.typesAll[m], m, s.idx)
}
