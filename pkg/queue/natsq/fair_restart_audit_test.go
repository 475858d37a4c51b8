package natsq_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"codectx/pkg/queue"
	"codectx/pkg/queue/natsq"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// restartable is a NATS server on a fixed port and directory, which a
// test stops and starts again (the NATS of a split deployment).
type restartable struct {
	port int
	dir  string
	s    *server.Server
}

func (r *restartable) start(t *testing.T) {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: r.port, JetStream: true, StoreDir: r.dir, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	r.s = s
}

func (r *restartable) stop() {
	r.s.Shutdown()
	r.s.WaitForShutdown()
}

func startRestartable(t *testing.T) *restartable {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r := &restartable{port: port, dir: t.TempDir()}
	r.start(t)
	t.Cleanup(func() { r.stop() })
	return r
}

// TestSharesSurviveNATSRestart: the NATS server restarts while three
// shares' messages are queued, being handled and waiting for retries:
// every message is handled to its end once the server is back.
func TestSharesSurviveNATSRestart(t *testing.T) {
	r := startRestartable(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", r.port)
	q, err := natsq.Connect(t.Context(), url, nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	const shares, each = 3, 30
	var mu sync.Mutex
	ok := map[string]int{}
	consume(t, q, queue.Config{Stage: "parse", Workers: 3, AckWait: time.Second, Backoff: []time.Duration{200 * time.Millisecond}},
		func(_ context.Context, m queue.Message) error {
			time.Sleep(10 * time.Millisecond)
			if m.Deliveries == 1 && m.Data[len(m.Data)-1]%4 == 0 {
				return errors.New("transient")
			}
			mu.Lock()
			ok[string(m.Data)]++
			mu.Unlock()
			return nil
		})
	for i := range shares {
		for j := range each {
			publish(t, q, "parse", fmt.Sprintf("t%d.x", i), fmt.Sprintf("t%d-%02d", i, j), "")
		}
	}
	waitFor(t, "a third handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(ok) >= shares*each/3 })
	r.stop()
	time.Sleep(700 * time.Millisecond)
	r.start(t)
	back := time.Now()
	waitFor(t, "every message handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(ok) == shares*each })
	t.Logf("every message handled %v after the restart", time.Since(back).Round(time.Millisecond))
	waitPending(t, q, "parse", 0)
	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for _, n := range ok {
		if n > 1 {
			twice++
		}
	}
	t.Logf("%d of %d messages handled to success twice (an ack lost with the server)", twice, len(ok))
}

// TestSharesAcrossProcesses: three worker processes (clients) share a
// busy share's 200 messages and a small share's trickle; one process dies
// (its connection closes) with messages in hand. Every message is handled
// to success, twice only if the dead process held it, and the small
// share's messages (but one taken by the dying process) wait for at
// most a turn.
func TestSharesAcrossProcesses(t *testing.T) {
	s := startServer(t)
	pub := connect(t, s)
	const busy, small = 200, 20
	var mu sync.Mutex
	okBy := map[string][]int{}
	smallAt := map[string]time.Time{}
	var smallWorst time.Duration
	cfg := queue.Config{Stage: "parse", Workers: 2, AckWait: time.Second}
	var procs []*natsq.Queue
	for p := range 3 {
		q, err := natsq.Connect(t.Context(), s.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(q.Close)
		procs = append(procs, q)
		consume(t, q, cfg, func(_ context.Context, m queue.Message) error {
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			okBy[string(m.Data)] = append(okBy[string(m.Data)], p)
			// A message taken by the process as it died waits for AckWait.
			if at, ok := smallAt[string(m.Data)]; ok && len(okBy[string(m.Data)]) == 1 && m.Deliveries == 1 {
				smallWorst = max(smallWorst, time.Since(at))
			}
			return nil
		})
	}
	for i := range busy {
		publish(t, pub, "parse", "tbusy.x", fmt.Sprintf("busy-%03d", i), "")
	}
	for i := range small {
		d := fmt.Sprintf("small-%02d", i)
		mu.Lock()
		smallAt[d] = time.Now()
		mu.Unlock()
		publish(t, pub, "parse", "tsmall.x", d, "")
		if i == small/2 {
			procs[0].Close() // dies with messages in hand: no ack, no heartbeat
			mu.Lock()
			t.Logf("process 0 died after %d of %d were handled", len(okBy), busy+i+1)
			mu.Unlock()
		}
		time.Sleep(30 * time.Millisecond)
	}
	waitPending(t, pub, "parse", 0)
	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for i := range busy + small {
		d := fmt.Sprintf("busy-%03d", i)
		if i >= busy {
			d = fmt.Sprintf("small-%02d", i-busy)
		}
		by := okBy[d]
		switch {
		case len(by) == 0:
			t.Errorf("%s never handled", d)
		case len(by) > 1:
			twice++
			if by[0] != 0 {
				t.Errorf("%s handled by processes %v: twice, though the first was not the one that died", d, by)
			}
		}
	}
	t.Logf("%d of %d messages handled twice (held by the process that died); the small share's slowest %v", twice, busy+small, smallWorst.Round(time.Millisecond))
	if smallWorst > 500*time.Millisecond {
		t.Errorf("a small share's message waited %v", smallWorst)
	}
}
