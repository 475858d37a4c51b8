// Package graph builds the code graph of a repository snapshot: import edges
// between files resolved per language (Go, Python, TypeScript/JavaScript,
// Java, Rust), call and type-reference edges between symbols resolved
// conservatively (an edge only when the target is unambiguous in scope),
// and the file- and symbol-level adjacency derived from them. On top of the
// graph it offers breadth-first expansion with hop-decayed scores and
// personalized PageRank, used to widen a set of retrieved files or chunks
// with their structural neighbours, and a compact checksummed binary
// encoding.
//
// The package takes plain data (paths, raw import spellings, symbol names
// and the names they call), so it does not depend on any parser.
package graph

import (
	"cmp"
	"slices"
	"unsafe"

	"codectx/pkg/codectx"
)

// EdgeKind says why two nodes are connected.
type EdgeKind uint8

const (
	EdgeImport EdgeKind = iota + 1 // file imports file
	EdgeCall                       // symbol calls symbol (file level: some symbol of A calls one of B)
	EdgeType                       // symbol references a type declared by symbol
)

// String returns the lower-case name of the kind.
func (k EdgeKind) String() string {
	switch k {
	case EdgeImport:
		return "import"
	case EdgeCall:
		return "call"
	case EdgeType:
		return "type"
	}
	return "unknown"
}

func (k EdgeKind) valid() bool { return k >= EdgeImport && k <= EdgeType }

// FileInput is one source file as the chunker sees it.
type FileInput struct {
	Path     string           // repo-relative, slash-separated
	Language codectx.Language // Go, Python, TypeScript, TSX, JavaScript, Java, Rust; other files are plain nodes
	Package  string           // Go package name, Java package ("org.jsoup.nodes"), "" otherwise
	// Imports are raw spellings as written: Go "example.com/m/sub"; Python
	// "os.path", ".utils", "..sessions" (for `from a.b import c` either
	// "a.b" or "a.b.c": a name that is not a module falls back to its
	// parent); JS/TS "./router", "../x/index.js", "h3"; Java "a.b.C",
	// "a.b.*", "static a.b.C.m"; Rust "crate::de::X", "super::error",
	// "self::x::{A, B}" and "mod:foo" for `mod foo;` declarations.
	Imports []string
	Symbols []SymbolInput
}

// SymbolInput is one symbol chunk of a file. Module headers and line
// windows may call things but are never the target of an edge.
type SymbolInput struct {
	ID    int          // caller-assigned id, unique across files (the chunk id)
	Name  string       // qualified: "Flask.add_url_rule", "(*Router).Mount", "Deserializer::deserialize_any", "parse_url"
	Kind  codectx.Kind // function, method, class, struct, interface, type, module, window
	Calls []string     // callee names as written: "foo", "pkg.Foo", "self.bar", "this.m", "Foo::new", "new Foo"
	Types []string     // referenced types: "Request", "*http.Header", "Result<u8, Error>"
}

// Input is everything Build needs.
type Input struct {
	Files []FileInput
	// GoModule is the module path of the repository's root go.mod ("" if none).
	GoModule string
	// GoModules maps a directory ("" is the root) to the module path of the
	// go.mod found there, for repositories with nested modules. GoModule is
	// shorthand for GoModules[""].
	GoModules map[string]string
}

// Neighbor is one adjacent node. File neighbours have ID -1; symbol
// neighbours carry their ID and the path of the file declaring them. Out is
// true when the edge goes from the queried node to the neighbour.
type Neighbor struct {
	Path string
	ID   int
	Kind EdgeKind
	Out  bool
}

// Edge is one resolved directed edge. File-level edges have FromID and
// ToID -1; symbol edges carry the ids and the paths of their files.
type Edge struct {
	From, To     string
	FromID, ToID int
	Kind         EdgeKind
}

// Stats summarises a graph.
type Stats struct {
	Files   int
	Symbols int

	FileEdges     int // distinct directed (from, to, kind) file edges
	ImportEdges   int // file edges of kind EdgeImport
	FileCallEdges int // file edges implied by cross-file call edges
	FileTypeEdges int // file edges implied by cross-file type edges

	SymbolEdges int // distinct directed (from, to, kind) symbol edges
	CallEdges   int
	TypeEdges   int

	Imports        int // import spellings seen (after per-file dedup)
	Unresolved     int // imports that matched no file of the repository (stdlib, third party, unknown)
	Ambiguous      int // call names left unresolved because 2+ symbols matched
	AmbiguousTypes int // type names left unresolved because 2+ symbols matched
}

// Graph is the resolved code graph. It is immutable after Build or Load and
// safe for concurrent reads.
type Graph struct {
	files   []string // sorted
	fileIdx map[string]int32
	fadj    adjList // per file, sorted by (to, kind, out)

	symIDs  []int   // sorted
	symFile []int32 // file of each symbol
	sadj    adjList

	fedges []rawEdge // sorted
	sedges []rawEdge // sorted

	fdeg  []int32 // distinct neighbouring files per file
	stats Stats
}

// adjList holds every node's adjacency in one array, node i's at
// flat[off[i]:off[i+1]]: no slice per node for the collector to scan.
type adjList struct {
	off  []int32
	flat []adj
}

// at is node i's adjacency.
func (a adjList) at(i int32) []adj { return a.flat[a.off[i]:a.off[i+1]:a.off[i+1]] }

// len is the number of nodes.
func (a adjList) len() int { return max(0, len(a.off)-1) }

type adj struct {
	to   int32
	kind EdgeKind
	out  bool
}

type rawEdge struct {
	from, to int32
	kind     EdgeKind
}

func cmpEdge(a, b rawEdge) int {
	if c := cmp.Compare(a.from, b.from); c != 0 {
		return c
	}
	if c := cmp.Compare(a.to, b.to); c != 0 {
		return c
	}
	return cmp.Compare(a.kind, b.kind)
}

// sortEdges sorts edges by (from, to, kind). Edges are sorted as numbers
// packed from the three (from in the top 31 bits, to in the next 31, kind
// in the last 2): an ordered sort of integers, several times faster than
// one through cmpEdge on the hundreds of thousands of edges of a big
// repository. Edges already sorted (a loaded graph's) are only checked.
func sortEdges(edges []rawEdge) {
	if slices.IsSortedFunc(edges, cmpEdge) {
		return
	}
	keys := make([]uint64, len(edges))
	for i, e := range edges {
		if e.from < 0 || e.to < 0 || e.kind > 3 {
			slices.SortFunc(edges, cmpEdge)
			return
		}
		keys[i] = uint64(e.from)<<33 | uint64(e.to)<<2 | uint64(e.kind)
	}
	slices.Sort(keys)
	for i, k := range keys {
		edges[i] = rawEdge{from: int32(k >> 33), to: int32(k >> 2 & (1<<31 - 1)), kind: EdgeKind(k & 3)}
	}
}

// finish derives adjacency, degrees and edge counts from files, symbols and
// the two edge lists; Build and Load share it.
// Size estimates the bytes the graph holds in memory: its arrays, the
// adjacency lists and the two index maps (about 48 bytes an entry).
func (g *Graph) Size() int64 {
	n := int64(16+48) * int64(len(g.files))
	for _, f := range g.files {
		n += int64(len(f))
	}
	n += int64(8+4+48) * int64(len(g.symIDs))
	n += int64(unsafe.Sizeof(rawEdge{})) * int64(len(g.fedges)+len(g.sedges))
	for _, a := range []adjList{g.fadj, g.sadj} {
		n += 4*int64(len(a.off)) + int64(unsafe.Sizeof(adj{}))*int64(len(a.flat))
	}
	return n + 4*int64(len(g.fdeg))
}

func (g *Graph) finish() {
	g.fileIdx = make(map[string]int32, len(g.files))
	for i, p := range g.files {
		g.fileIdx[p] = int32(i)
	}
	sortEdges(g.fedges) // sorted already when built or loaded: checked
	sortEdges(g.sedges)
	g.fadj = buildAdj(len(g.files), g.fedges)
	g.sadj = buildAdj(len(g.symIDs), g.sedges)

	g.fdeg = make([]int32, len(g.files))
	for i := range g.fadj.len() {
		last := int32(-1)
		for _, n := range g.fadj.at(int32(i)) { // sorted by to
			if n.to != last {
				g.fdeg[i]++
				last = n.to
			}
		}
	}

	s := &g.stats
	s.Files, s.Symbols = len(g.files), len(g.symIDs)
	s.FileEdges, s.SymbolEdges = len(g.fedges), len(g.sedges)
	s.ImportEdges, s.FileCallEdges, s.FileTypeEdges, s.CallEdges, s.TypeEdges = 0, 0, 0, 0, 0
	for _, e := range g.fedges {
		switch e.kind {
		case EdgeImport:
			s.ImportEdges++
		case EdgeCall:
			s.FileCallEdges++
		case EdgeType:
			s.FileTypeEdges++
		}
	}
	for _, e := range g.sedges {
		switch e.kind {
		case EdgeCall:
			s.CallEdges++
		case EdgeType:
			s.TypeEdges++
		}
	}
}

func buildAdj(n int, edges []rawEdge) adjList {
	// One array, cut by a count of the degrees first (appending node by
	// node cost an allocation or more per node: most of a load's time on
	// a 100k-symbol graph).
	a := adjList{off: make([]int32, n+1), flat: make([]adj, 2*len(edges))}
	for _, e := range edges {
		a.off[e.from+1]++
		a.off[e.to+1]++
	}
	for i := range n {
		a.off[i+1] += a.off[i]
	}
	next := slices.Clone(a.off[:n])
	for _, e := range edges {
		a.flat[next[e.from]] = adj{to: e.to, kind: e.kind, out: true}
		next[e.from]++
		a.flat[next[e.to]] = adj{to: e.from, kind: e.kind, out: false}
		next[e.to]++
	}
	for i := range n {
		slices.SortFunc(a.at(int32(i)), func(a, b adj) int {
			if c := cmp.Compare(a.to, b.to); c != 0 {
				return c
			}
			if c := cmp.Compare(a.kind, b.kind); c != 0 {
				return c
			}
			return cmp.Compare(boolInt(a.out), boolInt(b.out))
		})
	}
	return a
}

// symIndex is the index of the symbol with id (symIDs are sorted).
func (g *Graph) symIndex(id int) (int32, bool) {
	i, ok := slices.BinarySearch(g.symIDs, id)
	return int32(i), ok
}

// Files returns the paths of all file nodes, sorted.
func (g *Graph) Files() []string { return append([]string(nil), g.files...) }

// FileNeighbors returns the files adjacent to path over out and in edges,
// one entry per distinct (file, kind, direction), sorted by path. Unknown
// paths have none.
func (g *Graph) FileNeighbors(path string) []Neighbor {
	i, ok := g.fileIdx[path]
	if !ok {
		return nil
	}
	out := make([]Neighbor, 0, len(g.fadj.at(i)))
	for _, n := range g.fadj.at(i) {
		out = append(out, Neighbor{Path: g.files[n.to], ID: -1, Kind: n.kind, Out: n.out})
	}
	return out
}

// FileDegree is len(g.FileNeighbors(path)), without building the list.
func (g *Graph) FileDegree(path string) int {
	i, ok := g.fileIdx[path]
	if !ok {
		return 0
	}
	return len(g.fadj.at(i))
}

// SymbolNeighbors returns the symbols adjacent to id over out and in call
// and type edges, one entry per distinct (symbol, kind, direction).
func (g *Graph) SymbolNeighbors(id int) []Neighbor {
	i, ok := g.symIndex(id)
	if !ok {
		return nil
	}
	out := make([]Neighbor, 0, len(g.sadj.at(i)))
	for _, n := range g.sadj.at(i) {
		out = append(out, Neighbor{Path: g.files[g.symFile[n.to]], ID: g.symIDs[n.to], Kind: n.kind, Out: n.out})
	}
	return out
}

// AvgDegree is the mean number of distinct neighbouring files per file node
// (isolated files count as 0). An empty graph has 0.
func (g *Graph) AvgDegree() float64 {
	if len(g.files) == 0 {
		return 0
	}
	sum := 0
	for _, d := range g.fdeg {
		sum += int(d)
	}
	return float64(sum) / float64(len(g.files))
}

// MaxDepth is the adaptive expansion depth: 3 hops on a sparse graph
// (average degree below 3), 2 on a denser one.
func (g *Graph) MaxDepth() int {
	if g.AvgDegree() < 3 {
		return 3
	}
	return 2
}

// Stats returns the graph's counters.
func (g *Graph) Stats() Stats { return g.stats }

// Edges returns every resolved edge: file-level edges first (imports and
// the file edges implied by symbol edges), then symbol edges, each group
// sorted.
func (g *Graph) Edges() []Edge {
	out := make([]Edge, 0, len(g.fedges)+len(g.sedges))
	for _, e := range g.fedges {
		out = append(out, Edge{From: g.files[e.from], To: g.files[e.to], FromID: -1, ToID: -1, Kind: e.kind})
	}
	for _, e := range g.sedges {
		out = append(out, Edge{
			From: g.files[g.symFile[e.from]], To: g.files[g.symFile[e.to]],
			FromID: g.symIDs[e.from], ToID: g.symIDs[e.to], Kind: e.kind,
		})
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
