package session_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"codectx/pkg/query"
	"codectx/pkg/session"
	"codectx/pkg/session/sessiontest"
)

func TestMem(t *testing.T) { sessiontest.Run(t, &session.Mem{}) }

func TestMemTTL(t *testing.T) {
	now := time.Unix(1000, 0)
	m := &session.Mem{TTL: time.Minute, Now: func() time.Time { return now }}
	ctx := context.Background()
	if err := m.Save(ctx, "k", &session.Session{Sent: []query.Sent{{Path: "a.go", Tokens: 1}}}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(59 * time.Second)
	if s, _ := m.Load(ctx, "k"); len(s.Sent) != 1 {
		t.Fatal("forgotten before its TTL")
	}
	now = now.Add(2 * time.Second)
	if s, _ := m.Load(ctx, "k"); len(s.Sent) != 0 {
		t.Fatal("kept past its TTL")
	}
}

func TestKey(t *testing.T) {
	for _, id := range []string{"", "a.b", "a b", "../x", string(make([]byte, 129))} {
		if _, err := session.Key("t", id); !errors.Is(err, session.ErrBadID) {
			t.Errorf("Key(%q) = %v, want ErrBadID", id, err)
		}
	}
	if k, err := session.Key("acme/eu", "chat-42"); err != nil || k != "t.acme/eu.chat-42" {
		t.Errorf("Key = %q, %v", k, err)
	}
}

func TestAddCaps(t *testing.T) {
	var s session.Session
	for i := range session.MaxSent + 5 {
		s.Add(query.Sent{StartLine: i})
	}
	if len(s.Sent) != session.MaxSent || s.Sent[0].StartLine != 5 {
		t.Fatalf("len %d first %d; want the newest %d", len(s.Sent), s.Sent[0].StartLine, session.MaxSent)
	}
}

// A full Mem forgets the session written longest ago, not the new one.
func TestMemMax(t *testing.T) {
	now := time.Unix(1000, 0)
	m := &session.Mem{Max: 3, Now: func() time.Time { return now }}
	ctx := context.Background()
	one := &session.Session{Sent: []query.Sent{{Path: "a.go", Tokens: 1}}}
	for _, k := range []string{"a", "b", "c", "b", "d"} { // b rewritten: a is the oldest
		now = now.Add(time.Second)
		if err := m.Save(ctx, k, one); err != nil {
			t.Fatal(err)
		}
	}
	for k, want := range map[string]int{"a": 0, "b": 1, "c": 1, "d": 1} {
		if s, _ := m.Load(ctx, k); len(s.Sent) != want {
			t.Errorf("session %s after 4 sessions in a store of 3: %d chunks, want %d", k, len(s.Sent), want)
		}
	}
}

// BenchmarkMemSaveFull writes new sessions into a store holding its
// default bound, as a tenant choosing fresh session ids would.
func BenchmarkMemSaveFull(b *testing.B) {
	m := &session.Mem{}
	ctx := context.Background()
	one := &session.Session{Sent: []query.Sent{{Path: "a.go", Tokens: 1}}}
	for i := range session.DefaultMaxSessions {
		if err := m.Save(ctx, fmt.Sprint("s", i), one); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		if err := m.Save(ctx, fmt.Sprint("n", i), one); err != nil {
			b.Fatal(err)
		}
	}
}
