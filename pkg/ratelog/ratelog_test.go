package ratelog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), time.Minute)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	ctx := context.Background()
	steps := []struct {
		key     string
		advance time.Duration
		want    bool
	}{
		{"a", 0, true},
		{"a", time.Second, false},
		{"b", 0, true}, // another key is not limited by a
		{"a", time.Second, false},
		{"a", time.Minute, true}, // interval passed: logged with repeats=2
		{"a", time.Second, false},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		if got := l.Warn(ctx, s.key, "store write failed", "key", s.key); got != s.want {
			t.Errorf("step %d (%s): logged %v, want %v", i, s.key, got, s.want)
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[2], "repeats=2") || strings.Contains(lines[0], "repeats") {
		t.Errorf("repeat counts wrong:\n%s", buf.String())
	}
}

func TestLimiterForgetsOldestKeys(t *testing.T) {
	l := New(slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)), time.Hour)
	for i := range maxKeys + 10 {
		l.Warn(context.Background(), strings.Repeat("k", 1)+string(rune('a'+i%26))+time.Duration(i).String(), "x")
	}
	if n := len(l.keys); n > maxKeys {
		t.Errorf("%d keys remembered, want at most %d", n, maxKeys)
	}
}
