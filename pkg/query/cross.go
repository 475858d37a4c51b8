package query

import (
	"cmp"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"codectx/pkg/codectx"
	"codectx/pkg/fusion"
)

// FileRef names one file of one repository linked to another file.
type FileRef struct {
	Repo, Path string
	// Importer is set when this file imports the other (it depends on
	// it), unset when the other imports this one.
	Importer bool
}

// CrossLinks returns the files of other repositories that file path of
// repo imports or is imported by (pkg/xrepo's links, either direction).
type CrossLinks func(repo, path string) []FileRef

// crossSeeds is how many top files of each repository's ranking seed the
// walk into the others, crossPerSeed how many files one seed adds at
// most; crossDecay is the score share one hop to a file the seed imports
// keeps, as graph.ExpandFiles decays a first hop. A file that imports the
// seed (a user of a library file) keeps half that, a test file half
// again: a library's top file can have dozens of users, mostly tests.
const (
	crossSeeds   = 5
	crossPerSeed = 5
	crossDecay   = 0.5
)

// isTestPath reports the usual test file names of the five ecosystems.
func isTestPath(p string) bool {
	base := path.Base(p)
	return strings.HasSuffix(base, "_test.go") || strings.HasPrefix(base, "test_") || strings.HasSuffix(base, "_test.py") ||
		strings.Contains(base, ".test.") || strings.Contains(base, ".spec.") || strings.Contains("/"+p, "/src/test/") ||
		strings.Contains("/"+p, "/tests/") || strings.Contains("/"+p, "/__tests__/")
}

// ExpandAcross is the graph arm across repositories, for a query over
// several: the top files of each part's ranking pull in the files of the
// other parts they import (at half the seed file's score) or that import
// them (a quarter; test files half that again), at most crossPerSeed per
// seed, each as its module chunk with the signal "graph". A file its own
// repository already ranked keeps its place. Files outside the request's
// languages are left out; without the graph arm among the request's arms
// nothing is added. The rankings are replaced, not modified; each added
// file is recorded in Ranking.Across with the part that pulled it in.
func ExpandAcross(parts []Part, req Request, links CrossLinks) {
	if len(parts) < 2 || links == nil || (req.Arms != nil && !slices.Contains(req.Arms, ArmGraph)) {
		return
	}
	byRepo := make(map[string]int, len(parts))
	for i, p := range parts {
		byRepo[p.Seg.Meta.Repo] = i
	}
	langs := map[codectx.Language]bool{}
	for _, l := range req.Languages {
		langs[l] = true
	}
	type add struct {
		id    int
		score float64
		from  int // the part whose top file pulled it in
	}
	adds := make([]map[string]add, len(parts))
	for i, p := range parts {
		files := p.Ranking.Files
		if len(files) > crossSeeds {
			files = files[:crossSeeds]
		}
		for _, f := range files {
			if f.Score <= 0 {
				continue
			}
			rs := slices.Clone(links(p.Seg.Meta.Repo, f.Path))
			weight := func(r FileRef) float64 {
				w := crossDecay
				if r.Importer {
					w /= 2
				}
				if isTestPath(r.Path) {
					w /= 2
				}
				return w
			}
			slices.SortStableFunc(rs, func(a, b FileRef) int { return cmp.Compare(weight(b), weight(a)) })
			added := 0
			for _, r := range rs {
				if added == crossPerSeed {
					break
				}
				k, ok := byRepo[r.Repo]
				if !ok || k == i {
					continue
				}
				seg := parts[k].Seg
				sf, ok := seg.File(r.Path)
				if !ok || len(sf.Chunks) == 0 || (req.Paths != nil && !req.Paths(r.Path)) {
					continue
				}
				id := sf.Chunks[0] // the module header: package clause and imports
				if len(langs) > 0 && !langs[seg.Chunks[id].Language] {
					continue
				}
				if adds[k] == nil {
					adds[k] = map[string]add{}
				}
				added++
				if s := f.Score * weight(r); s > adds[k][r.Path].score {
					adds[k][r.Path] = add{id, s, i}
				}
			}
		}
	}
	for k, as := range adds {
		if len(as) == 0 {
			continue
		}
		rk := *parts[k].Ranking
		ranked := make(map[string]bool, len(rk.Files))
		for _, f := range rk.Files {
			ranked[f.Path] = true
		}
		rk.Fused = slices.Clone(rk.Fused)
		rk.Files = slices.Clone(rk.Files)
		rk.Across = maps.Clone(rk.Across)
		if rk.Across == nil {
			rk.Across = map[string]int{}
		}
		paths := make([]string, 0, len(as))
		for p := range as {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		for _, p := range paths {
			if ranked[p] {
				continue
			}
			a := as[p]
			rk.Fused = append(rk.Fused, fusion.Scored{ID: strconv.Itoa(a.id), Score: a.score, Arms: []string{ArmGraph}})
			rk.Files = append(rk.Files, File{Path: p, Score: a.score, Signals: []string{ArmGraph}})
			rk.Across[p] = a.from
		}
		slices.SortStableFunc(rk.Fused, func(a, b fusion.Scored) int { return cmp.Compare(b.Score, a.Score) })
		slices.SortStableFunc(rk.Files, func(a, b File) int { return cmp.Compare(b.Score, a.Score) })
		if !slices.Contains(rk.Arms, ArmGraph) {
			rk.Arms = append(slices.Clone(rk.Arms), ArmGraph)
		}
		parts[k].Ranking = &rk
	}
}
