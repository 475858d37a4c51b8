// Package vectortest is the conformance suite of vector.Store drivers.
// Every driver's test calls Run with a function returning an empty store.
package vectortest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"codectx/pkg/vector"
)

// Run runs the suite. open returns a store in which the collections the
// suite uses are empty (each subtest uses its own model name).
func Run(t *testing.T, open func(t *testing.T) vector.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s vector.Store, c vector.Collection)
	}{
		{"NearestFirst", testNearestFirst},
		{"TenantIsolation", testTenantIsolation},
		{"Repos", testRepos},
		{"UpsertReplaces", testUpsertReplaces},
		{"DeleteIDs", testDeleteIDs},
		{"DeleteFilter", testDeleteFilter},
		{"DeleteRepo", testDeleteRepo},
		{"List", testList},
		{"Collections", testCollections},
		{"Drop", testDrop},
		{"Errors", testErrors},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			c := vector.Collection{Model: "vectortest-" + tc.name + "-" + fmt.Sprint(rand.Uint32()), Dim: 8}
			tc.fn(t, s, c)
		})
	}
}

// point is a point of tenant/repo for chunk hash h with vector v.
func point(tenant, repo, h string, v []float32) vector.Point {
	return vector.Point{ID: vector.PointID(tenant, repo, h), Vector: v, Payload: vector.Payload{Tenant: tenant, Repo: repo, Hash: h, Path: "src/" + h + ".go"}}
}

// axis is the unit vector along dimension i, tilted by a little of j.
func axis(dim, i, j int, tilt float32) []float32 {
	v := make([]float32, dim)
	v[i] = 1
	v[j] += tilt
	return v
}

func upsert(t *testing.T, s vector.Store, c vector.Collection, pts ...vector.Point) {
	t.Helper()
	if err := s.Upsert(context.Background(), c, pts); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
}

func search(t *testing.T, s vector.Store, c vector.Collection, q []float32, k int, f vector.Filter) []vector.Hit {
	t.Helper()
	hits, err := s.Search(context.Background(), c, q, k, f)
	if err != nil {
		t.Fatalf("Search: %v", err)
	}
	return hits
}

func hashes(hits []vector.Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Payload.Hash)
	}
	return out
}

func testNearestFirst(t *testing.T, s vector.Store, c vector.Collection) {
	// a is along axis 0; b and c lean further away from it; d is orthogonal.
	upsert(t, s, c,
		point("t1", "r1", "d", axis(8, 3, 4, 0)),
		point("t1", "r1", "a", axis(8, 0, 1, 0.1)),
		point("t1", "r1", "c", axis(8, 0, 1, 2)),
		point("t1", "r1", "b", axis(8, 0, 1, 0.7)),
	)
	f := vector.Filter{Tenant: "t1", Repos: []string{"r1"}}
	hits := search(t, s, c, axis(8, 0, 1, 0), 3, f)
	if got, want := hashes(hits), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
	for i := 1; i < len(hits); i++ {
		if hits[i].Score > hits[i-1].Score {
			t.Errorf("scores not descending: %v", hits)
		}
	}
	// Cosine: scaling a vector does not change its score.
	if d := hits[0].Score - 1/float32(1.004987562); d > 1e-3 || d < -1e-3 {
		t.Errorf("score of a = %v, want cosine 0.995", hits[0].Score)
	}
	h := hits[0]
	if h.ID != vector.PointID("t1", "r1", "a") || h.Payload != (vector.Payload{Tenant: "t1", Repo: "r1", Hash: "a", Path: "src/a.go"}) {
		t.Errorf("hit = %+v, want the point of a with its payload", h)
	}
	if all := search(t, s, c, axis(8, 0, 1, 0), 100, f); len(all) != 4 {
		t.Errorf("k beyond the count: %d hits, want 4", len(all))
	}
}

func testTenantIsolation(t *testing.T, s vector.Store, c vector.Collection) {
	// Same repository name and chunk in two tenants: each sees only its own.
	upsert(t, s, c, point("acme", "shop", "x", axis(8, 0, 1, 0)), point("evil", "shop", "x", axis(8, 0, 1, 0)), point("evil", "shop", "y", axis(8, 0, 1, 0.01)))
	hits := search(t, s, c, axis(8, 0, 1, 0), 10, vector.Filter{Tenant: "acme", Repos: []string{"shop"}})
	if len(hits) != 1 || hits[0].Payload.Tenant != "acme" {
		t.Fatalf("acme sees %+v, want its one point", hits)
	}
	if hits := search(t, s, c, axis(8, 0, 1, 0), 10, vector.Filter{Tenant: "nobody", Repos: []string{"shop"}}); len(hits) != 0 {
		t.Fatalf("an unknown tenant sees %+v", hits)
	}
}

func testRepos(t *testing.T, s vector.Store, c vector.Collection) {
	upsert(t, s, c, point("t", "a", "1", axis(8, 0, 1, 0)), point("t", "b", "2", axis(8, 0, 1, 0.2)), point("t", "c", "3", axis(8, 0, 1, 0.1)))
	hits := search(t, s, c, axis(8, 0, 1, 0), 10, vector.Filter{Tenant: "t", Repos: []string{"a", "b"}})
	if got, want := hashes(hits), []string{"1", "2"}; !slices.Equal(got, want) {
		t.Fatalf("repos a,b: %v, want %v", got, want)
	}
	hits = search(t, s, c, axis(8, 0, 1, 0), 1, vector.Filter{Tenant: "t", Repos: []string{"c", "b"}})
	if got, want := hashes(hits), []string{"3"}; !slices.Equal(got, want) {
		t.Fatalf("repos c,b top 1: %v, want %v", got, want)
	}
}

func testUpsertReplaces(t *testing.T, s vector.Store, c vector.Collection) {
	f := vector.Filter{Tenant: "t", Repos: []string{"r"}}
	upsert(t, s, c, point("t", "r", "a", axis(8, 0, 1, 0)), point("t", "r", "b", axis(8, 2, 1, 0)))
	p := point("t", "r", "a", axis(8, 2, 1, 0.1))
	p.Payload.Path = "moved.go"
	upsert(t, s, c, p)
	hits := search(t, s, c, axis(8, 2, 1, 0.1), 10, f)
	if len(hits) != 2 {
		t.Fatalf("after re-upsert: %d points, want 2", len(hits))
	}
	if hits[0].Payload.Hash != "a" || hits[0].Payload.Path != "moved.go" || hits[0].Score < 0.999 {
		t.Errorf("the replaced point: %+v, want a at moved.go with score 1", hits[0])
	}
}

func testDeleteIDs(t *testing.T, s vector.Store, c vector.Collection) {
	f := vector.Filter{Tenant: "t", Repos: []string{"r"}}
	upsert(t, s, c, point("t", "r", "a", axis(8, 0, 1, 0)), point("t", "r", "b", axis(8, 0, 1, 0.5)), point("t", "r", "c", axis(8, 0, 1, 1)))
	// Another tenant's delete of the same ids touches nothing.
	if err := s.Delete(context.Background(), c, vector.Filter{Tenant: "u", Repos: []string{"r"}}, []string{vector.PointID("t", "r", "a")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(context.Background(), c, f, []string{vector.PointID("t", "r", "b"), vector.PointID("t", "r", "missing")}); err != nil {
		t.Fatal(err)
	}
	if got, want := hashes(search(t, s, c, axis(8, 0, 1, 0), 10, f)), []string{"a", "c"}; !slices.Equal(got, want) {
		t.Fatalf("after deleting b: %v, want %v", got, want)
	}
}

func testDeleteFilter(t *testing.T, s vector.Store, c vector.Collection) {
	upsert(t, s, c, point("t", "r", "a", axis(8, 0, 1, 0)), point("t", "q", "b", axis(8, 0, 1, 0)), point("u", "r", "c", axis(8, 0, 1, 0)))
	if err := s.Delete(context.Background(), c, vector.Filter{Tenant: "t", Repos: []string{"r"}}, nil); err != nil {
		t.Fatal(err)
	}
	if hits := search(t, s, c, axis(8, 0, 1, 0), 10, vector.Filter{Tenant: "t", Repos: []string{"r", "q"}}); !slices.Equal(hashes(hits), []string{"b"}) {
		t.Fatalf("tenant t after deleting repo r: %v, want [b]", hashes(hits))
	}
	if hits := search(t, s, c, axis(8, 0, 1, 0), 10, vector.Filter{Tenant: "u", Repos: []string{"r"}}); !slices.Equal(hashes(hits), []string{"c"}) {
		t.Fatalf("tenant u after t deleted its r: %v, want [c]", hashes(hits))
	}
}

func testList(t *testing.T, s vector.Store, c vector.Collection) {
	var pts []vector.Point
	for i := range 300 { // more than one page of a paging driver
		pts = append(pts, point("t", "r", fmt.Sprint(i), axis(8, i%8, (i+1)%8, float32(i)/300)))
	}
	upsert(t, s, c, pts...)
	upsert(t, s, c, point("t", "other", "x", axis(8, 0, 1, 0)), point("u", "r", "y", axis(8, 0, 1, 0)))
	got, err := s.List(context.Background(), c, vector.Filter{Tenant: "t", Repos: []string{"r"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 300 {
		t.Fatalf("List: %d points, want 300", len(got))
	}
	seen := map[string]bool{}
	for _, p := range got {
		if p.Payload.Tenant != "t" || p.Payload.Repo != "r" || p.ID != vector.PointID("t", "r", p.Payload.Hash) {
			t.Fatalf("List returned %+v", p)
		}
		seen[p.ID] = true
	}
	if len(seen) != 300 {
		t.Errorf("List: %d distinct ids, want 300", len(seen))
	}
}

func testCollections(t *testing.T, s vector.Store, c vector.Collection) {
	other := vector.Collection{Model: c.Model + "-other", Dim: 4}
	upsert(t, s, c, point("t", "r", "a", axis(8, 0, 1, 0)))
	upsert(t, s, other, point("t", "r", "b", axis(4, 0, 1, 0)))
	f := vector.Filter{Tenant: "t", Repos: []string{"r"}}
	if got := hashes(search(t, s, c, axis(8, 0, 1, 0), 10, f)); !slices.Equal(got, []string{"a"}) {
		t.Errorf("collection %s: %v, want [a]", c.Name(), got)
	}
	if got := hashes(search(t, s, other, axis(4, 0, 1, 0), 10, f)); !slices.Equal(got, []string{"b"}) {
		t.Errorf("collection %s: %v, want [b]", other.Name(), got)
	}
}

// testDrop: Collections names the collections of codectx the store holds,
// and Drop removes one with the points of every tenant in it, leaving the
// others; a collection already gone is no error, a name not of codectx is.
func testDrop(t *testing.T, s vector.Store, c vector.Collection) {
	ctx := context.Background()
	other := vector.Collection{Model: c.Model + "-old", Dim: 4}
	upsert(t, s, c, point("t", "r", "a", axis(8, 0, 1, 0)))
	upsert(t, s, other, point("t", "r", "b", axis(4, 0, 1, 0)), point("u", "q", "c", axis(4, 1, 0, 0)))
	names, err := s.Collections(ctx)
	if err != nil || !slices.Contains(names, c.Name()) || !slices.Contains(names, other.Name()) || !slices.IsSorted(names) {
		t.Fatalf("Collections = %v, %v; want %s and %s, sorted", names, err, c.Name(), other.Name())
	}
	if err := s.Drop(ctx, other.Name()); err != nil {
		t.Fatalf("Drop: %v", err)
	}
	names, err = s.Collections(ctx)
	if err != nil || !slices.Contains(names, c.Name()) || slices.Contains(names, other.Name()) {
		t.Fatalf("Collections after Drop = %v, %v; want %s without %s", names, err, c.Name(), other.Name())
	}
	if err := s.Drop(ctx, other.Name()); err != nil {
		t.Errorf("Drop of a collection gone: %v", err)
	}
	for _, name := range []string{"", "other_collection", vector.CollectionPrefix, vector.CollectionPrefix + "../x"} {
		if err := s.Drop(ctx, name); !errors.Is(err, vector.ErrCollection) {
			t.Errorf("Drop(%q) = %v, want ErrCollection", name, err)
		}
	}
	f := vector.Filter{Tenant: "t", Repos: []string{"r"}}
	if got := hashes(search(t, s, c, axis(8, 0, 1, 0), 10, f)); !slices.Equal(got, []string{"a"}) {
		t.Errorf("the kept collection: %v, want [a]", got)
	}
	for _, f := range []vector.Filter{f, {Tenant: "u", Repos: []string{"q"}}} {
		if pts, err := s.List(ctx, other, f); err != nil || len(pts) != 0 {
			t.Errorf("the dropped collection holds %d points of %s (%v)", len(pts), f.Tenant, err)
		}
	}
}

func testErrors(t *testing.T, s vector.Store, c vector.Collection) {
	ctx := context.Background()
	if err := s.Upsert(ctx, c, []vector.Point{point("t", "r", "a", axis(4, 0, 1, 0))}); !errors.Is(err, vector.ErrDim) {
		t.Errorf("upsert of a short vector: %v, want ErrDim", err)
	}
	if err := s.Upsert(ctx, c, []vector.Point{point("", "r", "a", axis(8, 0, 1, 0))}); !errors.Is(err, vector.ErrPoint) {
		t.Errorf("upsert without a tenant: %v, want ErrPoint", err)
	}
	upsert(t, s, c, point("t", "r", "a", axis(8, 0, 1, 0)))
	if _, err := s.Search(ctx, c, axis(4, 0, 1, 0), 3, vector.Filter{Tenant: "t", Repos: []string{"r"}}); !errors.Is(err, vector.ErrDim) {
		t.Errorf("search with a short query: %v, want ErrDim", err)
	}
	for _, f := range []vector.Filter{{Repos: []string{"r"}}, {Tenant: "t"}, {Tenant: "t", Repos: []string{""}}} {
		if _, err := s.Search(ctx, c, axis(8, 0, 1, 0), 3, f); !errors.Is(err, vector.ErrFilter) {
			t.Errorf("search with filter %+v: %v, want ErrFilter", f, err)
		}
		if err := s.Delete(ctx, c, f, nil); !errors.Is(err, vector.ErrFilter) {
			t.Errorf("delete with filter %+v: %v, want ErrFilter", f, err)
		}
	}
}

// testDeleteRepo: DeleteRepo empties the repository in every collection
// and leaves the tenant's other repositories, the same name in another
// tenant and a repository nested under the name alone.
func testDeleteRepo(t *testing.T, s vector.Store, c vector.Collection) {
	ctx := context.Background()
	other := vector.Collection{Model: c.Model + "-other", Dim: 4}
	// Tenants of their own: DeleteRepo reaches every collection of the
	// store, those of earlier runs too.
	t1, t2 := fmt.Sprintf("del-%d", rand.Uint32()), fmt.Sprintf("del-%d", rand.Uint32())
	upsert(t, s, c, point(t1, "r", "a", axis(8, 0, 1, 0)), point(t1, "r", "b", axis(8, 1, 2, 0)),
		point(t1, "keep", "c", axis(8, 2, 3, 0)), point(t1, "r/nested", "n", axis(8, 3, 4, 0)), point(t2, "r", "d", axis(8, 0, 1, 0)))
	upsert(t, s, other, point(t1, "r", "e", axis(4, 0, 1, 0)), point(t1, "keep", "f", axis(4, 1, 2, 0)))
	if err := s.DeleteRepo(ctx, t1, "r"); err != nil {
		t.Fatalf("DeleteRepo: %v", err)
	}
	count := func(c vector.Collection, tenant, repo string) int {
		pts, err := s.List(ctx, c, vector.Filter{Tenant: tenant, Repos: []string{repo}})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		return len(pts)
	}
	for _, tc := range []struct {
		c            vector.Collection
		tenant, repo string
		want         int
	}{
		{c, t1, "r", 0}, {other, t1, "r", 0},
		{c, t1, "keep", 1}, {c, t1, "r/nested", 1}, {c, t2, "r", 1}, {other, t1, "keep", 1},
	} {
		if got := count(tc.c, tc.tenant, tc.repo); got != tc.want {
			t.Errorf("after DeleteRepo(%s, r): %s/%s in %s holds %d points, want %d", t1, tc.tenant, tc.repo, tc.c.Model, got, tc.want)
		}
	}
	if hits := search(t, s, c, axis(8, 0, 1, 0), 5, vector.Filter{Tenant: t1, Repos: []string{"r"}}); len(hits) != 0 {
		t.Errorf("search after DeleteRepo: %v", hashes(hits))
	}
	// A second delete, of a repository with no points, is no error.
	if err := s.DeleteRepo(ctx, t1, "r"); err != nil {
		t.Errorf("second DeleteRepo: %v", err)
	}
	if err := s.DeleteRepo(ctx, "", "r"); !errors.Is(err, vector.ErrFilter) {
		t.Errorf("DeleteRepo without a tenant: %v, want ErrFilter", err)
	}
}
