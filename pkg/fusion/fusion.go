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
	"cmp"
	"slices"
	"strings"
	"sync"
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
	Arms  []string // arms that found the ID, sorted
	Ranks []int    // Ranks[i] is the 1-based rank of the ID in Arms[i]
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
	if res := AppendRRF(nil, lists, weights, k); res != nil {
		return res
	}
	return []Scored{} // empty, not nil, as it always was
}

// AppendRRF appends RRF(lists, weights, k) to dst (a caller's reused
// buffer) and returns it.
func AppendRRF(dst []Scored, lists []Ranked, weights map[string]float64, k float64) []Scored {
	if k <= 0 {
		k = DefaultK
	}
	// The arms that count, sorted: an ID's ranks are a row of one slot per
	// arm (0 = not found), so Arms come out sorted with no per-ID map.
	var arms []string
	for _, l := range lists {
		if weight(weights, l.Arm) > 0 && !slices.Contains(arms, l.Arm) {
			arms = append(arms, l.Arm)
		}
	}
	slices.Sort(arms)
	na := len(arms)
	armW := make([]float64, na)
	for a, arm := range arms {
		armW[a] = weight(weights, arm)
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	byID := sc.byID
	ids := sc.ids[:0]
	ranks := sc.ranks[:0] // row i*na..(i+1)*na: ID i's rank in each arm
	for _, l := range lists {
		a, ok := slices.BinarySearch(arms, l.Arm)
		if !ok {
			continue
		}
		for i, id := range l.IDs {
			if id == "" {
				continue
			}
			e, ok := byID[id]
			if !ok {
				e = int32(len(ids))
				byID[id] = e
				ids = append(ids, id)
				ranks = append(ranks, make([]int, na)...)
			}
			rank := i + 1
			if r := &ranks[int(e)*na+a]; *r == 0 || rank < *r {
				*r = rank
			}
		}
	}

	sc.ids, sc.ranks = ids, ranks
	out := grown(&sc.out, len(ids))
	best := grown(&sc.best, len(ids))
	nfound := 0
	for e := range ids {
		for _, r := range ranks[e*na : (e+1)*na] {
			if r > 0 {
				nfound++
			}
		}
	}
	armSlab := make([]string, 0, nfound)
	rankSlab := make([]int, 0, nfound)
	terms := sc.terms[:0]
	for e, id := range ids {
		s := &out[e]
		s.ID = id
		start := len(armSlab)
		terms = terms[:0]
		for a, r := range ranks[e*na : (e+1)*na] {
			if r == 0 {
				continue
			}
			armSlab = append(armSlab, arms[a])
			rankSlab = append(rankSlab, r)
			terms = append(terms, armW[a]/(k+float64(r)))
			if best[e] == 0 || r < best[e] {
				best[e] = r
			}
		}
		s.Arms = armSlab[start:len(armSlab):len(armSlab)]
		s.Ranks = rankSlab[start:len(rankSlab):len(rankSlab)]
		// Sum the smallest terms first, in a fixed order, so that two IDs
		// with the same multiset of contributions get bit-identical scores
		// and fall through to the deterministic tie-breaks.
		slices.Sort(terms)
		for _, t := range terms {
			s.Score += t
		}
	}
	sc.terms = terms
	order := grown(&sc.order, len(out))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(i, j int32) int {
		a, b := &out[i], &out[j]
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(best[i], best[j]); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	res := slices.Grow(dst, len(out))
	for _, e := range order {
		res = append(res, out[e])
	}
	return res
}

// scratch is RRF's working memory, pooled: a query fuses a few thousand
// IDs, and fresh maps and rows for each were a sixth of a query's
// allocation. Only the returned slices (the results, their arms and
// ranks) are the caller's.
type scratch struct {
	byID  map[string]int32
	ids   []string
	ranks []int
	out   []Scored
	best  []int
	terms []float64
	order []int32
}

var scratchPool = sync.Pool{New: func() any { return &scratch{byID: map[string]int32{}} }}

// maxScratch is the most IDs a pooled scratch keeps room for; a larger
// fusion's memory goes back to the collector.
const maxScratch = 1 << 16

func (sc *scratch) release() {
	if len(sc.ids) > maxScratch {
		return
	}
	clear(sc.byID)
	clear(sc.ids) // no strings kept alive
	clear(sc.out) // nor results
	sc.ids, sc.out = sc.ids[:0], sc.out[:0]
	scratchPool.Put(sc)
}

// grown returns (*s)[:n], zeroed, growing *s if needed.
func grown[T any](s *[]T, n int) []T {
	if cap(*s) < n {
		*s = make([]T, n)
		return *s
	}
	*s = (*s)[:n]
	clear(*s)
	return *s
}

func weight(weights map[string]float64, arm string) float64 {
	if w, ok := weights[arm]; ok {
		return w
	}
	return 1
}
