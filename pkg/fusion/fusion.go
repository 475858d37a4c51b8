// Package fusion merges the rankings of several retrieval arms (symbol
// lookup, BM25, dense vectors, the code graph, git history) into one list by
// weighted reciprocal rank fusion (RRF).
//
// # Why ranks and not scores
//
// Each arm scores on its own scale: BM25 is an unbounded sum of IDF-weighted
// term saturations whose range depends on query length and corpus
// statistics, cosine similarity sits in a narrow band near the top of
// [-1, 1], graph proximity is a decay such as 1/2^depth, and history is a
// recency or churn count. The scales are not comparable, and they move from
// one query to the next (a three-word query gives BM25 scores several times
// larger than a one-word query), so a linear interpolation a*bm25 + b*cosine
// needs per-query normalisation that is itself fragile: min-max
// normalisation lets one outlier squash every other result of that arm.
//
// Ranks are scale-free: the best hit of every arm is rank 1 whatever its
// raw score. RRF scores a result by
//
//	score(d) = sum over arms a that returned d of  w_a / (k + rank_a(d))
//
// so a result found by several arms beats one found high by a single arm,
// one arm's extreme score cannot dominate (its best item gets at most
// w/(k+1)), and an arm that returns nothing simply contributes nothing. The
// constant k (60 by default, after Cormack et al. 2009) flattens the curve
// so that rank 1 is not worth vastly more than rank 5: with k=60 the first
// item scores 1/61 and the tenth 1/70, which keeps fusion from being a
// disguised "take the top of whichever arm ran first". The weights w_a let
// the query classifier lean on the arm that suits the query (symbol lookup
// for "where is parse_url defined", history for "what changed last week").
package fusion

import (
	"sort"
)

// DefaultK is the RRF damping constant used when RRF is given k <= 0.
const DefaultK = 60

// Ranked is one arm's ranking, best first. IDs are opaque keys (chunk ids,
// file paths); an ID that appears more than once keeps its best rank.
type Ranked struct {
	Arm string
	IDs []string
}

// Scored is one fused result.
type Scored struct {
	ID    string
	Score float64
	Arms  []string       // arms that found the ID, sorted
	Ranks map[string]int // 1-based rank of the ID in each arm that found it
}

// BestRank is the smallest rank the result has in any arm (0 if none).
func (s Scored) BestRank() int {
	best := 0
	for _, r := range s.Ranks {
		if best == 0 || r < best {
			best = r
		}
	}
	return best
}

// RRF fuses the lists by weighted reciprocal rank fusion:
// score = sum over arms of weight/(k + rank), rank 1-based.
//
// An arm missing from weights has weight 1; an arm whose weight is zero or
// negative is ignored entirely (its IDs are neither scored nor listed in
// Arms). k <= 0 means DefaultK. Empty IDs are skipped. Within one arm an ID
// keeps its best (smallest) rank; several lists with the same Arm name are
// treated as one arm, again keeping the best rank per ID.
//
// The result is sorted by score descending, then by best rank ascending,
// then by ID, so equal inputs always give equal output.
func RRF(lists []Ranked, weights map[string]float64, k float64) []Scored {
	if k <= 0 {
		k = DefaultK
	}
	byID := make(map[string]*Scored)
	var order []*Scored
	for _, l := range lists {
		w := weight(weights, l.Arm)
		if w <= 0 {
			continue
		}
		for i, id := range l.IDs {
			if id == "" {
				continue
			}
			s := byID[id]
			if s == nil {
				s = &Scored{ID: id, Ranks: make(map[string]int)}
				byID[id] = s
				order = append(order, s)
			}
			rank := i + 1
			if old, ok := s.Ranks[l.Arm]; !ok || rank < old {
				s.Ranks[l.Arm] = rank
			}
		}
	}

	type entry struct {
		s    Scored
		best int
	}
	out := make([]entry, 0, len(order))
	var terms []float64
	for _, s := range order {
		s.Arms = make([]string, 0, len(s.Ranks))
		for arm := range s.Ranks {
			s.Arms = append(s.Arms, arm)
		}
		sort.Strings(s.Arms)
		// Sum the smallest terms first, in a fixed order, so that two IDs
		// with the same multiset of contributions get bit-identical scores
		// and fall through to the deterministic tie-breaks.
		terms = terms[:0]
		for _, arm := range s.Arms {
			terms = append(terms, weight(weights, arm)/(k+float64(s.Ranks[arm])))
		}
		sort.Float64s(terms)
		for _, t := range terms {
			s.Score += t
		}
		out = append(out, entry{*s, s.BestRank()})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.s.Score != b.s.Score {
			return a.s.Score > b.s.Score
		}
		if a.best != b.best {
			return a.best < b.best
		}
		return a.s.ID < b.s.ID
	})
	res := make([]Scored, len(out))
	for i, e := range out {
		res[i] = e.s
	}
	return res
}

func weight(weights map[string]float64, arm string) float64 {
	if w, ok := weights[arm]; ok {
		return w
	}
	return 1
}
