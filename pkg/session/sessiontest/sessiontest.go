// Package sessiontest is the conformance suite of session.Store drivers.
package sessiontest

import (
	"context"
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
}
