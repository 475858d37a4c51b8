package query

import (
	"cmp"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"codectx/pkg/fusion"
)

// TestTopK checks that topK keeps exactly the first k of a full sort, for
// random inputs with many ties on the score (broken by id), and for k at
// and beyond the length.
func TestTopK(t *testing.T) {
	type cand struct {
		id    int
		score float64
	}
	byScore := func(a, b cand) int { return cmp.Or(cmp.Compare(b.score, a.score), a.id-b.id) }
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 5, 50, 51, 200, 2500} {
		for _, k := range []int{0, 1, 3, 50, n, n + 1} {
			s := make([]cand, n)
			for i, id := range r.Perm(n) {
				s[i] = cand{id, float64(r.IntN(7))}
			}
			want := slices.Clone(s)
			slices.SortFunc(want, byScore)
			want = want[:min(k, n)]
			got := topK(slices.Clone(s), k, byScore)
			slices.SortFunc(got, byScore)
			if !slices.Equal(got, want) {
				t.Fatalf("n=%d k=%d: topK = %v, want %v", n, k, got, want)
			}
		}
	}
}

// TestSortByScore checks sortByScore against a stable sort, with many
// equal scores.
func TestSortByScore(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 60 {
		s := make([]fusion.Scored, n)
		for i := range s {
			s[i] = fusion.Scored{ID: strconv.Itoa(i), Score: float64(r.IntN(5))}
		}
		want := slices.Clone(s)
		slices.SortStableFunc(want, func(a, b fusion.Scored) int { return cmp.Compare(b.Score, a.Score) })
		sortByScore(s)
		if !reflect.DeepEqual(s, want) {
			t.Fatalf("n=%d: sortByScore = %v, want %v", n, s, want)
		}
	}
}
