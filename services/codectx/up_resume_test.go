package main

import (
	"context"
	"path/filepath"
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
	select {
	case p := <-blocked:
		t.Logf("indexing held while parsing %s", p)
	case <-time.After(3 * time.Minute):
		t.Fatalf("parsing never started\nstdout:\n%s\nstderr:\n%s", up.out.String(), up.errs.String())
	}
	// Stop in the middle: a parse is in flight, nothing is published.
	stopped := make(chan struct{})
	go func() { up.stop(t); close(stopped) }()
	time.Sleep(200 * time.Millisecond)
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

	// Restart without --index: the unfinished snapshot resumes and publishes.
	upParseHook = nil
	up = startUp(t, "--data", data, "--listen", addr)
	up.waitFor(t, "published HEAD", 3*time.Minute, func() bool {
		h, err := index.ReadHead(context.Background(), store, index.DefaultTenant, "shop")
		return err == nil && h.Commit == commit
	})
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
