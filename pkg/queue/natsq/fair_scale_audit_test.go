package natsq_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"codectx/pkg/queue"
	"codectx/pkg/queue/natsq"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestAuditManyShares (measurement; CODECTX_AUDIT=1): n shares each hold
// one message waiting for a long retry delay (in the stream, so every read
// of the shares puts them back in the ring, but nothing to hand out); a
// new share's one message is published 20 times: how long until handled.
// The idle cost is read 1-4 s and 4-10 s after their first deliveries.
func TestAuditManyShares(t *testing.T) {
	if os.Getenv("CODECTX_AUDIT") == "" {
		t.Skip("measurement: CODECTX_AUDIT=1")
	}
	for _, n := range []int{0, 100, 400} {
		t.Run(fmt.Sprint(n, " shares"), func(t *testing.T) {
			s := startServer(t)
			q := connect(t, s)
			got := make(chan struct{}, 1)
			var calls atomic.Int64
			consume(t, q, queue.Config{Stage: "parse", Workers: 4, MaxDeliver: 100, Backoff: []time.Duration{time.Minute}},
				func(_ context.Context, m queue.Message) error {
					calls.Add(1)
					if m.Subject == "tnew.x" {
						got <- struct{}{}
						return nil
					}
					return errors.New("transient")
				})
			start := time.Now()
			for i := range n {
				publish(t, q, "parse", fmt.Sprintf("t%04d.x", i), "m", "")
			}
			waitFor(t, "every share's first delivery", func() bool { return calls.Load() >= int64(n) })
			t.Logf("%d shares' first deliveries in %v", n, time.Since(start).Round(time.Millisecond))
			time.Sleep(time.Second)
			// The first window holds the scans' first re-adds of the shares
			// found empty; the second, those at rest (restMax apart).
			for _, w := range []struct {
				what string
				d    time.Duration
			}{{"1-4 s", 3 * time.Second}, {"4-10 s", 6 * time.Second}} {
				cpu0, wall0 := cpuTime(), time.Now()
				time.Sleep(w.d)
				t.Logf("%d shares waiting on retries, idle %s after: %.1f%% of a core (server and workers)", n, w.what, 100*float64(cpuTime()-cpu0)/float64(time.Since(wall0)))
			}
			var lat []time.Duration
			for range 20 {
				start := time.Now()
				publish(t, q, "parse", "tnew.x", "m", "")
				select {
				case <-got:
				case <-time.After(patience):
					t.Fatal("the new share's message not handled")
				}
				lat = append(lat, time.Since(start))
				time.Sleep(73 * time.Millisecond)
			}
			slices.Sort(lat)
			t.Logf("%d shares waiting on retries: new share's message handled in median %v, worst %v", n, lat[len(lat)/2], lat[len(lat)-1])
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestAuditFloodCost (measurement; CODECTX_AUDIT=1): 8 shares publish
// 300 messages each as fast as they can to 4 workers whose handler takes
// 1 ms: wall time and CPU per message (server and clients together).
func TestAuditFloodCost(t *testing.T) {
	if os.Getenv("CODECTX_AUDIT") == "" {
		t.Skip("measurement: CODECTX_AUDIT=1")
	}
	s := startServer(t)
	q := connect(t, s)
	pubq := connect(t, s)
	var n atomic.Int64
	consume(t, q, queue.Config{Stage: "parse", Workers: 4}, func(_ context.Context, m queue.Message) error {
		time.Sleep(time.Millisecond)
		n.Add(1)
		return nil
	})
	const shares, each = 8, 300
	cpu0, wall0 := cpuTime(), time.Now()
	done := make(chan struct{})
	for i := range shares {
		go func() {
			for j := range each {
				publish(t, pubq, "parse", fmt.Sprintf("t%d.s%d", i, j%4), "m", "")
			}
			done <- struct{}{}
		}()
	}
	for range shares {
		<-done
	}
	waitFor(t, "all handled", func() bool { return n.Load() == shares*each })
	wall, cpu := time.Since(wall0), cpuTime()-cpu0
	t.Logf("%d messages of %d shares: %v, CPU %v (%v a message)", shares*each, shares, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), (cpu / (shares * each)).Round(time.Microsecond))
}

// TestAuditRollback (measurement; CODECTX_AUDIT=1): newer workers stop
// (a rollback) with a share's messages queued; an older worker then tries
// to make its unfiltered consumer every 100 ms. With the idle removal of
// the shares' consumers shortened to 2 s: how long it is refused.
func TestAuditRollback(t *testing.T) {
	if os.Getenv("CODECTX_AUDIT") == "" {
		t.Skip("measurement: CODECTX_AUDIT=1")
	}
	t.Cleanup(natsq.SetShareIdle(2 * time.Second))
	s := startServer(t)
	q := connect(t, s)
	publish(t, q, "parse", "ta.x", "a", "")
	stop := consume(t, q, queue.Config{Stage: "parse"}, func(context.Context, queue.Message) error { return nil })
	waitPending(t, q, "parse", 0)
	publish(t, q, "parse", "tb.x", "b", "")
	publish(t, q, "parse", "ta.x", "a2", "")
	time.Sleep(100 * time.Millisecond)
	stop()
	_, js := rawJS(t, s)
	start := time.Now()
	var first error
	for {
		_, err := js.CreateOrUpdateConsumer(t.Context(), "CODECTX_PARSE", jetstream.ConsumerConfig{Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy})
		if err == nil {
			break
		}
		if first == nil {
			first = err
		}
		if time.Since(start) > patience {
			t.Fatalf("the older worker's consumer refused for %v: %v", patience, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the older worker's consumer refused for %v (%v)", time.Since(start).Round(time.Millisecond), first)
}

// TestAuditRollingUpgrade (measurement; CODECTX_AUDIT=1): an older worker
// (the unfiltered consumer "workers", taking one message at a time, as
// before fair consumption) handles two shares' 20 messages, 200 ms each;
// a newer worker starts after its third. What the older one is left with,
// and how many messages are handled twice.
func TestAuditRollingUpgrade(t *testing.T) {
	if os.Getenv("CODECTX_AUDIT") == "" {
		t.Skip("measurement: CODECTX_AUDIT=1")
	}
	s := startServer(t)
	q := connect(t, s)
	for i := range 20 {
		publish(t, q, "parse", fmt.Sprintf("t%d.x", i%2), fmt.Sprintf("m%02d", i), "")
	}
	_, js := rawJS(t, s)
	cons, err := js.CreateOrUpdateConsumer(t.Context(), "CODECTX_PARSE", jetstream.ConsumerConfig{Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var handled sync.Map // data: times
	count := func(d string) {
		n, _ := handled.LoadOrStore(d, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	var oldDone atomic.Int64
	oldErr := make(chan error, 1)
	go func() {
		for {
			msg, err := cons.Next(jetstream.FetchMaxWait(time.Second))
			if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
				continue
			}
			if err != nil {
				oldErr <- err
				return
			}
			time.Sleep(200 * time.Millisecond)
			count(string(msg.Data()))
			if msg.DoubleAck(t.Context()) == nil {
				oldDone.Add(1)
			}
		}
	}()
	waitFor(t, "the older worker's third", func() bool { return oldDone.Load() >= 3 })
	consume(t, q, queue.Config{Stage: "parse", Workers: 2}, func(_ context.Context, m queue.Message) error {
		time.Sleep(200 * time.Millisecond)
		count(string(m.Data))
		return nil
	})
	waitPending(t, q, "parse", 0)
	var err2 error
	select {
	case err2 = <-oldErr:
	case <-time.After(5 * time.Second):
	}
	twice := 0
	handled.Range(func(_, v any) bool {
		if v.(*atomic.Int64).Load() > 1 {
			twice++
		}
		return true
	})
	t.Logf("older worker acked %d, then: %v; %d of 20 messages handled twice", oldDone.Load(), err2, twice)
}
