package graph

import (
	"cmp"
	"path"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"codectx/pkg/codectx"
)

// builder holds the indexes used while resolving one Input.
type builder struct {
	files  []*fileInfo // sorted by path
	byPath map[string]int32
	syms   []*symInfo // sorted by id

	// Go
	modules []goModule // longest module path first
	// goDirImports: Go import paths are repository directories ($GOROOT/src).
	goDirImports bool
	goPkg        map[string][]int32   // dir -> non-test .go files
	groups       map[string][]int32   // package group -> files (Go dir+package, Java package)
	javaCls      map[string][]int32   // "a.b.C" -> files
	javaPkg      map[string][]int32   // "a.b" -> files
	pyInit       map[string]bool      // dirs holding an __init__.py
	topBy        []map[string][]int32 // per file: short name -> top-level functions and types
	typesBy      []map[string][]int32 // per file: short name -> type symbols
	sizes        nameSizes            // sizes to make the repository-wide name indexes with
	ngroups      int                  // package groups of two files or more (fileInfo.gidx)
	fileSyms     [][]int32            // per file: its symbols in index order (fileIndex without maps)
	topGroup     []map[string][]int32 // per package group: topBy of its files joined in file order
	typesGroup   []map[string][]int32 // per package group: typesBy of its files joined in file order
	methods      map[ownerKey][]int32 // (owner short, name) -> methods
	topAll       map[string][]int32   // short name -> top-level functions and types, repo-wide
	typesAll     map[string][]int32   // short name -> types, repo-wide
	methAll      map[string][]int32   // short name -> methods, repo-wide
	fedges       map[rawEdge]struct{} // import edges
	stats        Stats                //
	refs         []resolver           // the call and type edges, by part of the symbols

	// Memo.Build: record each symbol's result in res; take those of the
	// symbols reuse maps (>= 0) from prev, their targets mapped by toNew.
	memo  bool
	res   []symResult
	reuse []int32
	prev  *memoState
	toNew []int32
}

// resolver resolves the references of a part of the symbols: the
// builder's indexes are read-only by then, so parts run concurrently, each
// gathering its own edges and counts.
type resolver struct {
	b                         *builder
	fedges, sedges            []rawEdge // with repeats
	ambiguous, ambiguousTypes int
	names                     []string // scratch
	keys                      []string // Memo.Build: the names looked up, all symbols of the part
	seps                      []int32  // and where each one's last separator is (sepOf)
}

// memoEnds are where a symbol's edges and keys end in its part's.
type memoEnds struct{ edges, keys int32 }

type goModule struct{ dir, path string }

type ownerKey struct{ owner, name string }

type fileInfo struct {
	FileInput
	idx     int32
	dir     string
	group   string             // package group: "go:dir:pkg", "java:pkg", "" for none
	gidx    int32              // index of group in topGroup and typesGroup, -1 for none or a group of one file
	imports []int32            // resolved imported files, deduped, in order
	quals   map[string][]int32 // qualifier as used in calls ("http", "utils", "de") -> files; nil for none
	ext     map[string]bool    // qualifiers bound by unresolved (external) imports; nil for none
	// The file's distinct import specs and the unresolved ones (Stats).
	nImports, nUnresolved int32
}

type symInfo struct {
	idx        int32
	id         int
	file       int32
	kind       codectx.Kind
	owner      string // "" for top-level symbols
	ownerShort string
	short      string
	calls      []string
	types      []string
}

// Build resolves the input into a graph. It never fails: anything it cannot
// resolve is counted in Stats and left out.
func Build(in Input) *Graph {
	b := newBuilder()
	b.index(in)
	wait := b.goIndexNames()
	for _, f := range b.files {
		b.resolveImports(f)
	}
	wait()
	b.resolveAll()
	return b.graph()
}

func newBuilder() *builder {
	return &builder{
		byPath:  map[string]int32{},
		goPkg:   map[string][]int32{},
		groups:  map[string][]int32{},
		javaCls: map[string][]int32{},
		javaPkg: map[string][]int32{},
		pyInit:  map[string]bool{},
		fedges:  map[rawEdge]struct{}{},
	}
}

// Symbols a part of resolveAll holds at least, and the most parts.
const (
	minPartSymbols = 4096
	maxParts       = 4
)

// testParts, when positive, is the number of parts (tests).
var testParts int

// resolveAll resolves the references of every symbol, in parts over up to
// one goroutine per CPU. The graph does not depend on the split: the edges
// of all parts are sorted and deduplicated together, the counts summed.
func (b *builder) resolveAll() {
	n := max(1, min(runtime.GOMAXPROCS(0), maxParts, len(b.syms)/minPartSymbols))
	if testParts > 0 {
		n = testParts
	}
	b.refs = make([]resolver, n)
	var ends []memoEnds
	if b.memo {
		b.res = make([]symResult, len(b.syms))
		ends = make([]memoEnds, len(b.syms))
	}
	var wg sync.WaitGroup
	for i := range b.refs {
		r := &b.refs[i]
		r.b = b
		part := b.syms[i*len(b.syms)/n : (i+1)*len(b.syms)/n]
		wg.Go(func() {
			for _, s := range part {
				if !b.memo {
					r.resolveRefs(s)
					continue
				}
				a0, t0 := r.ambiguous, r.ambiguousTypes
				if b.reuse != nil && b.reuse[s.idx] >= 0 {
					old := &b.prev.res[b.reuse[s.idx]]
					for _, e := range old.edges {
						r.addSymEdge(s.idx, b.toNew[e.to], e.kind)
					}
					r.ambiguous += int(old.amb)
					r.ambiguousTypes += int(old.ambT)
					b.res[s.idx].keys, b.res[s.idx].seps = old.keys, old.seps // the same names: not copied
				} else {
					r.resolveRefs(s)
				}
				ends[s.idx] = memoEnds{int32(len(r.sedges)), int32(len(r.keys))}
				b.res[s.idx].amb, b.res[s.idx].ambT = int32(r.ambiguous-a0), int32(r.ambiguousTypes-t0)
			}
		})
	}
	wg.Wait()
	if b.memo {
		for i := range b.refs {
			r := &b.refs[i]
			e0, k0 := int32(0), int32(0)
			for _, s := range b.syms[i*len(b.syms)/n : (i+1)*len(b.syms)/n] {
				e := ends[s.idx]
				b.res[s.idx].edges = r.sedges[e0:e.edges:e.edges]
				if e.keys > k0 || b.res[s.idx].keys == nil {
					b.res[s.idx].keys = r.keys[k0:e.keys:e.keys]
					b.res[s.idx].seps = r.seps[k0:e.keys:e.keys]
				}
				e0, k0 = e.edges, e.keys
			}
		}
	}
	for _, r := range b.refs {
		b.stats.Ambiguous += r.ambiguous
		b.stats.AmbiguousTypes += r.ambiguousTypes
	}
}

func (b *builder) index(in Input) {
	// Files: first occurrence of a path wins, sorted for determinism.
	seen := map[string]bool{}
	var files []FileInput
	for _, f := range in.Files {
		p := cleanPath(f.Path)
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		f.Path = p
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for i, f := range files {
		fi := &fileInfo{FileInput: f, idx: int32(i), dir: dirOf(f.Path)}
		b.files = append(b.files, fi)
		b.byPath[f.Path] = int32(i)
	}

	// Go modules, longest path first so nested modules win.
	mods := map[string]string{}
	for d, m := range in.GoModules {
		mods[cleanPath(d)] = m
	}
	if in.GoModule != "" {
		mods[""] = in.GoModule
	}
	for d, m := range mods {
		if m = strings.Trim(m, "/ "); m != "" {
			b.modules = append(b.modules, goModule{dir: d, path: m})
		}
	}
	sort.Slice(b.modules, func(i, j int) bool {
		a, c := b.modules[i], b.modules[j]
		if len(a.path) != len(c.path) {
			return len(a.path) > len(c.path)
		}
		return a.path < c.path
	})

	for _, f := range b.files {
		base := path.Base(f.Path)
		switch f.Language {
		case codectx.Go:
			if !strings.HasSuffix(base, "_test.go") {
				b.goPkg[f.dir] = append(b.goPkg[f.dir], f.idx)
			}
			f.group = "go:" + f.dir + ":" + f.Package
		case codectx.Java:
			cls := strings.TrimSuffix(base, ".java")
			if f.Package != "" {
				f.group = "java:" + f.Package
				b.javaPkg[f.Package] = append(b.javaPkg[f.Package], f.idx)
				cls = f.Package + "." + cls
			}
			b.javaCls[cls] = append(b.javaCls[cls], f.idx)
		case codectx.Python:
			if base == "__init__.py" {
				b.pyInit[f.dir] = true
			}
		}
		if f.group != "" {
			b.groups[f.group] = append(b.groups[f.group], f.idx)
		}
	}
	b.inferGoRoot()

	// Symbols, sorted by id; duplicate ids keep the first in file order
	// (sorted by id and place, the first of each run is kept: no map of
	// ids, and no copy of the inputs).
	type raw struct {
		id        int
		file, sym int32 // the symbol is b.files[file].Symbols[sym]
	}
	n := 0
	for _, f := range b.files {
		n += len(f.Symbols)
	}
	all := make([]raw, 0, n)
	for _, f := range b.files {
		for k, s := range f.Symbols {
			all = append(all, raw{s.ID, f.idx, int32(k)})
		}
	}
	slices.SortFunc(all, func(x, y raw) int {
		if c := cmp.Compare(x.id, y.id); c != 0 {
			return c
		}
		if c := cmp.Compare(x.file, y.file); c != 0 {
			return c
		}
		return cmp.Compare(x.sym, y.sym)
	})
	all = slices.CompactFunc(all, func(x, y raw) bool { return x.id == y.id })
	infos := make([]symInfo, len(all)) // one allocation for all
	b.syms = make([]*symInfo, 0, len(all))
	for i, r := range all {
		in := &b.files[r.file].Symbols[r.sym]
		owner, short := splitName(in.Name)
		s := &infos[i]
		*s = symInfo{
			idx: int32(i), id: in.ID, file: r.file, kind: in.Kind,
			owner: owner, ownerShort: lastSegment(owner), short: short,
			calls: in.Calls, types: in.Types,
		}
		b.syms = append(b.syms, s)
	}
	// Package groups of two files or more, numbered in file order.
	gidx := map[string]int32{}
	for _, f := range b.files {
		f.gidx = -1
		if len(b.groups[f.group]) < 2 {
			continue // no other file: the package tier has nothing
		}
		g, ok := gidx[f.group]
		if !ok {
			g = int32(len(gidx))
			gidx[f.group] = g
		}
		f.gidx = g
	}
	b.ngroups = len(gidx)
}

// nameSizes are the sizes of the repository-wide name indexes, kept by a
// Memo to size the next build's.
type nameSizes struct{ top, types, methods, meth int }

func (b *builder) nameSizes() nameSizes {
	return nameSizes{len(b.topAll), len(b.typesAll), len(b.methods), len(b.methAll)}
}

// indexRepoNames fills the repository-wide name indexes, sized by
// b.sizes.
func (b *builder) indexRepoNames() {
	b.topAll = make(map[string][]int32, b.sizes.top)
	b.typesAll = make(map[string][]int32, b.sizes.types)
	b.methods = make(map[ownerKey][]int32, b.sizes.methods)
	b.methAll = make(map[string][]int32, b.sizes.meth)
	for _, s := range b.syms {
		short := s.short
		if short == "" || !targetKind(s.kind) {
			continue
		}
		if isType(s.kind) {
			b.typesAll[short] = append(b.typesAll[short], s.idx)
		}
		if s.owner == "" {
			b.topAll[short] = append(b.topAll[short], s.idx)
		} else if !isType(s.kind) {
			k := ownerKey{s.ownerShort, short}
			b.methods[k] = append(b.methods[k], s.idx)
			b.methAll[short] = append(b.methAll[short], s.idx)
		}
	}
}

// indexFileNames fills the per-file and per-group name indexes.
func (b *builder) indexFileNames() {
	b.topBy = make([]map[string][]int32, len(b.files))
	b.typesBy = make([]map[string][]int32, len(b.files))
	add := func(by []map[string][]int32, file int32, short string, idx int32) {
		m := by[file]
		if m == nil {
			m = map[string][]int32{}
			by[file] = m
		}
		m[short] = append(m[short], idx)
	}
	for _, s := range b.syms {
		short := s.short
		if short == "" || !targetKind(s.kind) {
			continue
		}
		if isType(s.kind) {
			add(b.typesBy, s.file, short, s.idx)
		}
		if s.owner == "" {
			add(b.topBy, s.file, short, s.idx)
		}
	}
	b.indexGroups()
}

// fileIndex is a per-file name index (of top-level symbols, or of types)
// with its join per package group. Without maps (a Memo build that
// resolves only a few symbols again, which is then cheaper than making
// them) a lookup scans the files' symbols instead, with the same result:
// the matching symbols in index order, a group's in file order.
type fileIndex struct {
	b       *builder
	types   bool
	byFile  []map[string][]int32
	byGroup []map[string][]int32
}

func (b *builder) topIndex() fileIndex   { return fileIndex{b, false, b.topBy, b.topGroup} }
func (b *builder) typesIndex() fileIndex { return fileIndex{b, true, b.typesBy, b.typesGroup} }

// file is what file fi declares as name.
func (x fileIndex) file(fi int32, name string) []int32 {
	if x.byFile != nil {
		return x.byFile[fi][name]
	}
	var out []int32
	for _, i := range x.b.fileSyms[fi] {
		s := x.b.syms[i]
		if s.short == "" || s.short != name || !targetKind(s.kind) {
			continue
		}
		if x.types && isType(s.kind) || !x.types && s.owner == "" {
			out = append(out, i)
		}
	}
	return out
}

// group is what the files of f's package group (gidx >= 0) declare as
// name.
func (x fileIndex) group(f *fileInfo, name string) []int32 {
	if x.byGroup != nil {
		return x.byGroup[f.gidx][name]
	}
	var out []int32
	for _, m := range x.b.groups[f.group] {
		out = append(out, x.file(m, name)...)
	}
	return out
}

// goIndexNames indexes the symbols by short name in two goroutines (the
// per-file and group indexes, the repository-wide ones); wait for them
// with the function it returns before anything reads the name indexes.
// They write only those indexes, so they may run beside import
// resolution and Memo's reusable.
func (b *builder) goIndexNames() (wait func()) {
	var wg sync.WaitGroup
	wg.Go(b.indexFileNames)
	wg.Go(b.indexRepoNames)
	return wg.Wait
}

// indexGroups joins the per-file indexes of each package group of two
// files or more, in file order, so the package tier of a lookup is one map
// access instead of one per file of the package. A name of one file shares
// that file's slice (clipped, so a later append copies it).
func (b *builder) indexGroups() {
	merge := func(dst, src map[string][]int32) {
		for name, syms := range src {
			if cur, ok := dst[name]; ok {
				dst[name] = append(cur, syms...)
			} else {
				dst[name] = slices.Clip(syms)
			}
		}
	}
	b.topGroup = make([]map[string][]int32, b.ngroups)
	b.typesGroup = make([]map[string][]int32, b.ngroups)
	for g := range b.ngroups {
		b.topGroup[g] = map[string][]int32{}
		b.typesGroup[g] = map[string][]int32{}
	}
	for _, f := range b.files {
		if f.gidx < 0 {
			continue
		}
		merge(b.topGroup[f.gidx], b.topBy[f.idx])
		merge(b.typesGroup[f.gidx], b.typesBy[f.idx])
	}
}

func (b *builder) addFileEdge(from, to int32, k EdgeKind) {
	if from != to {
		b.fedges[rawEdge{from, to, k}] = struct{}{}
	}
}

func (r *resolver) addSymEdge(from, to int32, k EdgeKind) {
	if from == to {
		return
	}
	r.sedges = append(r.sedges, rawEdge{from, to, k})
	if ff, tf := r.b.syms[from].file, r.b.syms[to].file; ff != tf {
		r.fedges = append(r.fedges, rawEdge{ff, tf, k})
	}
}

func (b *builder) graph() *Graph {
	g := &Graph{
		files:   make([]string, len(b.files)),
		symIDs:  make([]int, len(b.syms)),
		symFile: make([]int32, len(b.syms)),
	}
	for i, f := range b.files {
		g.files[i] = f.Path
	}
	for i, s := range b.syms {
		g.symIDs[i] = s.id
		g.symFile[i] = s.file
	}
	nf, ns := len(b.fedges), 0
	for _, r := range b.refs {
		nf += len(r.fedges)
		ns += len(r.sedges)
	}
	g.fedges = make([]rawEdge, 0, nf)
	for e := range b.fedges {
		g.fedges = append(g.fedges, e)
	}
	g.sedges = make([]rawEdge, 0, ns)
	for _, r := range b.refs {
		g.fedges = append(g.fedges, r.fedges...)
		g.sedges = append(g.sedges, r.sedges...)
	}
	g.fedges, g.sedges = sortedSet(g.fedges), sortedSet(g.sedges)
	g.stats = b.stats
	g.finish()
	return g
}

// sortedSet sorts edges and drops repeats, in place.
func sortedSet(edges []rawEdge) []rawEdge {
	sortEdges(edges)
	return slices.Compact(edges)
}

// targetKind reports whether a symbol of kind k can be the target of a call
// or type edge (module headers and line windows cannot).
func targetKind(k codectx.Kind) bool {
	return k != codectx.KindModule && k != codectx.KindWindow
}

func isType(k codectx.Kind) bool {
	switch k {
	case codectx.KindClass, codectx.KindStruct, codectx.KindInterface, codectx.KindType:
		return true
	}
	return false
}

// rank orders candidates of one name: real declarations beat KindType
// (which also covers Rust impl blocks and aliases).
func rank(k codectx.Kind) int {
	if k == codectx.KindType {
		return 1
	}
	return maxRank
}

const maxRank = 2

// splitName splits a qualified symbol name into owner and short name:
// "(*Router).Mount" -> ("Router", "Mount"), "Flask.add_url_rule" ->
// ("Flask", "add_url_rule"), "Deserializer::deserialize_any" ->
// ("Deserializer", "deserialize_any"), "parse_url" -> ("", "parse_url").
func splitName(name string) (owner, short string) {
	name = strings.TrimSpace(name)
	if strings.HasPrefix(name, "(") {
		if end := strings.Index(name, ")"); end > 0 {
			recv := strings.TrimLeft(strings.TrimSpace(name[1:end]), "*")
			if sp := strings.LastIndexByte(recv, ' '); sp >= 0 { // "(r *Router)"
				recv = strings.TrimLeft(recv[sp+1:], "*")
			}
			rest := strings.TrimPrefix(name[end+1:], ".")
			return stripGeneric(recv), rest
		}
	}
	name = stripGeneric(name)
	i, w := lastSep(name)
	if i < 0 {
		return "", name
	}
	return name[:i], name[i+w:]
}

// lastSep finds the last "." or "::" in s, returning its index and width.
func lastSep(s string) (int, int) {
	d := strings.LastIndexByte(s, '.')
	c := -1 // the last "::": a ':' after another
	for j := strings.LastIndexByte(s, ':'); j > 0; j = strings.LastIndexByte(s[:j], ':') {
		if s[j-1] == ':' {
			c = j - 1
			break
		}
	}
	if c >= 0 && c+1 > d {
		return c, 2
	}
	if d >= 0 {
		return d, 1
	}
	return -1, 0
}

func lastSegment(s string) string {
	if i, w := lastSep(s); i >= 0 {
		return s[i+w:]
	}
	return s
}

// stripGeneric removes type arguments: "Vec<T>" -> "Vec", "List[int]" ->
// "List", "Foo<T>::new" -> "Foo::new".
func stripGeneric(s string) string {
	if !strings.ContainsAny(s, "<[") {
		return s
	}
	var sb strings.Builder
	depth := 0
	for _, r := range s {
		switch r {
		case '<', '[':
			depth++
		case '>', ']':
			if depth > 0 {
				depth--
			}
		default:
			if depth == 0 {
				sb.WriteRune(r)
			}
		}
	}
	return sb.String()
}

func cleanPath(p string) string {
	p = strings.TrimSpace(strings.ReplaceAll(p, "\\", "/"))
	if p == "" {
		return ""
	}
	p = path.Clean(p)
	p = strings.TrimPrefix(p, "./")
	p = strings.TrimPrefix(p, "/")
	if p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return ""
	}
	return p
}

// dirOf is path.Dir with "" for the repository root.
func dirOf(p string) string {
	d := path.Dir(p)
	if d == "." || d == "/" {
		return ""
	}
	return d
}

func join(dir, rel string) string {
	if dir == "" {
		return rel
	}
	if rel == "" {
		return dir
	}
	return dir + "/" + rel
}
