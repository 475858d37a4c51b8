package fusion

import (
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"strconv"
	"testing"
)

func TestRRF(t *testing.T) {
	type want struct {
		id    string
		score float64
		arms  []string
		ranks map[string]int
	}
	tests := []struct {
		name    string
		lists   []Ranked
		weights map[string]float64
		k       float64
		want    []want
	}{
		{
			name:  "single arm keeps order",
			lists: []Ranked{{Arm: "bm25", IDs: []string{"a", "b", "c"}}},
			k:     60,
			want: []want{
				{"a", 1.0 / 61, []string{"bm25"}, map[string]int{"bm25": 1}},
				{"b", 1.0 / 62, []string{"bm25"}, map[string]int{"bm25": 2}},
				{"c", 1.0 / 63, []string{"bm25"}, map[string]int{"bm25": 3}},
			},
		},
		{
			name: "agreement beats a single top rank",
			lists: []Ranked{
				{Arm: "bm25", IDs: []string{"x", "b"}},
				{Arm: "dense", IDs: []string{"y", "b"}},
			},
			k: 60,
			want: []want{
				{"b", 2.0 / 62, []string{"bm25", "dense"}, map[string]int{"bm25": 2, "dense": 2}},
				{"x", 1.0 / 61, []string{"bm25"}, map[string]int{"bm25": 1}},
				{"y", 1.0 / 61, []string{"dense"}, map[string]int{"dense": 1}},
			},
		},
		{
			name: "weights shift the order, missing weight is 1",
			lists: []Ranked{
				{Arm: "symbol", IDs: []string{"s"}},
				{Arm: "bm25", IDs: []string{"t"}},
				{Arm: "graph", IDs: []string{"g"}},
			},
			weights: map[string]float64{"symbol": 3, "bm25": 0.5},
			k:       10,
			want: []want{
				{"s", 3.0 / 11, []string{"symbol"}, map[string]int{"symbol": 1}},
				{"g", 1.0 / 11, []string{"graph"}, map[string]int{"graph": 1}},
				{"t", 0.5 / 11, []string{"bm25"}, map[string]int{"bm25": 1}},
			},
		},
		{
			name: "zero weight drops the arm",
			lists: []Ranked{
				{Arm: "history", IDs: []string{"h", "a"}},
				{Arm: "bm25", IDs: []string{"a"}},
			},
			weights: map[string]float64{"history": 0},
			k:       60,
			want: []want{
				{"a", 1.0 / 61, []string{"bm25"}, map[string]int{"bm25": 1}},
			},
		},
		{
			name: "k <= 0 means 60",
			lists: []Ranked{
				{Arm: "bm25", IDs: []string{"a"}},
			},
			k: 0,
			want: []want{
				{"a", 1.0 / 61, []string{"bm25"}, map[string]int{"bm25": 1}},
			},
		},
		{
			name: "empty arm and empty ids contribute nothing",
			lists: []Ranked{
				{Arm: "dense", IDs: nil},
				{Arm: "bm25", IDs: []string{"", "a"}},
			},
			k: 60,
			want: []want{
				{"a", 1.0 / 62, []string{"bm25"}, map[string]int{"bm25": 2}},
			},
		},
		{
			name: "duplicate id in one list keeps best rank",
			lists: []Ranked{
				{Arm: "bm25", IDs: []string{"a", "b", "a", "a"}},
			},
			k: 60,
			want: []want{
				{"a", 1.0 / 61, []string{"bm25"}, map[string]int{"bm25": 1}},
				{"b", 1.0 / 62, []string{"bm25"}, map[string]int{"bm25": 2}},
			},
		},
		{
			name: "same arm in two lists counts once with best rank",
			lists: []Ranked{
				{Arm: "graph", IDs: []string{"b", "a"}},
				{Arm: "graph", IDs: []string{"a"}},
			},
			k: 60,
			want: []want{
				{"a", 1.0 / 61, []string{"graph"}, map[string]int{"graph": 1}},
				{"b", 1.0 / 61, []string{"graph"}, map[string]int{"graph": 1}},
			},
		},
		{
			name: "tie on score broken by best rank",
			// p: ranks 1 and 5 -> 1/2+1/6 = 2/3; q: ranks 2 and 2 -> 1/3+1/3 = 2/3.
			lists: []Ranked{
				{Arm: "a", IDs: []string{"p", "q", "x", "y", "z"}},
				{Arm: "b", IDs: []string{"w", "q", "v", "u", "p"}},
			},
			k: 1,
			want: []want{
				{"p", 2.0 / 3, []string{"a", "b"}, map[string]int{"a": 1, "b": 5}},
				{"q", 2.0 / 3, []string{"a", "b"}, map[string]int{"a": 2, "b": 2}},
				{"w", 1.0 / 2, []string{"b"}, map[string]int{"b": 1}},
				{"v", 1.0 / 4, []string{"b"}, map[string]int{"b": 3}},
				{"x", 1.0 / 4, []string{"a"}, map[string]int{"a": 3}},
				{"u", 1.0 / 5, []string{"b"}, map[string]int{"b": 4}},
				{"y", 1.0 / 5, []string{"a"}, map[string]int{"a": 4}},
				{"z", 1.0 / 6, []string{"a"}, map[string]int{"a": 5}},
			},
		},
		{
			name: "full tie broken by id",
			lists: []Ranked{
				{Arm: "a", IDs: []string{"m"}},
				{Arm: "b", IDs: []string{"c"}},
				{Arm: "c", IDs: []string{"k"}},
			},
			k: 60,
			want: []want{
				{"c", 1.0 / 61, []string{"b"}, map[string]int{"b": 1}},
				{"k", 1.0 / 61, []string{"c"}, map[string]int{"c": 1}},
				{"m", 1.0 / 61, []string{"a"}, map[string]int{"a": 1}},
			},
		},
		{
			name: "no lists",
			k:    60,
			want: []want{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RRF(tt.lists, tt.weights, tt.k)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d results %v, want %d", len(got), ids(got), len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				if g.ID != w.id {
					t.Fatalf("result %d: got id %q, want %q (order %v)", i, g.ID, w.id, ids(got))
				}
				if math.Abs(g.Score-w.score) > 1e-12 {
					t.Errorf("%s: got score %v, want %v", w.id, g.Score, w.score)
				}
				if !reflect.DeepEqual(g.Arms, w.arms) {
					t.Errorf("%s: got arms %v, want %v", w.id, g.Arms, w.arms)
				}
				wantRanks := make([]int, len(w.arms))
				for i, a := range w.arms {
					wantRanks[i] = w.ranks[a]
				}
				if !reflect.DeepEqual(g.Ranks, wantRanks) {
					t.Errorf("%s: got ranks %v, want %v (of arms %v)", w.id, g.Ranks, wantRanks, w.arms)
				}
			}
		})
	}
}

// Three-term sums in different arm orders must tie exactly, so the tie-break
// (not floating-point noise) decides the order.
func TestRRFDeterministicSums(t *testing.T) {
	lists := []Ranked{
		{Arm: "a", IDs: []string{"p", "q", "r"}},
		{Arm: "b", IDs: []string{"q", "r", "p"}},
		{Arm: "c", IDs: []string{"r", "p", "q"}},
	}
	for range 20 {
		eq := RRF(lists, map[string]float64{"a": 0.3, "b": 0.3, "c": 0.3}, 7)
		if eq[0].Score != eq[1].Score || eq[1].Score != eq[2].Score {
			t.Fatalf("equal contributions gave unequal scores: %v %v %v", eq[0].Score, eq[1].Score, eq[2].Score)
		}
		if gotIDs := ids(eq); !reflect.DeepEqual(gotIDs, []string{"p", "q", "r"}) {
			t.Fatalf("got order %v, want [p q r]", gotIDs)
		}
	}
}

func TestBestRank(t *testing.T) {
	tests := []struct {
		ranks []int
		want  int
	}{
		{nil, 0},
		{[]int{3}, 3},
		{[]int{3, 2, 9}, 2},
	}
	for _, tt := range tests {
		if got := (Scored{Ranks: tt.ranks}).BestRank(); got != tt.want {
			t.Errorf("BestRank(%v) = %d, want %d", tt.ranks, got, tt.want)
		}
	}
}

func ids(s []Scored) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.ID
	}
	return out
}

func BenchmarkRRF(b *testing.B) {
	var lists []Ranked
	for _, arm := range []string{"symbol", "bm25", "dense", "graph", "history"} {
		l := Ranked{Arm: arm}
		for i := 0; i < 50; i++ {
			l.IDs = append(l.IDs, string(rune('a'+i%26))+arm[:1]+string(rune('0'+i%7)))
		}
		lists = append(lists, l)
	}
	w := map[string]float64{"symbol": 1, "bm25": 0.6, "dense": 0.3}
	b.ReportAllocs()
	for b.Loop() {
		RRF(lists, w, 60)
	}
}

// TestRRFMatchesReference compares RRF with a direct implementation of
// its definition (a map of ranks per ID, as RRF was first written) on
// random lists: repeated IDs, shared and repeated arm names, zero and
// missing weights, many ties.
func TestRRFMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	armNames := []string{"symbol", "bm25", "bm25-file", "graph", "history", "off"}
	var buf []Scored
	for n := range 300 {
		var lists []Ranked
		for range r.IntN(6) {
			l := Ranked{Arm: armNames[r.IntN(len(armNames))]}
			for range r.IntN(40) {
				l.IDs = append(l.IDs, strconv.Itoa(r.IntN(30)))
			}
			if r.IntN(10) == 0 {
				l.IDs = append(l.IDs, "")
			}
			lists = append(lists, l)
		}
		w := map[string]float64{"symbol": 0.5, "bm25": 0.6, "graph": 0.2, "off": 0, "history": float64(r.IntN(3)) / 2}
		k := float64(r.IntN(3) * 30)
		got, want := RRF(lists, w, k), refRRF(lists, w, k)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: RRF(%v) =\n%v\nwant\n%v", n, lists, got, want)
		}
		// AppendRRF appends the same to a reused buffer, leaving what
		// was in it.
		buf = append(buf[:0], Scored{ID: "kept"})
		buf = AppendRRF(buf, lists, w, k)
		if buf[0].ID != "kept" || len(buf) != 1+len(want) || (len(want) > 0 && !reflect.DeepEqual(buf[1:], want)) {
			t.Fatalf("case %d: AppendRRF = %v, want kept then %v", n, buf, want)
		}
	}
}

func refRRF(lists []Ranked, weights map[string]float64, k float64) []Scored {
	if k <= 0 {
		k = DefaultK
	}
	byID := map[string]map[string]int{}
	var order []string
	for _, l := range lists {
		if weight(weights, l.Arm) <= 0 {
			continue
		}
		for i, id := range l.IDs {
			if id == "" {
				continue
			}
			if byID[id] == nil {
				byID[id] = map[string]int{}
				order = append(order, id)
			}
			if old, ok := byID[id][l.Arm]; !ok || i+1 < old {
				byID[id][l.Arm] = i + 1
			}
		}
	}
	out := make([]Scored, 0, len(order))
	for _, id := range order {
		s := Scored{ID: id}
		for arm := range byID[id] {
			s.Arms = append(s.Arms, arm)
		}
		sort.Strings(s.Arms)
		var terms []float64
		for _, arm := range s.Arms {
			s.Ranks = append(s.Ranks, byID[id][arm])
			terms = append(terms, weight(weights, arm)/(k+float64(byID[id][arm])))
		}
		sort.Float64s(terms)
		for _, t := range terms {
			s.Score += t
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Score != b.Score {
			return a.Score > b.Score
		}
		if a.BestRank() != b.BestRank() {
			return a.BestRank() < b.BestRank()
		}
		return a.ID < b.ID
	})
	return out
}
