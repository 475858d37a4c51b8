package graph

import (
	"cmp"
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
	return g.AppendReachFiles(nil, seeds, maxDepth)
}

// AppendReachFiles appends ReachFiles(seeds, maxDepth) to dst (a caller's
// reused buffer) and returns it.
func (g *Graph) AppendReachFiles(dst []FileScore, seeds map[string]float64, maxDepth int) []FileScore {
	in := g.fileSeeds(seeds)
	w := g.expand(g.fadj, in, maxDepth)
	defer w.release()
	slices.Sort(w.hit)
	out := slices.Grow(dst, len(w.hit))
	for _, i := range w.hit {
		if !isSeed(in, i) {
			out = append(out, FileScore{g.files[i], w.best[i]})
		}
	}
	return out
}

// ReachSymbols is ReachFiles over the symbol graph, in id order.
func (g *Graph) ReachSymbols(seeds map[int]float64, maxDepth int) []SymbolScore {
	return g.AppendReachSymbols(nil, seeds, maxDepth)
}

// AppendReachSymbols appends ReachSymbols(seeds, maxDepth) to dst and
// returns it.
func (g *Graph) AppendReachSymbols(dst []SymbolScore, seeds map[int]float64, maxDepth int) []SymbolScore {
	in := g.symSeeds(seeds)
	w := g.expand(g.sadj, in, maxDepth)
	defer w.release()
	slices.Sort(w.hit)
	out := slices.Grow(dst, len(w.hit))
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
		if i, ok := g.symIndex(id); ok {
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
	reach     []float64 // best seed score within the hops walked so far, per node
	best      []float64 // best decayed score per node, 0 = not reached
	hit       []int32   // nodes with best > 0
	set       []int32   // nodes with reach > 0
	cur, next []seed    // nodes whose reach rose in the last hop, with it
}

var walks = sync.Pool{New: func() any { return new(walk) }}

func getWalk(n int) *walk {
	w := walks.Get().(*walk)
	if len(w.reach) < n {
		w.reach, w.best = make([]float64, n), make([]float64, n)
	}
	return w
}

// release clears the scores and returns w to the pool; w.hit and w.best
// must not be used afterwards.
func (w *walk) release() {
	for _, i := range w.hit {
		w.best[i] = 0
	}
	for _, i := range w.set {
		w.reach[i] = 0
	}
	w.hit, w.set = w.hit[:0], w.set[:0]
	walks.Put(w)
}

// expand gives every node within maxDepth hops of a seed the best of
// seedScore/(1+d) over the seeds, d the node's distance from the seed:
// w.best of each node of w.hit (seeds' own entries are meaningless;
// callers override or drop them). It is one BFS from every seed at once:
// after hop d, reach[v] is the best score of a seed within d hops of v,
// and only the nodes whose reach rose at hop d can raise a neighbour's at
// hop d+1, so each hop walks the edges of those nodes alone instead of a
// BFS per seed walking the same neighbourhoods again. A node's best is the
// maximum of reach/(1+d) over the hops: reach at hop d is some seed's
// score s with distance at most d, and s/(1+d) is largest at the seed's
// own distance, so the maximum is the same value a BFS per seed finds.
func (g *Graph) expand(adjs adjList, seeds []seed, maxDepth int) *walk {
	if maxDepth <= 0 {
		maxDepth = g.MaxDepth()
	}
	w := getWalk(adjs.len())
	reach, best := w.reach, w.best
	cur, next := w.cur[:0], w.next[:0]
	for _, sd := range seeds {
		if sd.score > 0 {
			reach[sd.node] = sd.score
			w.set = append(w.set, sd.node)
			cur = append(cur, sd)
		}
	}
	for d := 1; d <= maxDepth && len(cur) > 0; d++ {
		// Raise the neighbours of the nodes that rose at hop d-1, with
		// their reach as it was then (cur holds it: reach itself may rise
		// again during this hop). A node enters next once, with its reach
		// at the end of the hop.
		next = next[:0]
		for _, u := range cur {
			for _, n := range adjs.at(u.node) {
				if u.score > reach[n.to] {
					if reach[n.to] == 0 {
						w.set = append(w.set, n.to)
					}
					reach[n.to] = u.score
					next = append(next, seed{n.to, 0})
				}
			}
		}
		// Keep each risen node once, with its final reach, and score it.
		nx := next[:0]
		for _, v := range next {
			if reach[v.node] < 0 { // already kept this hop
				continue
			}
			v.score = reach[v.node]
			reach[v.node] = -v.score
			nx = append(nx, v)
		}
		for _, v := range nx {
			reach[v.node] = v.score
			if s := v.score / float64(1+d); s > best[v.node] {
				if best[v.node] == 0 {
					w.hit = append(w.hit, v.node)
				}
				best[v.node] = s
			}
		}
		cur, next = nx, cur
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
	for i := range g.fadj.len() {
		last := int32(-1)
		for _, a := range g.fadj.at(int32(i)) {
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
