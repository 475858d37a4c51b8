package query

import (
	"math"
	"path"
	"slices"
	"sort"

	"codectx/pkg/segment"
	"codectx/pkg/tokenize"
)

// sibDepth is how many top files of the RRF ranking a candidate is
// compared with (its siblings: those of its directory): fixed, so a
// file's features do not depend on how many candidates are scored.
const sibDepth = 20

// siblingFeatures sets the sibling-contrast features: how a candidate
// compares with the other top sibDepth files of its directory, and with
// the top file, on the title's words.
//
//	sib_n        log1p(other top files in the file's directory)
//	sib_title    its title-only whole-file BM25 score minus the best of
//	             its siblings', over the best among the top files (0
//	             without siblings)
//	sib_file     the same with the query's whole-file BM25 score
//	sib_distinct idf-weighted share of the title's name words the file
//	             holds and none of its siblings holds
//	top_distinct idf-weighted share of the title's name words the file
//	             holds and the top file does not (0 for the top file)
func (e *Engine) siblingFeatures(in featureInput, tt []string, cands []Candidate, set func(int, string, float64)) {
	seg := e.Seg
	if seg.FileBM25 == nil || len(in.files) == 0 {
		return
	}
	top := in.files[:min(sibDepth, len(in.files))]
	// The documents compared: the top files and the candidates.
	docOf := map[string]int{}
	for _, f := range top {
		if d, ok := seg.FileIndex(f.Path); ok {
			docOf[f.Path] = d
		}
	}
	for _, c := range cands {
		if d, ok := seg.FileIndex(c.Path); ok {
			docOf[c.Path] = d
		}
	}
	inSet := make(map[int]bool, len(docOf))
	for _, d := range docOf {
		inSet[d] = true
	}
	byDir := map[string][]string{}
	for _, f := range top {
		dir := path.Dir(f.Path)
		byDir[dir] = append(byDir[dir], f.Path)
	}
	// Title-only whole-file BM25 scores of those documents.
	tscore := map[string]float64{}
	if len(tt) > 0 {
		for _, h := range seg.FileBM25.SearchFilter(tt, len(inSet), FileParams(), func(d int) bool { return inSet[d] }) {
			tscore[seg.Files[h.Doc].Path] = h.Score
		}
	}
	var tTop, fTop float64
	for _, f := range top {
		tTop = math.Max(tTop, tscore[f.Path])
		fTop = math.Max(fTop, in.fileBM[f.Path])
	}
	// Which of the title's words each document holds.
	type word struct {
		idf  float64
		docs map[int]bool
	}
	var ws []word
	var total float64
	for _, t := range distinct(tt, len(tt)) {
		w := word{docs: map[int]bool{}}
		w.idf = seg.FileBM25.Docs(t, func(d int) {
			if inSet[d] {
				w.docs[d] = true
			}
		})
		if w.idf > 0 {
			ws = append(ws, w)
			total += w.idf
		}
	}
	topDoc, hasTop := docOf[in.files[0].Path]
	for i, c := range cands {
		d, ok := docOf[c.Path]
		if !ok {
			continue
		}
		var sibs []int
		var tBest, fBest float64
		for _, p := range byDir[path.Dir(c.Path)] {
			if p == c.Path {
				continue
			}
			if sd, ok := docOf[p]; ok {
				sibs = append(sibs, sd)
			}
			tBest = math.Max(tBest, tscore[p])
			fBest = math.Max(fBest, in.fileBM[p])
		}
		set(i, "sib_n", math.Log1p(float64(len(sibs))))
		if len(sibs) > 0 {
			if tTop > 0 {
				set(i, "sib_title", (tscore[c.Path]-tBest)/tTop)
			}
			if fTop > 0 {
				set(i, "sib_file", (in.fileBM[c.Path]-fBest)/fTop)
			}
		}
		if total == 0 {
			continue
		}
		var own, vsTop float64
		for _, w := range ws {
			if !w.docs[d] {
				continue
			}
			if !slices.ContainsFunc(sibs, func(s int) bool { return w.docs[s] }) {
				own += w.idf
			}
			if hasTop && d != topDoc && !w.docs[topDoc] {
				vsTop += w.idf
			}
		}
		set(i, "sib_distinct", own/total)
		set(i, "top_distinct", vsTop/total)
	}
}

// prfVariant is one pseudo-relevance feedback expansion: the top k files
// of the RRF ranking give the m words added to the query.
type prfVariant struct {
	k, m    int
	rr, rel string // feature names
}

// prfVariants are the expansions computed for a dump (the eleventh round
// of docs/benchmarks.md chose among them leaving repositories out).
var prfVariants = []prfVariant{
	{k: 3, m: 10, rr: "prf_rr", rel: "prf_rel"},
	{k: 3, m: 20, rr: "prf_rr_3_20", rel: "prf_rel_3_20"},
	{k: 5, m: 10, rr: "prf_rr_5_10", rel: "prf_rel_5_10"},
	{k: 5, m: 20, rr: "prf_rr_5_20", rel: "prf_rel_5_20"},
}

// prfExpansion weighs the query's terms 1 and each expansion word this
// much times its weight over the top expansion word's (RM3's even mix).
const prfExpansion = 0.5

// prfFeatures sets the pseudo-relevance feedback features (RM3-style):
// the words of the symbol names and the file names of the top k files of
// the RRF ranking, weighted by idf and the file's RRF score over the top
// one, that are not query terms; the m heaviest are added to the query's
// whole-file BM25 terms, and each candidate gets its rank in that
// expanded ranking (rr: 10/(10+rank), rel: score over the top score),
// for each of variants.
func (e *Engine) prfFeatures(in featureInput, cands []Candidate, set func(int, string, float64), variants []prfVariant) {
	seg := e.Seg
	if seg.FileBM25 == nil || len(in.files) == 0 {
		return
	}
	terms := tokenize.QueryTokens(in.q)
	terms = append(terms, compoundTerms(in.q, seg.FileBM25, terms)...)
	if len(terms) == 0 {
		return
	}
	inQuery := map[string]bool{}
	for _, t := range terms {
		inQuery[t] = true
	}
	pos := candIndex(cands)
	fileKeep := fileFilter(seg, in.keep)
	for _, v := range variants {
		exp, weight := prfWords(seg, in.files, v.k, v.m, inQuery)
		q := append(slices.Clone(terms), exp...)
		wts := make([]float64, len(q))
		for j := range terms {
			wts[j] = 1
		}
		for j := range exp {
			wts[len(terms)+j] = prfExpansion * weight[j] / weight[0]
		}
		hits := seg.FileBM25.SearchWeighted(q, wts, 100, FileParams(), fileKeep)
		for r, h := range hits {
			if i, ok := pos[seg.Files[h.Doc].Path]; ok {
				set(i, v.rr, 10/(10+float64(r+1)))
				if hits[0].Score > 0 {
					set(i, v.rel, h.Score/hits[0].Score)
				}
			}
		}
	}
}

// prfWords are the m heaviest words (not query terms, three letters or
// more) of the symbol names and the paths of the top k files, each
// weighted by the sum over those files holding it of the file's RRF
// score over the top one times the word's idf, with their weights.
func prfWords(seg *segment.Segment, files []File, k, m int, inQuery map[string]bool) ([]string, []float64) {
	if len(files) == 0 || seg.FileBM25 == nil {
		return nil, nil
	}
	st := symTokens(seg)
	n := float64(max(1, seg.FileBM25.NumDocs()))
	idf := map[string]float64{}
	weight := map[string]float64{}
	for _, f := range files[:min(k, len(files))] {
		s := 1.0
		if files[0].Score > 0 {
			s = f.Score / files[0].Score
		}
		words := map[string]bool{}
		for t := range st[f.Path] {
			words[t] = true
		}
		for _, t := range pathWords(seg, f.Path).path {
			words[t] = true
		}
		for t := range words {
			if inQuery[t] || len(t) < 3 {
				continue
			}
			w, ok := idf[t]
			if !ok {
				if df := seg.FileBM25.DocFreq(t); df > 0 {
					w = math.Log1p(n / float64(df))
				}
				idf[t] = w
			}
			if w > 0 {
				weight[t] += s * w
			}
		}
	}
	exp := make([]string, 0, len(weight))
	for t := range weight {
		exp = append(exp, t)
	}
	sort.Slice(exp, func(a, b int) bool {
		if weight[exp[a]] != weight[exp[b]] {
			return weight[exp[a]] > weight[exp[b]]
		}
		return exp[a] < exp[b]
	})
	exp = exp[:min(m, len(exp))]
	ws := make([]float64, len(exp))
	for j, t := range exp {
		ws[j] = weight[t]
	}
	return exp, ws
}

// contrastFeatures sets the sibling-contrast and pseudo-relevance
// feedback features (costly: computed only for a dump or a model that
// reads them).
func (e *Engine) contrastFeatures(in featureInput, tt []string, cands []Candidate, set func(int, string, float64)) {
	e.siblingFeatures(in, tt, cands, set)
	e.prfFeatures(in, cands, set, prfVariants)
}
