package query

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"codectx/pkg/codectx"
	"codectx/pkg/fusion"
	"codectx/pkg/tokenize"
)

// The chunk ranker orders the chunks inside each of the top files: which
// of a file's chunks the pack takes first, whole, and which it reaches
// only with budget to spare. The fused RRF score alone favours a file's
// short chunks (a two-line struct whose name matches the query beats the
// function holding the change); a small model over the chunk's place in
// each list, its kind, size and how much of the query it holds reorders
// them. The file ranking is not changed: each file keeps its score, and
// only the share of it each chunk gets moves (orderByFile).

// ChunkFeatureNames are the features of a chunk that the chunk ranker
// reads, in the layout of ChunkCandidate.X.
var ChunkFeatureNames = []string{
	"rel", // fused score over the file's best chunk's
	"rr_symbol", "rr_symbol-super", "rr_bm25", "rr_bm25-file", "rr_bm25-path", "rr_bm25-literal",
	"rr_dense", "rr_graph", "rr_graph-index", "rr_history",
	"bm25_rel",   // chunk BM25 score over the file's best chunk's
	"log_lines",  // log1p of the chunk's lines
	"line_share", // its lines over the file's lines in the candidates
	"kind_module", "kind_function", "kind_method", "kind_class", "kind_struct", "kind_interface", "kind_type", "kind_window",
	"outline",    // a container emitted as an outline
	"has_doc",    // a doc comment
	"name_words", // share of the chunk name's words among the query's terms
	"name_exact", // the name's last part is one of the query's terms
	"cover",      // idf share of the query's terms the chunk holds
	"cover_rel",  // cover over the file's best cover
	"first",      // the file's first chunk in line order among the candidates
}

// rankedChunkFiles is how many top files' chunks the chunk ranker orders; the
// pack reaches deeper files' chunks mostly as stubs.
const rankedChunkFiles = 20

// ChunkCandidate is one chunk of a top file with its features
// (Ranking.Chunks, with Request.ChunkFeatures).
type ChunkCandidate struct {
	ID   int
	Path string
	X    []float64
}

// chunkFeatures computes the features of every fused chunk of the first
// rankedChunkFiles files.
func (e *Engine) chunkFeatures(q string, lists []fusion.Ranked, bm25 []float64, fused []fusion.Scored, files []File) []ChunkCandidate {
	seg := e.Seg
	top := make(map[string]bool, rankedChunkFiles)
	for _, f := range files[:min(rankedChunkFiles, len(files))] {
		top[f.Path] = true
	}
	col := make(map[string]int, len(ChunkFeatureNames))
	for i, s := range ChunkFeatureNames {
		col[s] = i
	}
	var cands []ChunkCandidate
	at := map[int]int{} // chunk id -> index in cands
	for _, s := range fused {
		id, _ := strconv.Atoi(s.ID)
		c := &seg.Chunks[id]
		if !top[c.Path] {
			continue
		}
		at[id] = len(cands)
		x := make([]float64, len(ChunkFeatureNames))
		x[col["rel"]] = s.Score
		cands = append(cands, ChunkCandidate{ID: id, Path: c.Path, X: x})
	}
	if len(cands) == 0 {
		return nil
	}
	rr := func(rank int) float64 { return 10 / (10 + float64(rank)) }
	for _, l := range lists {
		j, ok := col["rr_"+l.Arm]
		for r, sid := range l.IDs {
			id, _ := strconv.Atoi(sid)
			i, in := at[id]
			if !in {
				continue
			}
			if ok && cands[i].X[j] == 0 {
				cands[i].X[j] = rr(r + 1)
			}
			if l.Arm == ArmBM25 && r < len(bm25) {
				cands[i].X[col["bm25_rel"]] = bm25[r]
			}
		}
	}

	// Coverage: the idf share of the query's terms each chunk holds.
	terms := tokenize.QueryTokens(q)
	hold := make([]float64, len(cands))
	var total float64
	if seg.BM25 != nil {
		for _, t := range terms {
			var hit []int
			idf := seg.BM25.Docs(t, func(doc int) {
				if i, ok := at[doc]; ok {
					hit = append(hit, i)
				}
			})
			total += idf
			for _, i := range hit {
				hold[i] += idf
			}
		}
	}
	qset := make(map[string]bool, len(terms))
	for _, t := range terms {
		qset[t] = true
	}
	for i := range cands {
		c := &seg.Chunks[cands[i].ID]
		x := cands[i].X
		lines := c.EndLine - c.StartLine + 1
		x[col["log_lines"]] = math.Log1p(float64(lines))
		if k, ok := col["kind_"+string(c.Kind)]; ok {
			x[k] = 1
		}
		if c.Outlined() {
			x[col["outline"]] = 1
		}
		if c.Doc != "" {
			x[col["has_doc"]] = 1
		}
		if total > 0 {
			x[col["cover"]] = hold[i] / total
		}
		if c.Name != "" && c.Kind != codectx.KindModule {
			x[col["name_words"]], x[col["name_exact"]] = nameFeatures(c.Name, qset)
		}
	}

	// Relative to the file: the best fused score, BM25 score and cover of
	// its candidates, its lines, its first chunk.
	type agg struct {
		rel, bm, cover, lines float64
		first, firstLine      int
	}
	by := map[string]*agg{}
	for i := range cands {
		c := &seg.Chunks[cands[i].ID]
		a := by[cands[i].Path]
		if a == nil {
			a = &agg{first: i, firstLine: c.StartLine}
			by[cands[i].Path] = a
		}
		x := cands[i].X
		a.rel = max(a.rel, x[col["rel"]])
		a.bm = max(a.bm, x[col["bm25_rel"]])
		a.cover = max(a.cover, x[col["cover"]])
		a.lines += float64(c.EndLine - c.StartLine + 1)
		if c.StartLine < a.firstLine {
			a.first, a.firstLine = i, c.StartLine
		}
	}
	div := func(v, d float64) float64 {
		if d > 0 {
			return v / d
		}
		return 0
	}
	for i := range cands {
		c := &seg.Chunks[cands[i].ID]
		a := by[cands[i].Path]
		x := cands[i].X
		x[col["rel"]] = div(x[col["rel"]], a.rel)
		x[col["bm25_rel"]] = div(x[col["bm25_rel"]], a.bm)
		x[col["cover_rel"]] = div(x[col["cover"]], a.cover)
		x[col["line_share"]] = div(float64(c.EndLine-c.StartLine+1), a.lines)
		if a.first == i {
			x[col["first"]] = 1
		}
	}
	return cands
}

// nameFeatures are a chunk name's name_words and name_exact against the
// query's terms qset (tokenize.QueryTokens): the name's last part is made
// into terms as the query is (stemmed, stopwords dropped), the whole
// identifier first, then its parts.
func nameFeatures(name string, qset map[string]bool) (words, exact float64) {
	last := name
	if k := strings.LastIndexAny(last, ".:)"); k >= 0 {
		last = last[k+1:]
	}
	terms := tokenize.QueryTokens(last)
	if len(terms) == 0 {
		return 0, 0
	}
	if len(last) >= 4 && qset[terms[0]] {
		exact = 1 // the identifier itself, not a word holding it
	}
	if len(terms) > 1 {
		terms = terms[1:]
	}
	n := 0
	for _, w := range terms {
		if qset[w] {
			n++
		}
	}
	return float64(n) / float64(len(terms)), exact
}

// chunkOrder scores the candidates with score and gives each file's chunks
// the file's fused shares (rel) in the model's order: the file's best share
// goes to its best-scored chunk, and so on, so that only the order inside
// a file changes, not how its chunks interleave with other files'.
func chunkOrder(cands []ChunkCandidate, score func([]float64) float64) map[int]float64 {
	relAt := slices.Index(ChunkFeatureNames, "rel")
	s := make([]float64, len(cands))
	by := map[string][]int{}
	var order []string
	for i, c := range cands {
		s[i] = score(c.X)
		if by[c.Path] == nil {
			order = append(order, c.Path)
		}
		by[c.Path] = append(by[c.Path], i)
	}
	out := make(map[int]float64, len(cands))
	for _, p := range order {
		idx := by[p]
		rels := make([]float64, len(idx))
		for k, i := range idx {
			rels[k] = cands[i].X[relAt]
		}
		slices.SortFunc(rels, func(a, b float64) int { return cmp.Compare(b, a) })
		byScore := slices.Clone(idx)
		slices.SortStableFunc(byScore, func(a, b int) int { return cmp.Compare(s[b], s[a]) })
		for k, i := range byScore {
			out[cands[i].ID] = rels[k]
		}
	}
	return out
}
