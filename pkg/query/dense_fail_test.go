package query_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"codectx/pkg/codectx"
	"codectx/pkg/query"
	"codectx/pkg/segment"
)

type downDense struct{}

func (downDense) Search(context.Context, *segment.Segment, string, int) ([]int, error) {
	return nil, errors.New("embedder down")
}

// TestDenseDown: a failing dense arm fails the search with an ArmError,
// unless the engine degrades (a server) and the request named no arms:
// then the other arms answer and the answer says the dense arm is missing.
func TestDenseDown(t *testing.T) {
	seg := fixture(t)
	ctx := context.Background()
	var ae *query.ArmError
	if _, err := (&query.Engine{Seg: seg, Dense: downDense{}}).Query(ctx, query.Request{Query: "cart total"}); !errors.As(err, &ae) || ae.Arm != query.ArmDense {
		t.Errorf("strict engine: err = %v, want an ArmError of the dense arm", err)
	}
	eng := &query.Engine{Seg: seg, Dense: downDense{}, DegradeDense: true}
	resp, err := eng.Query(ctx, query.Request{Query: "cart total", Budget: 2000})
	if err != nil {
		t.Fatalf("degrading engine: %v", err)
	}
	if len(resp.Chunks) == 0 || !strings.Contains(resp.Degraded, "embedder down") {
		t.Errorf("degrading engine: %d chunks, degraded %q; want chunks and the dense arm's failure", len(resp.Chunks), resp.Degraded)
	}
	if _, err := eng.Query(ctx, query.Request{Query: "cart total", Arms: []string{query.ArmDense, query.ArmBM25}}); !errors.As(err, &ae) {
		t.Errorf("request naming the dense arm: err = %v, want an ArmError", err)
	}
}

// rankedDense ranks every chunk of the segment in id order: a store whose
// hits, over the whole repository, come before the filter.
type rankedDense struct{ calls *int }

func (d rankedDense) Search(_ context.Context, seg *segment.Segment, _ string, k int) ([]int, error) {
	*d.calls++
	ids := make([]int, 0, k)
	for i := range seg.Chunks {
		if len(ids) == k {
			break
		}
		ids = append(ids, i)
	}
	return ids, nil
}

// TestDenseFilterDeeper: with a languages filter, the dense arm's hits
// of other languages do not crowd out the ones asked for: a Python
// function ranked after hundreds of Go ones by the store is still found.
func TestDenseFilterDeeper(t *testing.T) {
	files := map[string]string{"zz/calc.py": "def add_prices(items):\n    \"\"\"Adds the prices of the cart items.\"\"\"\n    return sum(items)\n"}
	for i := range 60 {
		var b strings.Builder
		b.WriteString("package a\n")
		for j := range 5 {
			fmt.Fprintf(&b, "\n// Add%d_%d adds the prices of the cart items.\nfunc Add%d_%d(items []int) int { return len(items) }\n", i, j, i, j)
		}
		files[fmt.Sprintf("a%02d/a.go", i)] = b.String()
	}
	seg := segOf(t, "r", files)
	calls := 0
	resp, err := (&query.Engine{Seg: seg, Dense: rankedDense{&calls}}).Query(context.Background(),
		query.Request{Query: "adds the prices of the cart items", Arms: []string{query.ArmDense}, Languages: []codectx.Language{codectx.Python}, Budget: 2000})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range resp.Chunks {
		found = found || c.Path == "zz/calc.py"
	}
	if !found {
		t.Errorf("dense with languages python: %d chunks, none of zz/calc.py (searched %d times)", len(resp.Chunks), calls)
	}
}
