// Package ratelog logs repeated failures once per key and interval: the
// first occurrence of a key is logged at once, repeats within the interval
// are counted and the count is reported with the next line logged for the
// key. Workers and servers use it so that every failure leaves a log line
// without an outage flooding the log.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultInterval is the interval of a zero Limiter.
const DefaultInterval = 30 * time.Second

// maxKeys bounds the keys remembered; beyond it the oldest are forgotten.
const maxKeys = 4096

// Limiter rate-limits log lines per key. The zero value is usable once Log
// is set; it is safe for concurrent use.
type Limiter struct {
	Log      *slog.Logger
	Interval time.Duration // default DefaultInterval
	now      func() time.Time

	mu   sync.Mutex
	keys map[string]*entry
}

type entry struct {
	last       time.Time
	suppressed int
}

// New returns a Limiter logging to log.
func New(log *slog.Logger, interval time.Duration) *Limiter {
	return &Limiter{Log: log, Interval: interval}
}

// Warn logs msg with args at warning level unless key was logged within
// the interval; then it only counts the repeat. It reports whether a line
// was written.
func (l *Limiter) Warn(ctx context.Context, key, msg string, args ...any) bool {
	return l.log(ctx, slog.LevelWarn, key, msg, args)
}

// Error is Warn at error level.
func (l *Limiter) Error(ctx context.Context, key, msg string, args ...any) bool {
	return l.log(ctx, slog.LevelError, key, msg, args)
}

func (l *Limiter) log(ctx context.Context, level slog.Level, key, msg string, args []any) bool {
	if l == nil || l.Log == nil {
		return false
	}
	now := time.Now
	if l.now != nil {
		now = l.now
	}
	iv := l.Interval
	if iv <= 0 {
		iv = DefaultInterval
	}
	t := now()
	l.mu.Lock()
	if l.keys == nil {
		l.keys = map[string]*entry{}
	}
	e, ok := l.keys[key]
	if ok && t.Sub(e.last) < iv {
		e.suppressed++
		l.mu.Unlock()
		return false
	}
	if !ok {
		if len(l.keys) >= maxKeys {
			l.forgetOldest()
		}
		e = &entry{}
		l.keys[key] = e
	}
	n := e.suppressed
	e.last, e.suppressed = t, 0
	l.mu.Unlock()
	if n > 0 {
		args = append(args, "repeats", n)
	}
	l.Log.Log(ctx, level, msg, args...)
	return true
}

func (l *Limiter) forgetOldest() {
	var oldest string
	var ot time.Time
	for k, e := range l.keys {
		if oldest == "" || e.last.Before(ot) {
			oldest, ot = k, e.last
		}
	}
	delete(l.keys, oldest)
}
