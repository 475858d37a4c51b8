// Package sessiontest is the conformance suite of session.Store drivers.
package sessiontest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"codectx/pkg/query"
	"codectx/pkg/session"
)

// Run checks a store: unknown keys load empty, saves round-trip and
// replace, keys are independent.
func Run(t *testing.T, st session.Store) {
	ctx := context.Background()
	a, err := session.Key("acme", "s-1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := session.Key("acme.x", "s-1")
	got, err := st.Load(ctx, a)
	if err != nil || len(got.Sent) != 0 {
		t.Fatalf("Load(unknown) = %+v, %v; want empty", got, err)
	}
	one := query.Sent{Repo: "shop", Commit: "c1", Path: "a.go", StartLine: 1, EndLine: 9, Symbol: "F", Tokens: 40}
	if err := st.Save(ctx, a, &session.Session{Sent: []query.Sent{one}}); err != nil {
		t.Fatal(err)
	}
	got, err = st.Load(ctx, a)
	if err != nil || len(got.Sent) != 1 || got.Sent[0] != one {
		t.Fatalf("Load = %+v, %v; want the one chunk saved", got, err)
	}
	if other, err := st.Load(ctx, b); err != nil || len(other.Sent) != 0 {
		t.Fatalf("another tenant's key sees %+v, %v", other, err)
	}
	got.Add(query.Sent{Repo: "shop", Commit: "c1", Path: "b.go", StartLine: 3, EndLine: 4, Tokens: 7})
	if err := st.Save(ctx, a, got); err != nil {
		t.Fatal(err)
	}
	again, err := st.Load(ctx, a)
	if err != nil || len(again.Sent) != 2 || again.Sent[1].Path != "b.go" {
		t.Fatalf("after the second save: %+v, %v", again, err)
	}
	appends(t, st)
}

// appends checks Append: it creates a session, adds to one, and appends
// that run at once all land (a Load and a Save of each kept only the
// last one's chunks).
func appends(t *testing.T, st session.Store) {
	ctx := context.Background()
	key, _ := session.Key("acme", "s-append")
	chunk := func(g, i int) query.Sent {
		return query.Sent{Repo: "shop", Commit: "c1", Path: fmt.Sprintf("g%d/f%d.go", g, i), StartLine: 1, EndLine: 2, Tokens: 5}
	}
	got, err := st.Append(ctx, key, []query.Sent{chunk(0, 0)})
	if err != nil || len(got.Sent) != 1 || got.Sent[0] != chunk(0, 0) {
		t.Fatalf("Append to a new session = %+v, %v", got, err)
	}
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for g := 1; g <= writers; g++ {
		wg.Go(func() {
			for i := range each {
				if _, err := st.Append(ctx, key, []query.Sent{chunk(g, i)}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append at once: %v", err)
	}
	got, err = st.Load(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	have := map[query.Sent]bool{}
	for _, c := range got.Sent {
		have[c] = true
	}
	for g := 0; g <= writers; g++ {
		for i := range each {
			if g == 0 && i > 0 {
				break
			}
			if !have[chunk(g, i)] {
				t.Fatalf("after %d appends at once the session holds %d chunks; %s is lost", writers*each, len(got.Sent), chunk(g, i).Path)
			}
		}
	}
	if len(got.Sent) != 1+writers*each {
		t.Fatalf("session holds %d chunks, want %d", len(got.Sent), 1+writers*each)
	}
}
