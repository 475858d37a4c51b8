package main

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/pipeline"
	"codectx/pkg/testrepo"
)

// Stopping `up` while snapshots wait on their stages does not wait out
// the Temporal worker's stop timeout: the waiting activities (WaitParse
// for shop, held in its parse stage, and Graph for lib, held in its
// graph stage) give up at once, and Temporal retries them after the
// restart, which completes both snapshots with every file.
func TestUpStopsPromptlyWhileWaiting(t *testing.T) {
	shopDir, shopCommit := gitFixture(t)
	lib := testrepo.New(t)
	libCommit := lib.Commit("initial", testrepo.Small)
	data := t.TempDir()
	addr := freeAddr(t)
	cl := &api.Client{BaseURL: "http://" + addr}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The held jobs are let go once up has begun to shut down: they are
	// handed back to the queue, unfinished.
	parseHeld, graphHeld := make(chan struct{}), make(chan struct{})
	release := make(chan struct{})
	var parseOnce, graphOnce, released sync.Once
	free := func() { released.Do(func() { close(release) }) }
	t.Cleanup(free)
	var holdParse atomic.Bool // armed once lib's files are parsed
	upParseHook = func(string) {
		if holdParse.Load() {
			parseOnce.Do(func() {
				close(parseHeld)
				<-release
			})
		}
	}
	upGraphHook = func(j pipeline.GraphJob) {
		if j.Repo == "lib" {
			graphOnce.Do(func() {
				close(graphHeld)
				<-release
			})
		}
	}
	t.Cleanup(func() { upParseHook, upGraphHook = nil, nil })

	up := startUp(t, "--data", data, "--listen", addr)
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	if _, err := cl.Index(ctx, api.IndexRequest{Repo: "lib", Location: lib.Dir}); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, up, graphHeld, "lib's graph job started")
	holdParse.Store(true)
	if _, err := cl.Index(ctx, api.IndexRequest{Repo: "shop", Location: shopDir}); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, up, parseHeld, "shop's parse started")
	up.waitFor(t, "shop in its parse stage, lib in its graph stage", time.Minute, func() bool {
		return indexingStage(ctx, cl, "shop") == api.StageParse && indexingStage(ctx, cl, "lib") == api.StageGraph
	})
	// The workflows wait inside their workflow task first (the local
	// FanOutParseWait and GraphWait, 2 s), then in the WaitParse and
	// Graph activities, which the stop has to end.
	time.Sleep(3 * time.Second)

	took := up.stopFreeing(t, free)
	t.Logf("stop took %v", took.Round(time.Millisecond))
	// The Temporal worker's stop timeout is 10 s: a stop that waited for
	// the activities to see it takes that long.
	if took > 5*time.Second {
		t.Errorf("stopping up with waiting activities took %v, want under 5s\nstderr:\n%s", took.Round(time.Millisecond), up.errs.String())
	}

	// The restart resumes both snapshots: each completes, every file in.
	restartAt := time.Now()
	up = startUp(t, "--data", data, "--listen", addr)
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	for repo, commit := range map[string]string{"shop": shopCommit, "lib": libCommit} {
		st, err := cl.WaitIndexed(ctx, "", repo, commit)
		if err != nil {
			t.Fatalf("wait for %s after the restart: %v\nstderr:\n%s", repo, err, up.errs.String())
		}
		if st.Head == nil || st.Head.Commit != commit || !st.Head.Complete || st.Failed != 0 || st.LastError != "" || st.Files != st.Parsed+st.Reused {
			t.Errorf("%s after the restart: %+v, want a complete HEAD at %s", repo, st, commit)
		}
		t.Logf("%s indexed %v after the restart: %d files", repo, time.Since(restartAt).Round(time.Millisecond), st.Files)
	}
}

// waitHeld waits up to a minute for a test hook to close held (what it
// holds has started).
func waitHeld[T any](t *testing.T, p *upProc, held <-chan T, what string) {
	t.Helper()
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatalf("not within a minute: %s\nstderr:\n%s", what, p.errs.String())
	}
}

// indexingStage is repo's stage while it is indexing, "" otherwise.
func indexingStage(ctx context.Context, cl *api.Client, repo string) string {
	st, err := cl.Status(ctx, "", repo)
	if err != nil || st.State != api.StateIndexing || st.Progress == nil {
		return ""
	}
	return st.Progress.Stage
}

// stopFreeing stops up, calls free once up has begun to shut down (what
// the test's hooks hold is let go only then), and returns how long the
// stop took.
func (p *upProc) stopFreeing(t *testing.T, free func()) time.Duration {
	t.Helper()
	start := time.Now()
	stopped := make(chan struct{})
	go func() { p.stop(t); close(stopped) }()
	p.waitFor(t, "up to begin to shut down", time.Minute, func() bool { return strings.Contains(p.errs.String(), "shutting down") })
	free()
	select {
	case <-stopped:
	case <-time.After(90 * time.Second):
		t.Fatal("up did not stop")
	}
	return time.Since(start)
}
