package graph

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"codectx/pkg/codectx"
)

// sym is a terse SymbolInput constructor for fixtures.
func sym(id int, name string, kind codectx.Kind, calls, types []string) SymbolInput {
	return SymbolInput{ID: id, Name: name, Kind: kind, Calls: calls, Types: types}
}

// edgeSets renders the graph's edges as readable strings, split into
// import edges, file edges implied by symbol edges, and symbol edges:
//
//	"a.go -> b.go", "call a.go -> b.go", "call main -> Open"
func edgeSets(in Input, g *Graph) (imports, fileRefs, symbols []string) {
	names := map[int]string{}
	for _, f := range in.Files {
		for _, s := range f.Symbols {
			names[s.ID] = s.Name
		}
	}
	for _, e := range g.Edges() {
		switch {
		case e.FromID >= 0:
			symbols = append(symbols, fmt.Sprintf("%s %s -> %s", e.Kind, names[e.FromID], names[e.ToID]))
		case e.Kind == EdgeImport:
			imports = append(imports, e.From+" -> "+e.To)
		default:
			fileRefs = append(fileRefs, fmt.Sprintf("%s %s -> %s", e.Kind, e.From, e.To))
		}
	}
	sort.Strings(imports)
	sort.Strings(fileRefs)
	sort.Strings(symbols)
	return
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

func diffSets(t *testing.T, what string, got, want []string) {
	t.Helper()
	want = sorted(want)
	if slices.Equal(got, want) {
		return
	}
	var missing, extra []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	t.Errorf("%s edges:\n missing: %s\n extra:   %s", what,
		strings.Join(missing, "; "), strings.Join(extra, "; "))
}

// fixture is one hand-written repository with its expected edges.
type fixture struct {
	name       string
	in         Input
	imports    []string // "from -> to"
	fileRefs   []string // "call from -> to", "type from -> to"
	symbols    []string // "call Caller -> Callee", "type User -> Type"
	unresolved int
}

func checkFixture(t *testing.T, fx fixture) *Graph {
	t.Helper()
	g := Build(fx.in)
	imps, refs, syms := edgeSets(fx.in, g)
	diffSets(t, "import", imps, fx.imports)
	diffSets(t, "file ref", refs, fx.fileRefs)
	diffSets(t, "symbol", syms, fx.symbols)
	if got := g.Stats().Unresolved; got != fx.unresolved {
		t.Errorf("Stats().Unresolved = %d, want %d", got, fx.unresolved)
	}
	return g
}
