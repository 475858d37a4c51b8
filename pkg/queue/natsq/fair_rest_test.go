package natsq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/queue"
	"codectx/pkg/queue/natsq"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// pullLog is when the server was asked for a message of a share's
// consumer (every pull request, from any client).
type pullLog struct {
	mu sync.Mutex
	at []time.Time
}

// logPulls records the pull requests of share's consumer of the parse
// stage, as another client subscribed to them sees them.
func logPulls(t *testing.T, s *natsq.Server, share string) *pullLog {
	t.Helper()
	nc, _ := rawJS(t, s)
	l := &pullLog{}
	if _, err := nc.Subscribe("$JS.API.CONSUMER.MSG.NEXT.CODECTX_PARSE."+natsq.ShareConsumer(share), func(*nats.Msg) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.at = append(l.at, time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *pullLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.at)
}

// waitGap waits for a pull made at least gap after the one before it:
// the share is at rest, and (its rest doubling) its next pull is about
// twice gap away.
func (l *pullLog) waitGap(t *testing.T, gap time.Duration) {
	t.Helper()
	waitFor(t, "a pull after a gap of "+gap.String(), func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := len(l.at)
		return n >= 2 && l.at[n-1].Sub(l.at[n-2]) >= gap
	})
}

// TestSharesEmptyShareRests: a share whose one message waits for a long
// retry delay is counted by every read of the stream's shares, but its
// pulls find nothing: the reads ask it less and less often (it was asked
// at every read by every idle worker, here 60 reads in 3 s).
func TestSharesEmptyShareRests(t *testing.T) {
	for _, workers := range []int{1, 4} {
		t.Run(fmt.Sprint(workers, " workers"), func(t *testing.T) {
			t.Cleanup(natsq.SetRescan(50 * time.Millisecond)) // runs last: after the consumer stops
			s := startServer(t)
			q := connect(t, s)
			pulls := logPulls(t, s, "tslow")
			var failed atomic.Bool
			consume(t, q, queue.Config{Stage: "parse", Workers: workers, Backoff: []time.Duration{time.Minute}}, func(context.Context, queue.Message) error {
				failed.Store(true)
				return errors.New("transient")
			})
			publish(t, q, "parse", "tslow.x", "m", "")
			waitFor(t, "the first delivery", failed.Load)
			n0 := pulls.count()
			time.Sleep(3 * time.Second)
			// At rest: added after 1, 2, 4, 8, 16 and 32 reads, and asked
			// by one worker or a few at once (before: asked at every read,
			// by some of the workers: 58 and 121 times). One worker was
			// seen asking 14 times under the race detector on a loaded
			// machine, so its bound is 16.
			if n, most := pulls.count()-n0, max(16, 8*workers); n > most {
				t.Errorf("the share was asked %d times in 3 s of reads every 50 ms, want at most %d", n, most)
			} else {
				t.Logf("asked %d times in 3 s", n)
			}
		})
	}
}

// TestSharesAtRestComeBack: a share at rest (its one message in another
// process's hands, its pulls finding nothing) is asked again at once on a
// notice, or when its count changes; with neither, when its rest ends,
// within restMax.
func TestSharesAtRestComeBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		event func(t *testing.T, held jetstream.Msg, nc *nats.Conn, js jetstream.JetStream)
		want  string // the data handled
		fast  bool   // within 400 ms (the rest left is about 1.2 s or more)
	}{
		{"notice", func(t *testing.T, held jetstream.Msg, nc *nats.Conn, _ jetstream.JetStream) {
			// Handed back without changing the count, and announced.
			if err := held.Nak(); err != nil {
				t.Fatal(err)
			}
			if err := nc.Publish("codectx_new.parse", []byte("tslow")); err != nil {
				t.Fatal(err)
			}
		}, "held", true},
		{"count change", func(t *testing.T, _ jetstream.Msg, _ *nats.Conn, js jetstream.JetStream) {
			// Published by a client that announces nothing.
			if _, err := js.Publish(t.Context(), "codectx.parse.tslow.y", []byte("new")); err != nil {
				t.Fatal(err)
			}
		}, "new", true},
		{"neither", func(t *testing.T, held jetstream.Msg, _ *nats.Conn, _ jetstream.JetStream) {
			if err := held.Nak(); err != nil {
				t.Fatal(err)
			}
		}, "held", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(natsq.SetRescan(50 * time.Millisecond)) // runs last: after the consumer stops
			s := startServer(t)
			q := connect(t, s)
			publish(t, q, "parse", "tslow.x", "held", "")
			// Another process holds the message: its consumer is the
			// share's, made as a worker makes it.
			nc, js := rawJS(t, s)
			cons, err := js.CreateOrUpdateConsumer(t.Context(), "CODECTX_PARSE", jetstream.ConsumerConfig{
				Durable: natsq.ShareConsumer("tslow"), AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute,
				FilterSubjects: []string{"codectx.parse.tslow", "codectx.parse.tslow.>"},
			})
			if err != nil {
				t.Fatal(err)
			}
			held, err := cons.Next()
			if err != nil {
				t.Fatal(err)
			}
			pulls := logPulls(t, s, "tslow")
			got := make(chan string, 4)
			consume(t, q, queue.Config{Stage: "parse", AckWait: time.Minute}, func(_ context.Context, m queue.Message) error {
				got <- string(m.Data)
				return nil
			})
			pulls.waitGap(t, 600*time.Millisecond)
			start := time.Now()
			tc.event(t, held, nc, js)
			select {
			case d := <-got:
				took := time.Since(start)
				if d != tc.want {
					t.Errorf("handled %q, want %q", d, tc.want)
				}
				if tc.fast && took > 400*time.Millisecond {
					t.Errorf("handled %v after, want within 400 ms", took)
				}
				if !tc.fast && (took < 400*time.Millisecond || took > 4*time.Second+time.Second) {
					t.Errorf("handled %v after, want when the rest ends: after 400 ms and within restMax (4 s) and a second", took)
				}
			case <-time.After(patience):
				t.Fatalf("%q not handled", tc.want)
			}
		})
	}
}

// TestSharesOtherProcessRetries: a retry scheduled by another process is
// taken by this one, whose scans left the share at rest meanwhile: at once
// if that process's workers are busy when its delay ends (it announces
// the retry), within restMax if it stopped before (no one does).
func TestSharesOtherProcessRetries(t *testing.T) {
	// Busy: mid-way between two of the resting share's re-adds (about
	// 1.55 and 3.15 s after the second process starts).
	const delay = 2200 * time.Millisecond
	for _, tc := range []struct {
		name    string
		restMax time.Duration
		stopped bool          // the first process stops; else its one worker is busy
		within  time.Duration // of the delay's end
	}{
		{"busy", 4 * time.Second, false, 300 * time.Millisecond},
		{"stopped", 400 * time.Millisecond, true, 400*time.Millisecond + 500*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(natsq.SetRescan(50 * time.Millisecond)) // both run last: after the consumers stop
			t.Cleanup(natsq.SetRestMax(tc.restMax))
			s := startServer(t)
			q1, q2 := connect(t, s), connect(t, s)
			failed := make(chan time.Time, 1)
			var busy atomic.Bool
			stop1 := consume(t, q1, queue.Config{Stage: "parse", Backoff: []time.Duration{delay}}, func(ctx context.Context, m queue.Message) error {
				if m.Subject == "tbusy.x" {
					busy.Store(true)
					<-ctx.Done() // holds the first process's one worker
					return ctx.Err()
				}
				failed <- time.Now()
				return errors.New("transient")
			})
			publish(t, q1, "parse", "tslow.x", "m", "")
			var at time.Time
			select {
			case at = <-failed:
			case <-time.After(patience):
				t.Fatal("the first delivery never came")
			}
			// Once the retry is scheduled (a process that stops hands back
			// what it holds for an immediate redelivery).
			waitFor(t, "the retry scheduled", func() bool { return q1.Stats().Retried == 1 })
			if tc.stopped {
				stop1()
				q1.Close()
			} else {
				publish(t, q1, "parse", "tbusy.x", "b", "")
				waitFor(t, "the first process busy", busy.Load)
			}
			again := make(chan time.Time, 1)
			consume(t, q2, queue.Config{Stage: "parse"}, func(_ context.Context, m queue.Message) error {
				if m.Subject != "tslow.x" || m.Deliveries != 2 {
					t.Errorf("handled %s, delivery %d; want the retry of tslow.x", m.Subject, m.Deliveries)
				}
				again <- time.Now()
				return nil
			})
			select {
			case got := <-again:
				late := got.Sub(at.Add(delay))
				t.Logf("taken %v after its delay ended", late.Round(time.Millisecond))
				if late > tc.within {
					t.Errorf("taken %v after its delay ended, want within %v", late, tc.within)
				}
			case <-time.After(patience):
				t.Fatal("the retry never came")
			}
		})
	}
}

// TestSharesHandedBackAtStop: a message another process hands back as it
// stops is taken by this one at once, though its scans left the share at
// rest while the other held it (the stopping process announces it).
func TestSharesHandedBackAtStop(t *testing.T) {
	t.Cleanup(natsq.SetRescan(50 * time.Millisecond)) // runs last: after the consumers stop
	s := startServer(t)
	q1, q2 := connect(t, s), connect(t, s)
	pulls := logPulls(t, s, "tslow")
	var held atomic.Bool
	stop1 := consume(t, q1, queue.Config{Stage: "parse"}, func(ctx context.Context, _ queue.Message) error {
		held.Store(true)
		<-ctx.Done()
		return ctx.Err()
	})
	publish(t, q1, "parse", "tslow.x", "m", "")
	waitFor(t, "the first process holds the message", held.Load)
	got := make(chan time.Time, 1)
	consume(t, q2, queue.Config{Stage: "parse"}, func(context.Context, queue.Message) error {
		got <- time.Now()
		return nil
	})
	pulls.waitGap(t, 600*time.Millisecond)
	start := time.Now()
	stop1()
	select {
	case at := <-got:
		if d := at.Sub(start); d > 400*time.Millisecond {
			t.Errorf("taken %v after the other process stopped, want within 400 ms", d)
		}
	case <-time.After(patience):
		t.Fatal("the message handed back never came")
	}
}
