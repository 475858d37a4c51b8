package local_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/vector"
	"codectx/pkg/vector/local"
	"codectx/pkg/vector/vectortest"
)

func TestConformance(t *testing.T) {
	for _, p := range []struct {
		name string
		opt  local.Options
	}{
		{"float32", local.Options{Precision: local.Float32}},
		{"int8", local.Options{Precision: local.Int8}},
		{"binary", local.Options{Precision: local.Binary}},
		// The binary passes on every shard, with few candidates: a search
		// for k re-scores 2k (the suite's sets are tiny).
		{"binary-approximate", local.Options{Precision: local.Binary, ExactBelow: 1, Oversample: 2, MinCandidates: 1, Prefilter: 1}},
	} {
		t.Run(p.name, func(t *testing.T) {
			vectortest.Run(t, func(t *testing.T) vector.Store { return local.Open(blob.NewMem(), p.opt) })
		})
	}
}

func randVec(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// TestPersisted: a second store over the same bucket loads what the first
// wrote, and deletes are persisted too.
func TestPersisted(t *testing.T) {
	ctx := context.Background()
	b := blob.NewMem()
	c := vector.Collection{Model: "m", Dim: 16}
	r := rand.New(rand.NewPCG(1, 2))
	var pts []vector.Point
	for i := range 50 {
		h := string(rune('a' + i%26))
		if i >= 26 {
			h += "2"
		}
		pts = append(pts, vector.Point{ID: vector.PointID("t", "r", h), Vector: randVec(r, 16), Payload: vector.Payload{Tenant: "t", Repo: "r", Hash: h}})
	}
	s1 := local.New(b, local.Float32)
	if err := s1.Upsert(ctx, c, pts); err != nil {
		t.Fatal(err)
	}
	if err := s1.Delete(ctx, c, vector.Filter{Tenant: "t", Repos: []string{"r"}}, []string{pts[0].ID}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.Exists(ctx, local.Key(c, "t", "r")); !ok {
		t.Fatalf("no shard at %s", local.Key(c, "t", "r"))
	}
	f := vector.Filter{Tenant: "t", Repos: []string{"r"}}
	want, _ := s1.Search(ctx, c, pts[7].Vector, 5, f)
	s2 := local.New(b, local.Int8)
	got, err := s2.Search(ctx, c, pts[7].Vector, 5, f)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got, want, func(a, b vector.Hit) bool { return a.ID == b.ID }) || got[0].Payload.Hash != pts[7].Payload.Hash {
		t.Fatalf("reloaded int8 store: %v, want %v", got, want)
	}
	if l, _ := s2.List(ctx, c, f); len(l) != 49 {
		t.Fatalf("reloaded: %d points, want 49", len(l))
	}
	// Deleting every point removes the shard object.
	if err := s2.Delete(ctx, c, f, nil); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.Exists(ctx, local.Key(c, "t", "r")); ok {
		t.Error("shard still stored after deleting every point")
	}
}

// TestInt8Recall: the int8 scan with float re-scoring finds the same top
// 10 as the exact float32 scan on random data.
func TestInt8Recall(t *testing.T) {
	ctx := context.Background()
	c := vector.Collection{Model: "m", Dim: 64}
	r := rand.New(rand.NewPCG(3, 4))
	var pts []vector.Point
	for i := range 17000 { // above parallelMin: the split scan runs
		h := vector.PointID("x", "y", string(rune(i)))
		pts = append(pts, vector.Point{ID: h, Vector: randVec(r, 64), Payload: vector.Payload{Tenant: "t", Repo: "r", Hash: h}})
	}
	f32, i8 := local.New(blob.NewMem(), local.Float32), local.New(blob.NewMem(), local.Int8)
	for _, s := range []*local.Store{f32, i8} {
		if err := s.Upsert(ctx, c, pts); err != nil {
			t.Fatal(err)
		}
	}
	f := vector.Filter{Tenant: "t", Repos: []string{"r"}}
	same, total := 0, 0
	for range 20 {
		q := randVec(r, 64)
		a, _ := f32.Search(ctx, c, q, 10, f)
		b, _ := i8.Search(ctx, c, q, 10, f)
		ids := map[string]bool{}
		for _, h := range a {
			ids[h.ID] = true
		}
		for _, h := range b {
			if ids[h.ID] {
				same++
			}
		}
		total += len(a)
	}
	if rec := float64(same) / float64(total); rec < 0.97 {
		t.Fatalf("int8 recall@10 against exact: %.3f, want >= 0.97", rec)
	}
}
