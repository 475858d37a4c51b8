package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob/local"
	"codectx/pkg/index"
)

// Restarting `up` in the middle of indexing resumes the snapshot and
// finishes it: the workflow state is in Temporal's SQLite file and the
// unacknowledged parse batch is redelivered by NATS.
func TestUpResumesAfterRestartMidIndexing(t *testing.T) {
	repoDir, commit := gitFixture(t)
	data := t.TempDir()
	addr := freeAddr(t)

	blocked, release := make(chan string, 1), make(chan struct{})
	var once sync.Once
	upParseHook = func(path string) {
		once.Do(func() {
			blocked <- path
			<-release
		})
	}
	t.Cleanup(func() { upParseHook = nil })

	up := startUp(t, "--data", data, "--listen", addr, "--index", repoDir)
	var held string
	select {
	case held = <-blocked:
		t.Logf("indexing held while parsing %s", held)
	case <-time.After(3 * time.Minute):
		t.Fatalf("parsing never started\nstdout:\n%s\nstderr:\n%s", up.out.String(), up.errs.String())
	}
	// Stop in the middle: a parse is in flight, nothing is published. The
	// held parse is released once up has begun to shut down, so that its
	// message is nak'ed rather than finished.
	stopped := make(chan struct{})
	go func() { up.stop(t); close(stopped) }()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(up.errs.String(), "shutting down") {
		if time.Now().After(deadline) {
			t.Fatalf("up never began to shut down\nstderr:\n%s", up.errs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	select {
	case <-stopped:
	case <-time.After(90 * time.Second):
		t.Fatal("up did not stop")
	}
	store, err := local.Open(filepath.Join(data, "store"))
	if err != nil {
		t.Fatal(err)
	}
	if h, err := index.ReadHead(context.Background(), store, index.DefaultTenant, "shop"); err == nil {
		t.Fatalf("HEAD published (%s) before the restart: the test did not stop indexing midway", h.Commit)
	}

	// Restart without --index: the unfinished snapshot resumes and
	// publishes, and the held file's batch is redelivered and parsed again.
	var mu sync.Mutex
	var parsed []string
	upParseHook = func(path string) {
		mu.Lock()
		parsed = append(parsed, path)
		mu.Unlock()
	}
	up = startUp(t, "--data", data, "--listen", addr)
	up.waitFor(t, "published HEAD", 3*time.Minute, func() bool {
		h, err := index.ReadHead(context.Background(), store, index.DefaultTenant, "shop")
		return err == nil && h.Commit == commit
	})
	mu.Lock()
	redelivered := slices.Contains(parsed, held)
	mu.Unlock()
	if !redelivered {
		t.Errorf("after the restart %v were parsed, not the held %s: its batch was not redelivered", parsed, held)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := (&api.Client{BaseURL: "http://" + addr}).Query(ctx, api.QueryRequest{Repo: "shop", Query: "Cart Total", Budget: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Commit != commit || len(resp.Chunks) == 0 || !strings.HasSuffix(resp.Chunks[0].Path, "cart.go") {
		t.Errorf("after resume: commit %s, chunks %+v", resp.Commit, resp.Chunks)
	}
}
