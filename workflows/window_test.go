package workflows_test

import (
	"context"
	"fmt"
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

	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"
)

// peak is the highest queue length seen by a sampler.
type peak struct{ n atomic.Int64 }

func (p *peak) see(ctx context.Context, q *natsq.Queue, stage string) {
	n, err := q.Pending(ctx, stage)
	if err != nil {
		return
	}
	for {
		old := p.n.Load()
		if int64(n) <= old || p.n.CompareAndSwap(old, int64(n)) {
			return
		}
	}
}

// sampledEmbedder embeds with Words and samples the embed queue first.
type sampledEmbedder struct {
	densetest.Words
	q    *natsq.Queue
	peak peak
}

func (s *sampledEmbedder) Embed(ctx context.Context, texts []string, k embed.Kind) ([][]float32, error) {
	s.peak.see(ctx, s.q, pipeline.StageEmbed)
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
		maxParse, minPeak int64 // bound on the parse queue seen; least peak seen
		maxEmbed          int64
		hold, timeout     time.Duration // the parser's time a file; ParseTimeout
	}{
		// A batch's results are stored before its message is acknowledged,
		// so the wait may publish the next one while the queue still
		// counts the one finishing: the bound is the window and one.
		{"window 1", 1, 2, 1, 2, 5 * time.Millisecond, 0},
		{"window 3", 3, 4, 2, 4, 5 * time.Millisecond, 0},
		{"every batch at once", -1, files, 4, 64, 5 * time.Millisecond, 0},
		// The queue takes longer than ParseTimeout: with a window no
		// batch waits that long, so none is sent twice; without one the
		// batches still queued are all sent again.
		{"window 3, slow queue", 3, 4, 2, 4, 40 * time.Millisecond, 250 * time.Millisecond},
		{"every batch at once, slow queue", -1, 2 * files, files + 6, 64, 40 * time.Millisecond, 250 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			ts := newTestServer(temporaltest.WithT(t))
			c := ts.GetDefaultClient()
			q, _ := startQueue(ctx, t)
			store := tempStore(t)
			emb := &sampledEmbedder{q: q}
			acts := &workflows.Activities{Store: store, Queue: q, CacheDir: t.TempDir(), PollInterval: 20 * time.Millisecond,
				BatchSize: 1, Window: tc.window, ParseTimeout: tc.timeout, Embedder: emb, Vectors: vlocal.New(store, vlocal.Float32)}
			ts.NewWorker(workflows.TaskQueue, func(r worker.Registry) { workflows.Register(r, acts) })
			var parsePeak peak
			var mu sync.Mutex
			parsed := map[string]bool{}
			w := &pipeline.Workers{Store: store, Queue: q, Embedder: emb, ParseHook: func(p string) {
				parsePeak.see(ctx, q, pipeline.StageParse)
				time.Sleep(tc.hold) // the fan-out outpaces the worker
				mu.Lock()
				parsed[p] = true
				mu.Unlock()
			}}
			wctx, wcancel := context.WithCancel(ctx)
			cfg := queue.Config{AckWait: 10 * time.Second, Workers: 1}
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
			if p := parsePeak.n.Load(); p > tc.maxParse || p < tc.minPeak {
				t.Errorf("parse queue peaked at %d batches, want %d-%d", p, tc.minPeak, tc.maxParse)
			}
			if p := emb.peak.n.Load(); p > tc.maxEmbed || p < 1 {
				t.Errorf("embed queue peaked at %d batches, want 1-%d", p, tc.maxEmbed)
			}
			t.Logf("peaks: parse %d, embed %d; embedded %d chunks", parsePeak.n.Load(), emb.peak.n.Load(), res.Embedded)
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
			emb := &sampledEmbedder{q: q}
			acts := &workflows.Activities{Store: store, Queue: q, CacheDir: t.TempDir(), PollInterval: 20 * time.Millisecond,
				BatchSize: 1, Window: -1, ParseTimeout: tc.timeout, Embedder: emb, Vectors: vlocal.New(store, vlocal.Float32)}
			ts.NewWorker(workflows.TaskQueue, func(r worker.Registry) { workflows.Register(r, acts) })
			var parsePeak peak
			var mu sync.Mutex
			parsed := map[string]int{}
			w := &pipeline.Workers{Store: store, Queue: q, Embedder: emb, ParseHook: func(p string) {
				parsePeak.see(ctx, q, pipeline.StageParse)
				time.Sleep(tc.hold)
				mu.Lock()
				parsed[p]++
				mu.Unlock()
			}}
			wctx, wcancel := context.WithCancel(ctx)
			cfg := queue.Config{AckWait: 10 * time.Second, Workers: 1}
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
			// A batch's results are stored before its message is
			// acknowledged: the bound is the share and one.
			if p := parsePeak.n.Load(); p > share+1 || p < 2 {
				t.Errorf("parse queue peaked at %d batches, want 2-%d (the tenant's share)", p, share+1)
			}
			if p := emb.peak.n.Load(); p > share+1 || p < 1 {
				t.Errorf("embed queue peaked at %d batches, want 1-%d", p, share+1)
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
// stage take about 1 s; the small one is done before it.
func TestPipelineTenantShareWakes(t *testing.T) {
	for _, stage := range []string{pipeline.StageParse, pipeline.StageEmbed} {
		t.Run(stage, func(t *testing.T) {
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
			switch stage {
			case pipeline.StageParse:
				w.ParseHook = func(p string) {
					if strings.HasPrefix(p, "big") {
						once.Do(func() { close(started) })
					}
					time.Sleep(25 * time.Millisecond)
				}
			case pipeline.StageEmbed:
				funcs = 20 // 800 chunks: 13 embed batches
				emb.hold, emb.started = 60*time.Millisecond, func() { once.Do(func() { close(started) }) }
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
			t.Logf("small repository done after %v, big after %v", smallAt.Round(time.Millisecond), bigAt.Round(time.Millisecond))
			if smallAt >= bigAt {
				t.Errorf("the one-file push of the tenant was done after %v, not before its big snapshot (%v): it waited for a poll while the big one took every slot", smallAt, bigAt)
			}
		})
	}
}

// heldEmbedder embeds with Words, holding each call; started runs at the
// first call.
type heldEmbedder struct {
	densetest.Words
	hold    time.Duration
	started func()
}

func (s *heldEmbedder) Embed(ctx context.Context, texts []string, k embed.Kind) ([][]float32, error) {
	s.started()
	time.Sleep(s.hold)
	return s.Words.Embed(ctx, texts, k)
}
