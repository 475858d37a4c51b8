package queue

import (
	"errors"
	"testing"
	"time"
)

func TestRetryDelay(t *testing.T) {
	c := Config{Backoff: []time.Duration{time.Second, 2 * time.Second}}
	for _, tc := range []struct {
		deliveries int
		want       time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {9, 2 * time.Second}} {
		if got := c.RetryDelay(tc.deliveries); got != tc.want {
			t.Errorf("RetryDelay(%d) = %v, want %v", tc.deliveries, got, tc.want)
		}
	}
	if got := (Config{}).RetryDelay(3); got != 0 {
		t.Errorf("RetryDelay without backoff = %v, want 0", got)
	}
}

func TestWithDefaults(t *testing.T) {
	got, err := Config{Stage: "parse"}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if got.AckWait != DefaultAckWait || got.MaxDeliver != DefaultMaxDeliver || got.Workers != 1 {
		t.Errorf("WithDefaults = %+v", got)
	}
	for _, c := range []Config{
		{Stage: ""},
		{Stage: "Parse"},
		{Stage: "a.b"},
		{Stage: "ok", MaxDeliver: -1},
		{Stage: "ok", Workers: -2},
		{Stage: "ok", AckWait: -time.Second},
		{Stage: "ok", Backoff: []time.Duration{-1}},
	} {
		if _, err := c.WithDefaults(); err == nil {
			t.Errorf("WithDefaults(%+v) succeeded, want error", c)
		}
	}
	if _, err := (Config{Stage: "a-b"}).WithDefaults(); !errors.Is(err, ErrInvalidStage) {
		t.Errorf("stage a-b err = %v, want ErrInvalidStage", err)
	}
}
