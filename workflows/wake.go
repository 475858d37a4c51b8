package workflows

import (
	"context"
	"strings"

	"codectx/pkg/queue"

	"go.temporal.io/sdk/activity"
)

// waker wakes a waiting activity when a consumer finishes one of its
// messages, so that it checks at once instead of at its next poll. The
// poll stays: a notification may be lost (a consumer of an older version,
// a reconnect, a full buffer), and the store and the dead-letter queue,
// not the notification, say what happened.
type waker struct {
	c    <-chan queue.Done // nil when watching failed: never ready
	stop func()
}

// watch starts watching stage's messages of subject; on failure the wait
// only polls.
func (a *Activities) watch(ctx context.Context, stage, subject string) waker {
	return a.startWaker(ctx, stage, "", func() (<-chan queue.Done, func(), error) { return a.Queue.Watch(stage, subject) })
}

// watchShare starts watching every message of stage in the share of
// subject (its first token), for a wait whose publish was refused because
// the share was full; on failure it only polls.
func (a *Activities) watchShare(ctx context.Context, stage, subject string) waker {
	share, _, _ := strings.Cut(subject, ".")
	return a.startWaker(ctx, stage, "'s share", func() (<-chan queue.Done, func(), error) { return a.Queue.WatchShare(stage, share) })
}

func (a *Activities) startWaker(ctx context.Context, stage, what string, start func() (<-chan queue.Done, func(), error)) waker {
	if a.Queue == nil || a.NoWake {
		return waker{stop: func() {}}
	}
	c, stop, err := start()
	if err != nil {
		if activity.IsActivity(ctx) {
			activity.GetLogger(ctx).Warn("no wake-ups from the queue"+what+": polling only", "stage", stage, "error", err)
		}
		return waker{stop: func() {}}
	}
	return waker{c: c, stop: stop}
}

// woken is what the notifications read at once said: the ids of the
// finished messages, and whether one was dead-lettered.
type woken struct {
	ids  map[string]bool
	dead bool
}

// drain reads d and the notifications already waiting after it.
func (w waker) drain(d queue.Done) woken {
	r := woken{ids: map[string]bool{d.ID: true}, dead: d.Dead}
	for {
		select {
		case d := <-w.c:
			r.ids[d.ID] = true
			r.dead = r.dead || d.Dead
		default:
			return r
		}
	}
}
