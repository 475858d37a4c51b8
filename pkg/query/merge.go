package query

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"codectx/pkg/tokenize"
)

// gateDepth is how many of a repository's top files its gate reads.
const gateDepth = 20

// repoGates weighs the repositories of a query over several, so that the
// files of the repository the query is about come before the others'
// (each repository's fused scores are on the same scale, whatever it
// holds: its first file scores alike in every repository). Part i's gate
// is the best whole-file BM25 score among its top gateDepth files (those
// ExpandAcross added left out), with every term's idf taken over all the
// parts' files together (a word common in one repository and absent from
// the others says which one the query is about), over the best part's. A
// part without a whole-file index, or every part when nothing matched,
// gets 1: no evidence leaves the fused scores as they are.
func repoGates(parts []Part, q string) []float64 {
	gates := make([]float64, len(parts))
	one := func() []float64 {
		for i := range gates {
			gates[i] = 1
		}
		return gates
	}
	terms := tokenize.QueryTokens(q)
	slices.Sort(terms)
	terms = slices.Compact(terms)
	if len(terms) == 0 {
		return one()
	}
	df := make([]float64, len(terms))      // over all the parts
	local := make([][]float64, len(parts)) // each part's own
	n := 0.0
	for i, p := range parts {
		ix := p.Seg.FileBM25
		if ix == nil {
			continue
		}
		n += float64(ix.NumDocs())
		local[i] = make([]float64, len(terms))
		for j, t := range terms {
			local[i][j] = float64(ix.DocFreq(t))
			df[j] += local[i][j]
		}
	}
	best := 0.0
	w := make([]float64, len(terms))
	for i, p := range parts {
		ix := p.Seg.FileBM25
		if ix == nil || p.Ranking == nil {
			continue
		}
		var buf [gateDepth]int
		keep := buf[:0]
		for _, f := range p.Ranking.Files {
			if len(keep) == gateDepth {
				break
			}
			if _, across := p.Ranking.Across[f.Path]; across {
				continue // another repository's evidence
			}
			if d, ok := p.Seg.FileIndex(f.Path); ok {
				keep = append(keep, d)
			}
		}
		if len(keep) == 0 {
			continue
		}
		ln := float64(ix.NumDocs())
		for j, d := range local[i] {
			w[j] = 0
			if d > 0 {
				w[j] = idf(n, df[j]) / idf(ln, d)
			}
		}
		hits := ix.SearchWeighted(terms, w, 1, FileParams(), func(d int) bool { return slices.Contains(keep, d) })
		if len(hits) > 0 {
			gates[i] = float64(hits[0].Score)
			best = max(best, gates[i])
		}
	}
	if best == 0 {
		return one()
	}
	for i, p := range parts {
		if p.Seg.FileBM25 == nil {
			gates[i] = 1
		} else {
			gates[i] /= best
		}
	}
	return gates
}

func idf(n, df float64) float64 { return math.Log(1 + (n-df+0.5)/(df+0.5)) }

// gateExponent is the power of a repository's gate its files' scores are
// multiplied by: chosen on the training repositories of bench/splits.json
// queried as one org (docs/benchmarks.md, "Org-wide ranking").
const gateExponent = 0.5

// CheckMerge says whether m is a Request.Merge PackAll knows.
func CheckMerge(m string) error {
	_, err := mergeExponent(m)
	return err
}

// mergeExponent reads Request.Merge: "" is gateExponent, MergeScore 0
// (the fused scores alone), "gate:X" X (to measure others).
func mergeExponent(m string) (float64, error) {
	switch m {
	case "":
		return gateExponent, nil
	case MergeScore:
		return 0, nil
	}
	if x, ok := strings.CutPrefix(m, "gate:"); ok {
		if v, err := strconv.ParseFloat(x, 64); err == nil && v >= 0 && v <= 100 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("query: unknown merge %q (want %q or gate:X, X in [0, 100])", m, MergeScore)
}
