package graph

import "sort"

// ExpandFiles widens a set of scored files over the undirected file graph.
// A file first reached at hop d from a seed gets seedScore/(1+d), the
// maximum over seeds; seeds keep their own score (also seeds not in the
// graph). maxDepth <= 0 means g.MaxDepth().
func (g *Graph) ExpandFiles(seeds map[string]float64, maxDepth int) map[string]float64 {
	in := make(map[int32]float64, len(seeds))
	for p, s := range seeds {
		if i, ok := g.fileIdx[p]; ok {
			in[i] = s
		}
	}
	got := g.expand(g.fadj, in, maxDepth)
	out := make(map[string]float64, len(got)+len(seeds))
	for i, s := range got {
		out[g.files[i]] = s
	}
	for p, s := range seeds {
		out[p] = s
	}
	return out
}

// ExpandSymbols is ExpandFiles over the symbol graph (call and type edges).
func (g *Graph) ExpandSymbols(seeds map[int]float64, maxDepth int) map[int]float64 {
	in := make(map[int32]float64, len(seeds))
	for id, s := range seeds {
		if i, ok := g.symIdx[id]; ok {
			in[i] = s
		}
	}
	got := g.expand(g.sadj, in, maxDepth)
	out := make(map[int]float64, len(got)+len(seeds))
	for i, s := range got {
		out[g.symIDs[i]] = s
	}
	for id, s := range seeds {
		out[id] = s
	}
	return out
}

// expand runs one depth-limited BFS per seed (in a fixed order) and keeps
// the best decayed score per node.
func (g *Graph) expand(adjs [][]adj, seeds map[int32]float64, maxDepth int) map[int32]float64 {
	if maxDepth <= 0 {
		maxDepth = g.MaxDepth()
	}
	order := make([]int32, 0, len(seeds))
	for i := range seeds {
		order = append(order, i)
	}
	sort.Slice(order, func(a, b int) bool { return order[a] < order[b] })

	out := map[int32]float64{}
	stamp := make([]int32, len(adjs)) // BFS generation that visited the node
	var cur, next []int32
	for gen, seed := range order {
		score := seeds[seed]
		if score <= 0 {
			continue
		}
		mark := int32(gen + 1)
		stamp[seed] = mark
		cur = append(cur[:0], seed)
		for d := 1; d <= maxDepth && len(cur) > 0; d++ {
			next = next[:0]
			s := score / float64(1+d)
			for _, u := range cur {
				for _, n := range adjs[u] {
					if stamp[n.to] == mark {
						continue
					}
					stamp[n.to] = mark
					next = append(next, n.to)
					if s > out[n.to] {
						out[n.to] = s
					}
				}
			}
			cur, next = next, cur
		}
	}
	return out
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
