package workflows_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/dense/densetest"
	"codectx/pkg/embed"
	"codectx/pkg/index"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue"
	"codectx/pkg/queue/natsq"
	vlocal "codectx/pkg/vector/local"
	"codectx/workflows"

	"github.com/nats-io/nats.go/jetstream"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"
)

// peak is the highest count of a stage's messages in the queue seen by a
// sampler (n), and of the batches they are (b: a batch's copies re-sent
// after a timeout count once).
type peak struct{ n, b atomic.Int64 }

func (p *peak) see(ctx context.Context, in *inQueue, stage string) {
	n, b, err := in.count(ctx, stage)
	if err != nil {
		return
	}
	raise(&p.n, int64(n))
	raise(&p.b, int64(b))
}

// raise sets v to n when n is higher.
func raise(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// inQueue counts a stage's messages in the queue: stored in its stream
// and not finished by a worker. That is what a window bounds, and not
// what Queue.Pending (the stream's count) says: NATS removes an
// acknowledged message from a work-queue stream after the
// acknowledgement, and under load the stream was seen still holding a
// message dead-lettered and acknowledged two deliveries earlier (Pending
// 3 and more with a window of 1, every message of the run sent once).
// The workers' handlers are wrapped (Wrap) to record what they finished.
type inQueue struct {
	q    *natsq.Queue
	mu   sync.Mutex
	done map[string]bool // stage and message ID of each finished message
}

func newInQueue(q *natsq.Queue) *inQueue {
	return &inQueue{q: q, done: map[string]bool{}}
}

// wrap is a pipeline.Workers.Wrap for workers run with cfg. A
// message is finished when its handler succeeds or fails for good (a
// permanent error, or its last delivery: it is dead-lettered); a message
// handled again is in the queue again.
func (in *inQueue) wrap(cfg queue.Config) func(string, queue.Handler) queue.Handler {
	maxDeliver := cmp.Or(cfg.MaxDeliver, queue.DefaultMaxDeliver)
	return func(stage string, h queue.Handler) queue.Handler {
		return func(ctx context.Context, m queue.Message) (err error) {
			key := stage + "\x00" + m.ID
			in.mu.Lock()
			delete(in.done, key)
			in.mu.Unlock()
			panicked := true
			defer func() {
				// What Queue.Consume then does: acknowledge it, or
				// dead-letter it unless it stops (and hands it back).
				finished := err == nil && !panicked ||
					ctx.Err() == nil && (queue.IsPermanent(err) || m.Deliveries >= maxDeliver)
				if finished {
					in.mu.Lock()
					in.done[key] = true
					in.mu.Unlock()
				}
			}()
			err = h(ctx, m)
			panicked = false
			return err
		}
	}
}

// count is the number of the stage's stored messages not finished (read
// one by one from the stage's stream, named as the natsq package says),
// and of the batches they are: the copies of a batch re-sent after a
// timeout count once.
func (in *inQueue) count(ctx context.Context, stage string) (msgs, batches int, err error) {
	s, err := in.q.JetStream().Stream(ctx, "CODECTX_"+strings.ToUpper(stage))
	if err != nil {
		return 0, 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, 0, err
	}
	seen := map[string]bool{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return 0, 0, err
		}
		id := m.Header.Get(jetstream.MsgIDHeader)
		in.mu.Lock()
		done := in.done[stage+"\x00"+id]
		in.mu.Unlock()
		if !done {
			// A re-send (id#rN) or re-publish (id#iN) is the same batch.
			msgs++
			batch, _, _ := strings.Cut(id, "#")
			seen[batch] = true
		}
	}
	return msgs, len(seen), nil
}

// drained waits until the stage's stream is empty: every message was
// acknowledged or dead-lettered, and NATS removed it.
func drained(ctx context.Context, t *testing.T, q *natsq.Queue, stage string) {
	t.Helper()
	for {
		n, err := q.Pending(ctx, stage)
		if err == nil && n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("%s queue still holds %d messages (%v)", stage, n, err)
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// sampledEmbedder embeds with Words and samples the embed queue first.
type sampledEmbedder struct {
	densetest.Words
	in   *inQueue
	peak peak
}

func (s *sampledEmbedder) Embed(ctx context.Context, texts []string, k embed.Kind) ([][]float32, error) {
	s.peak.see(ctx, s.in, pipeline.StageEmbed)
	time.Sleep(5 * time.Millisecond)
	return s.Words.Embed(ctx, texts, k)
}

// TestPipelineQueueWindow: a snapshot holds at most Window of its batches
// in the parse and the embed queue at once, and still indexes every file
// and embeds every chunk. Without a window all of its batches are queued
// at once (so the samplers do see a long queue). When the queue takes
// longer than ParseTimeout, a window also keeps the wait from sending
// again every batch still queued (24 batches and 17 re-sends without one).
func TestPipelineQueueWindow(t *testing.T) {
	const files = 24 // one file a parse batch
	body := map[string]string{}
	for i := range files {
		var src string
		for j := range 6 { // about 150 chunks: three embed batches
			src += fmt.Sprintf("// F%d_%d returns the %dth value of part %d.\nfunc F%d_%d() int { return %d }\n\n", i, j, j, i, i, j, i*j)
		}
		body[fmt.Sprintf("p%02d.go", i)] = "package p\n\n" + src
	}
	for _, tc := range []struct {
		name              string
		window            int
		maxParse, minPeak int64 // bound on the parse queue's batches seen (0: none); least peak of its messages
		maxEmbed          int64
		hold, timeout     time.Duration // the parser's time a file; ParseTimeout
	}{
		// The samples are taken in the one worker's handler, so every
		// other message handled is finished: the bound is the window.
		{"window 1", 1, 1, 1, 1, 5 * time.Millisecond, 0},
		{"window 3", 3, 3, 2, 3, 5 * time.Millisecond, 0},
		{"every batch at once", -1, files, 4, 64, 5 * time.Millisecond, 0},
		// The queue takes longer than ParseTimeout: with a window no
		// batch waits that long, so none is sent twice; on a loaded
		// machine a batch of the window may wait past it and be sent
		// again (more than once: seen 9 messages with a window of 3, at
		// load 4 under the race detector), its first copy handled and
		// the batch done while a later copy is still queued beside the
		// next batches of the window, so the bound is the window twice.
		// Without a window the batches still queued are all sent again,
		// each once a ParseTimeout it still waits, so their number has no
		// bound but the machine's speed.
		{"window 3, slow queue", 3, 6, 2, 6, 40 * time.Millisecond, 250 * time.Millisecond},
		{"every batch at once, slow queue", -1, 0, files + 6, 64, 40 * time.Millisecond, 250 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			ts := newTestServer(temporaltest.WithT(t))
			c := ts.GetDefaultClient()
			q, _ := startQueue(ctx, t)
			store := tempStore(t)
			in := newInQueue(q)
			emb := &sampledEmbedder{in: in}
			acts := &workflows.Activities{Store: store, Queue: q, CacheDir: t.TempDir(), PollInterval: 20 * time.Millisecond,
				BatchSize: 1, Window: tc.window, ParseTimeout: tc.timeout, Embedder: emb, Vectors: vlocal.New(store, vlocal.Float32)}
			ts.NewWorker(workflows.TaskQueue, func(r worker.Registry) { workflows.Register(r, acts) })
			var parsePeak peak
			var mu sync.Mutex
			parsed := map[string]bool{}
			cfg := queue.Config{AckWait: 10 * time.Second, Workers: 1}
			w := &pipeline.Workers{Store: store, Queue: q, Embedder: emb, Wrap: in.wrap(cfg), ParseHook: func(p string) {
				parsePeak.see(ctx, in, pipeline.StageParse)
				time.Sleep(tc.hold) // the fan-out outpaces the worker
				mu.Lock()
				parsed[p] = true
				mu.Unlock()
			}}
			wctx, wcancel := context.WithCancel(ctx)
			defer runWorkers(wctx, t, wcancel, cfg, w.RunParse, w.RunEmbed, w.RunGraph)()

			fx := newFixture(t, "win")
			commit := fx.commit(t, body)
			res := pushAndWait(ctx, t, c, "win", commit, 1)
			if res.Parsed != files || len(parsed) != files || res.Failed != 0 {
				t.Fatalf("snapshot = %+v, %d files parsed, want all %d", res, len(parsed), files)
			}
			if res.Embedded < 130 || res.EmbedFailed != 0 || res.PointsAdded != res.Points {
				t.Fatalf("snapshot = %+v, want every chunk (about 150) embedded and stored", res)
			}
			if p := parsePeak.b.Load(); tc.maxParse > 0 && p > tc.maxParse {
				t.Errorf("parse queue peaked at %d batches, want at most %d", p, tc.maxParse)
			}
			if p := parsePeak.n.Load(); p < tc.minPeak {
				t.Errorf("parse queue peaked at %d messages, want at least %d", p, tc.minPeak)
			}
			if b, n := emb.peak.b.Load(), emb.peak.n.Load(); b > tc.maxEmbed || n < 1 {
				t.Errorf("embed queue peaked at %d batches (%d messages), want 1-%d", b, n, tc.maxEmbed)
			}
			t.Logf("peaks: parse %d batches (%d messages), embed %d (%d); embedded %d chunks", parsePeak.b.Load(), parsePeak.n.Load(), emb.peak.b.Load(), emb.peak.n.Load(), res.Embedded)
		})
	}
}

// TestPipelineTenantShare: with a share limit on the queue, one tenant's
// snapshots together hold at most that many batches in the parse queue
// and in the embed queue, whatever their windows, and still index every
// file and embed every chunk; a snapshot whose tenant's share is full
// waits and publishes its batches later, also its re-sends after
// ParseTimeout when the queue is slow.
func TestPipelineTenantShare(t *testing.T) {
	const files = 12 // one file a parse batch, per repository
	body := func(repo string) map[string]string {
		b := map[string]string{}
		for i := range files {
			var src string
			for j := range 6 { // chunks of their own: embedded apart
				src += fmt.Sprintf("// G%d_%d returns the %dth value of part %d of %s.\nfunc G%d_%d() int { return %d }\n\n", i, j, j, i, repo, i, j, i*j)
			}
			b[fmt.Sprintf("g%02d.go", i)] = "package g\n\n" + src
		}
		return b
	}
	for _, tc := range []struct {
		name          string
		hold, timeout time.Duration
	}{
		{"fast queue", 5 * time.Millisecond, 0},
		{"slow queue", 40 * time.Millisecond, 60 * time.Millisecond}, // re-sends, refused while the share is full
	} {
		t.Run(tc.name, func(t *testing.T) {
			const share = 3
			t.Chdir(t.TempDir())
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			ts := newTestServer(temporaltest.WithT(t))
			c := ts.GetDefaultClient()
			q, _ := startQueue(ctx, t)
			q.SetShareLimit(pipeline.StageParse, share)
			q.SetShareLimit(pipeline.StageEmbed, share)
			store := tempStore(t)
			in := newInQueue(q)
			emb := &sampledEmbedder{in: in}
			acts := &workflows.Activities{Store: store, Queue: q, CacheDir: t.TempDir(), PollInterval: 20 * time.Millisecond,
				BatchSize: 1, Window: -1, ParseTimeout: tc.timeout, Embedder: emb, Vectors: vlocal.New(store, vlocal.Float32)}
			ts.NewWorker(workflows.TaskQueue, func(r worker.Registry) { workflows.Register(r, acts) })
			var parsePeak peak
			var mu sync.Mutex
			parsed := map[string]int{}
			cfg := queue.Config{AckWait: 10 * time.Second, Workers: 1}
			w := &pipeline.Workers{Store: store, Queue: q, Embedder: emb, Wrap: in.wrap(cfg), ParseHook: func(p string) {
				parsePeak.see(ctx, in, pipeline.StageParse)
				time.Sleep(tc.hold)
				mu.Lock()
				parsed[p]++
				mu.Unlock()
			}}
			wctx, wcancel := context.WithCancel(ctx)
			defer runWorkers(wctx, t, wcancel, cfg, w.RunParse, w.RunEmbed, w.RunGraph)()

			// Two repositories of one tenant, pushed at once.
			commits := map[string]string{}
			for _, repo := range []string{"share1", "share2"} {
				commits[repo] = newFixture(t, repo).commit(t, body(repo))
			}
			for repo, commit := range commits {
				if _, err := workflows.SignalPush(ctx, c, workflows.Push{Repo: repo, Location: repo, Commit: commit}); err != nil {
					t.Fatal(err)
				}
			}
			for repo, commit := range commits {
				st := waitCovered(ctx, t, c, repo, 1)
				res := st.Last
				if res == nil || res.Commit != commit || res.Parsed != files || res.Failed != 0 {
					t.Fatalf("%s: snapshot %+v, want all %d files of %s", repo, res, files, commit)
				}
				if res.Embedded < 70 || res.EmbedFailed != 0 || res.PointsAdded != res.Points {
					t.Fatalf("%s: snapshot %+v, want every chunk embedded and stored", repo, res)
				}
			}
			if len(parsed) != files { // the two repositories' files share their paths
				t.Errorf("%d paths parsed, want %d", len(parsed), files)
			}
			// The stream stores at most the share of the tenant's
			// messages, and those counted are stored: the bound is the
			// share.
			if p := parsePeak.n.Load(); p > share || p < 2 {
				t.Errorf("parse queue peaked at %d batches, want 2-%d (the tenant's share)", p, share)
			}
			if p := emb.peak.n.Load(); p > share || p < 1 {
				t.Errorf("embed queue peaked at %d batches, want 1-%d", p, share)
			}
			t.Logf("peaks: parse %d, embed %d", parsePeak.n.Load(), emb.peak.n.Load())
		})
	}
}

// TestPipelineTenantShareWakes: a snapshot refused because its tenant's
// share is full is woken as any of the tenant's batches finishes, so a
// one-file push of the tenant is not left to its next poll while a big
// snapshot of the same tenant takes every slot that frees (woken by its
// own batches). Polls are 2 s here: the big snapshot's batches of the
// stage take about 1 s; the small one's work of the stage comes before
// the big one's last batch. The order of the batches is checked, not the
// times the snapshots end: on a loaded machine the big snapshot can take
// longer than a poll, and its end and the small one's come close.
func TestPipelineTenantShareWakes(t *testing.T) {
	for _, stage := range []string{pipeline.StageParse, pipeline.StageEmbed} {
		t.Run(stage, func(t *testing.T) {
			// On a loaded machine one run can miss the order by chance:
			// up to 3 runs, the first in order passes. Without the wake
			// every run misses it (the small one's batch last of all).
			for try := 1; ; try++ {
				firstSmall, lastBig, n := shareWakeRun(t, stage)
				if firstSmall >= 0 && firstSmall <= lastBig {
					return
				}
				if try == 3 {
					t.Errorf("the one-file push's %s batch came after every batch of the big snapshot in %d runs (batch %d of %d): it waited for a poll while the big one took every slot", stage, try, firstSmall+1, n)
					return
				}
			}
		})
	}
}

// shareWakeRun is one run of TestPipelineTenantShareWakes: the position
// of the small push's first batch of the stage, of the big snapshot's
// last, and their number.
func shareWakeRun(t *testing.T, stage string) (firstSmall, lastBig, n int) {
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ts := newTestServer(temporaltest.WithT(t))
	c := ts.GetDefaultClient()
	q, _ := startQueue(ctx, t)
	q.SetShareLimit(stage, 2)
	store := tempStore(t)
	started := make(chan struct{})
	var once sync.Once
	emb := &heldEmbedder{hold: time.Millisecond, started: func() {}}
	acts := &workflows.Activities{Store: store, Queue: q, CacheDir: t.TempDir(), PollInterval: 2 * time.Second, BatchSize: 1, Window: -1,
		Embedder: emb, Vectors: vlocal.New(store, vlocal.Float32)}
	ts.NewWorker(workflows.TaskQueue, func(r worker.Registry) { workflows.Register(r, acts) })
	w := &pipeline.Workers{Store: store, Queue: q, Embedder: emb}
	big := map[string]string{}
	funcs := 1
	var mu sync.Mutex
	var order []bool // of the stage's batches: true for the small snapshot's
	note := func(small bool) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, small)
	}
	// The big snapshot's batches are held until the small one
	// has reached the stage (and found the share full): on a
	// loaded machine the small one's way there could otherwise
	// outlast the big one's batches.
	gate := make(chan struct{})
	var gateOnce sync.Once
	openGate := func() { gateOnce.Do(func() { close(gate) }) }
	hold := func() {
		select {
		case <-gate:
		case <-time.After(30 * time.Second):
		}
	}
	switch stage {
	case pipeline.StageParse:
		w.ParseHook = func(p string) {
			small := strings.HasPrefix(p, "small")
			if !small {
				once.Do(func() { close(started) })
				hold()
			}
			note(small)
			time.Sleep(25 * time.Millisecond)
		}
	case pipeline.StageEmbed:
		funcs = 20 // 800 chunks: 13 embed batches
		emb.hold, emb.started = 60*time.Millisecond, func() { once.Do(func() { close(started) }) }
		emb.seen = func(texts []string) {
			small := slices.ContainsFunc(texts, func(s string) bool { return strings.Contains(s, "S is small") })
			if !small {
				hold()
			}
			note(small)
		}
	}
	for i := range 40 {
		src := "package big\n\n"
		for j := range funcs {
			src += fmt.Sprintf("// B%d_%d is part %d of %d.\nfunc B%d_%d() int { return %d }\n\n", i, j, j, i, i, j, i*j)
		}
		big[fmt.Sprintf("big%02d.go", i)] = src
	}
	wctx, wcancel := context.WithCancel(ctx)
	cfg := queue.Config{AckWait: 10 * time.Second, Workers: 1}
	defer runWorkers(wctx, t, wcancel, cfg, w.RunParse, w.RunEmbed, w.RunGraph)()

	bigCommit := newFixture(t, "bigrepo").commit(t, big)
	smallCommit := newFixture(t, "smallrepo").commit(t, map[string]string{"small.go": "package small\n\n// S is small.\nfunc S() {}\n"})
	start := time.Now()
	if _, err := workflows.SignalPush(ctx, c, workflows.Push{Repo: "bigrepo", Location: "bigrepo", Commit: bigCommit}); err != nil {
		t.Fatal(err)
	}
	<-started
	time.Sleep(100 * time.Millisecond)
	if _, err := workflows.SignalPush(ctx, c, workflows.Push{Repo: "smallrepo", Location: "smallrepo", Commit: smallCommit}); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer openGate()
		for ctx.Err() == nil {
			st, err := workflows.Status(ctx, c, index.DefaultTenant, "smallrepo")
			if err == nil && st.Covered >= 1 {
				return
			}
			if err == nil && st.Child != "" {
				if p, err := workflows.Progress(ctx, c, st.Child); err == nil && p.Stage == stage {
					time.Sleep(300 * time.Millisecond) // its fan-out, refused
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var smallAt, bigAt time.Duration
	for smallAt == 0 || bigAt == 0 {
		for _, r := range []struct {
			repo string
			at   *time.Duration
		}{{"smallrepo", &smallAt}, {"bigrepo", &bigAt}} {
			if st, err := workflows.Status(ctx, c, index.DefaultTenant, r.repo); err == nil && st.Covered >= 1 && *r.at == 0 {
				if st.LastError != "" {
					t.Fatalf("%s: %s", r.repo, st.LastError)
				}
				*r.at = time.Since(start)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("the snapshots never finished")
		case <-time.After(20 * time.Millisecond):
		}
	}
	mu.Lock()
	firstSmall, lastBig = slices.Index(order, true), slices.Index(order, false)
	for i, small := range order {
		if !small {
			lastBig = i
		}
	}
	n = len(order)
	mu.Unlock()
	t.Logf("small repository done after %v, big after %v; of %d %s batches the small one's first was number %d, the big one's last %d",
		smallAt.Round(time.Millisecond), bigAt.Round(time.Millisecond), n, stage, firstSmall+1, lastBig+1)
	return firstSmall, lastBig, n
}

// heldEmbedder embeds with Words, holding each call; started runs at the
// first call.
type heldEmbedder struct {
	densetest.Words
	hold    time.Duration
	started func()
	seen    func(texts []string) // when set, called with every batch
}

func (s *heldEmbedder) Embed(ctx context.Context, texts []string, k embed.Kind) ([][]float32, error) {
	s.started()
	if s.seen != nil {
		s.seen(texts)
	}
	time.Sleep(s.hold)
	return s.Words.Embed(ctx, texts, k)
}
