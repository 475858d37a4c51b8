package query_test

import (
	"context"
	"errors"
	"strings"
	"testing"

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
