package query

import (
	"sort"
	"strconv"
	"strings"
	"unicode"

	"codectx/pkg/fusion"
	"codectx/pkg/graph"
)

// armGraphIndex lists the index files (index.ts, mod.rs, __init__.py) that
// re-export the top files of an additive query, fused as part of the graph
// arm. A change that adds a feature adds new files, which a retriever
// cannot return because they do not exist yet, and registers them in the
// directory's index file, which has almost no words of its own to match.
const armGraphIndex = "graph-index"

// indexWeight is the index-file list's weight relative to the bm25 arm's.
// An index file is a few lines of re-exports, so placing it near the top
// costs the pack few tokens. A sweep over 1, 1.5 and 2 on the dev tasks:
// 1 leaves the index files out of the top five, 2 ranks them above the
// named file of "types(x): add ..." tasks.
const indexWeight = 1.5

// additiveVerbs open a subject that adds something.
var additiveVerbs = words("add introduce implement support create expose export new")

// isAdditive reports whether q asks to add something: a Conventional
// Commits "feat" header, or a subject that starts with an additive verb.
func isAdditive(q string) bool {
	q = strings.TrimSpace(q)
	if i := strings.IndexByte(q, ':'); i > 0 && i < 40 {
		head := strings.ToLower(q[:i])
		if head == "feat" || strings.HasPrefix(head, "feat(") || strings.HasPrefix(head, "feat!") {
			return true
		}
		q = q[i+1:]
	}
	f := strings.FieldsFunc(q, func(r rune) bool { return !unicode.IsLetter(r) })
	return len(f) > 0 && additiveVerbs[strings.ToLower(f[0])]
}

// isIndexFile reports whether p is a directory's index module.
func isIndexFile(p string) bool { return indexStems[baseStem(p)] }

// indexArm ranks the index files that import at least two of the top seed
// files, by how many they import; each contributes its module chunk.
func (e *Engine) indexArm(q string, seeds []fusion.Scored, keep func(int) bool) []int {
	seg := e.Seg
	if seg.Graph == nil || !isAdditive(q) {
		return nil
	}
	var top []string
	seen := map[string]bool{}
	for _, s := range seeds {
		if len(top) == 10 {
			break
		}
		id, _ := strconv.Atoi(s.ID)
		if p := seg.Chunks[id].Path; !seen[p] {
			seen[p] = true
			top = append(top, p)
		}
	}
	count := map[string]int{}
	for _, p := range top {
		for _, nb := range seg.Graph.FileNeighbors(p) {
			if !nb.Out && nb.Kind == graph.EdgeImport && isIndexFile(nb.Path) {
				count[nb.Path]++
			}
		}
	}
	var files []string
	for p, n := range count {
		if n >= 2 {
			files = append(files, p)
		}
	}
	sort.Slice(files, func(i, j int) bool {
		if count[files[i]] != count[files[j]] {
			return count[files[i]] > count[files[j]]
		}
		return files[i] < files[j]
	})
	var ids []int
	for _, p := range files {
		if f, ok := seg.File(p); ok && len(f.Chunks) > 0 {
			ids = append(ids, f.Chunks[0])
		}
	}
	return filterIDs(ids, keep)
}
