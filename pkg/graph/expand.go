package graph

import (
	"cmp"
	"math"
	"slices"
	"sync"
)

// ExpandFiles widens a set of scored files over the undirected file graph.
// A file first reached at hop d from a seed gets seedScore/(1+d), the
// maximum over seeds; seeds keep their own score (also seeds not in the
// graph). maxDepth <= 0 means g.MaxDepth().
func (g *Graph) ExpandFiles(seeds map[string]float64, maxDepth int) map[string]float64 {
	w := g.expand(g.fadj, g.fileSeeds(seeds), maxDepth)
	out := make(map[string]float64, len(w.hit)+len(seeds))
	for _, i := range w.hit {
		out[g.files[i]] = w.best[i]
	}
	w.release()
	for p, s := range seeds {
		out[p] = s
	}
	return out
}

// ExpandSymbols is ExpandFiles over the symbol graph (call and type edges).
func (g *Graph) ExpandSymbols(seeds map[int]float64, maxDepth int) map[int]float64 {
	w := g.expand(g.sadj, g.symSeeds(seeds), maxDepth)
	out := make(map[int]float64, len(w.hit)+len(seeds))
	for _, i := range w.hit {
		out[g.symIDs[i]] = w.best[i]
	}
	w.release()
	for id, s := range seeds {
		out[id] = s
	}
	return out
}

// FileScore is a file an expansion reached, with its score.
type FileScore struct {
	Path  string
	Score float64
}

// SymbolScore is a symbol an expansion reached, with its score.
type SymbolScore struct {
	ID    int
	Score float64
}

// ReachFiles is ExpandFiles without the seeds: the files reached from
// them and their scores, in path order. It builds no map, for a caller
// that only walks the result.
func (g *Graph) ReachFiles(seeds map[string]float64, maxDepth int) []FileScore {
	in := g.fileSeeds(seeds)
	w := g.expand(g.fadj, in, maxDepth)
	defer w.release()
	slices.Sort(w.hit)
	out := make([]FileScore, 0, len(w.hit))
	for _, i := range w.hit {
		if !isSeed(in, i) {
			out = append(out, FileScore{g.files[i], w.best[i]})
		}
	}
	return out
}

// ReachSymbols is ReachFiles over the symbol graph, in id order.
func (g *Graph) ReachSymbols(seeds map[int]float64, maxDepth int) []SymbolScore {
	in := g.symSeeds(seeds)
	w := g.expand(g.sadj, in, maxDepth)
	defer w.release()
	slices.Sort(w.hit)
	out := make([]SymbolScore, 0, len(w.hit))
	for _, i := range w.hit {
		if !isSeed(in, i) {
			out = append(out, SymbolScore{g.symIDs[i], w.best[i]})
		}
	}
	return out
}

// seed is a node to expand from, with its score.
type seed struct {
	node  int32
	score float64
}

// fileSeeds returns the seeds that are nodes of the file graph, by node.
func (g *Graph) fileSeeds(seeds map[string]float64) []seed {
	in := make([]seed, 0, len(seeds))
	for p, s := range seeds {
		if i, ok := g.fileIdx[p]; ok {
			in = append(in, seed{i, s})
		}
	}
	slices.SortFunc(in, func(a, b seed) int { return cmp.Compare(a.node, b.node) })
	return in
}

// symSeeds returns the seeds that are nodes of the symbol graph, by node.
func (g *Graph) symSeeds(seeds map[int]float64) []seed {
	in := make([]seed, 0, len(seeds))
	for id, s := range seeds {
		if i, ok := g.symIdx[id]; ok {
			in = append(in, seed{i, s})
		}
	}
	slices.SortFunc(in, func(a, b seed) int { return cmp.Compare(a.node, b.node) })
	return in
}

// isSeed reports whether node is one of seeds (sorted by node).
func isSeed(seeds []seed, node int32) bool {
	_, ok := slices.BinarySearchFunc(seeds, node, func(s seed, n int32) int { return cmp.Compare(s.node, n) })
	return ok
}

// walk is the scratch state of one expansion, pooled: a query expands
// over graphs of thousands of nodes, and fresh arrays for each would be
// most of its garbage.
type walk struct {
	stamp     []int32   // BFS generation that last visited the node
	gen       int32     // last generation used
	best      []float64 // best score per node, 0 = not reached
	hit       []int32   // nodes with best > 0
	cur, next []int32
}

var walks = sync.Pool{New: func() any { return new(walk) }}

func getWalk(n, seeds int) *walk {
	w := walks.Get().(*walk)
	w.reset(n, seeds)
	return w
}

// reset readies w for a graph of n nodes and as many BFS generations as
// seeds.
func (w *walk) reset(n, seeds int) {
	if len(w.stamp) < n {
		w.stamp, w.best, w.gen = make([]int32, n), make([]float64, n), 0
	}
	if int64(w.gen)+int64(seeds) >= math.MaxInt32 {
		clear(w.stamp)
		w.gen = 0
	}
}

// release clears the scores and returns w to the pool; w.hit and w.best
// must not be used afterwards.
func (w *walk) release() {
	for _, i := range w.hit {
		w.best[i] = 0
	}
	w.hit = w.hit[:0]
	walks.Put(w)
}

// expand runs one depth-limited BFS per seed (in node order) and keeps the
// best decayed score per node: w.best of each node of w.hit.
func (g *Graph) expand(adjs [][]adj, seeds []seed, maxDepth int) *walk {
	if maxDepth <= 0 {
		maxDepth = g.MaxDepth()
	}
	w := getWalk(len(adjs), len(seeds))
	stamp, best := w.stamp, w.best
	cur, next := w.cur[:0], w.next[:0]
	for _, sd := range seeds {
		if sd.score <= 0 {
			continue
		}
		w.gen++
		mark := w.gen
		stamp[sd.node] = mark
		cur = append(cur[:0], sd.node)
		for d := 1; d <= maxDepth && len(cur) > 0; d++ {
			next = next[:0]
			s := sd.score / float64(1+d)
			for _, u := range cur {
				for _, n := range adjs[u] {
					if stamp[n.to] == mark {
						continue
					}
					stamp[n.to] = mark
					next = append(next, n.to)
					if s > best[n.to] {
						if best[n.to] == 0 {
							w.hit = append(w.hit, n.to)
						}
						best[n.to] = s
					}
				}
			}
			cur, next = next, cur
		}
	}
	w.cur, w.next = cur, next
	return w
}

// PageRank runs personalized PageRank over the undirected file graph: with
// probability damping a walker follows a random edge, otherwise (and from
// files without edges) it restarts at a seed drawn from the normalised
// seed scores. Without usable seeds the restart is uniform. damping outside
// (0, 1) means 0.85; iters <= 0 means 30. Files with zero rank are left out.
func (g *Graph) PageRank(seeds map[string]float64, damping float64, iters int) map[string]float64 {
	n := len(g.files)
	if n == 0 {
		return map[string]float64{}
	}
	if damping <= 0 || damping >= 1 {
		damping = 0.85
	}
	if iters <= 0 {
		iters = 30
	}
	restart := make([]float64, n)
	total := 0.0
	for p, s := range seeds {
		if i, ok := g.fileIdx[p]; ok && s > 0 {
			restart[i] += s
			total += s
		}
	}
	if total == 0 {
		for i := range restart {
			restart[i] = 1
		}
		total = float64(n)
	}
	for i := range restart {
		restart[i] /= total
	}

	nbrs := make([][]int32, n) // distinct neighbouring files
	for i, ns := range g.fadj {
		last := int32(-1)
		for _, a := range ns {
			if a.to != last {
				nbrs[i] = append(nbrs[i], a.to)
				last = a.to
			}
		}
	}
	rank := append([]float64(nil), restart...)
	next := make([]float64, n)
	for it := 0; it < iters; it++ {
		dangling := 0.0
		for i := range next {
			next[i] = 0
		}
		for u, r := range rank {
			if len(nbrs[u]) == 0 {
				dangling += r
				continue
			}
			share := damping * r / float64(len(nbrs[u]))
			for _, v := range nbrs[u] {
				next[v] += share
			}
		}
		jump := 1 - damping + damping*dangling
		for i := range next {
			next[i] += jump * restart[i]
		}
		rank, next = next, rank
	}
	out := make(map[string]float64)
	for i, r := range rank {
		if r > 0 {
			out[g.files[i]] = r
		}
	}
	return out
}
