package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"codectx/pkg/api"
)

// While a snapshot's parse is held, GET .../status reports the running
// snapshot's stage and counts (issue 14 item 6), and `up --index` (the same
// code as `index --server`) prints the progress lines as they change.
func TestUpStatusReportsProgress(t *testing.T) {
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
	var released sync.Once
	t.Cleanup(func() { released.Do(func() { close(release) }) })

	up := startUp(t, "--data", data, "--listen", addr, "--index", repoDir)
	select {
	case <-blocked:
	case <-time.After(3 * time.Minute):
		t.Fatalf("parsing never started\nstdout:\n%s\nstderr:\n%s", up.out.String(), up.errs.String())
	}

	cl := &api.Client{BaseURL: "http://" + addr}
	var held *api.Progress
	up.waitFor(t, "progress of the parse stage in status", time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := cl.Status(ctx, "", "shop")
		if err != nil || st.Progress == nil {
			return false
		}
		if st.State != api.StateIndexing {
			t.Fatalf("state %q while a parse is held", st.State)
		}
		held = st.Progress
		return held.Stage == api.StageParse && held.Planned > 0
	})
	if held.Commit != commit || held.Files < held.Planned+held.Reused || held.Parsed >= held.Planned || held.Failed != 0 {
		t.Errorf("progress while one file's parse is held: %+v (commit %s)", held, commit)
	}
	// The waiting client prints the held progress before the parse ends.
	want := formatProgress(&api.Progress{Stage: api.StageParse, Files: held.Files, Planned: held.Planned, Parsed: held.Parsed, Reused: held.Reused})
	up.waitFor(t, "up --index to print "+want, time.Minute, func() bool { return strings.Contains(up.out.String(), want+"\n") })
	released.Do(func() { close(release) })
	up.waitFor(t, "the index to finish", 3*time.Minute, func() bool { return strings.Contains(up.out.String(), "indexed shop@") })
	t.Logf("held: %+v\nup --index printed:\n%s", held, up.out.String())
	// Progress is for a running snapshot only.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := cl.WaitIndexed(ctx, "", "shop", "")
	if err != nil {
		t.Fatal(err)
	}
	if st.Progress != nil || st.Files != held.Files || st.Parsed != held.Planned {
		t.Errorf("after the snapshot: progress %+v, files %d, parsed %d; want no progress, %d files, %d parsed", st.Progress, st.Files, st.Parsed, held.Files, held.Planned)
	}
}

// TestUpIndexMissingPath: up --index of a path that is not there says so
// in its own words, not as an HTTP status of a "server" (the request goes
// to up's own API).
func TestUpIndexMissingPath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "not-there")
	up := startUp(t, "--data", t.TempDir(), "--listen", freeAddr(t), "--index", missing)
	up.waitFor(t, "the failed index", time.Minute, func() bool { return strings.Contains(up.out.String(), "index "+missing+" failed: ") })
	if out := up.out.String(); strings.Contains(out, "HTTP 400") || strings.Contains(out, "server: location") || !strings.Contains(out, "is not a directory") {
		t.Errorf("up printed:\n%s\nwant the failure in its own words", out)
	}
}

// TestFormatIndexedCounts: the line `up --index` and `index --server`
// print at the end counts the files in the index, as `index` does, and
// says which files of the listing were left out and why.
func TestFormatIndexedCounts(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   api.RepoStatus
		want string
	}{
		{"old server", api.RepoStatus{Repo: "shop", LastCommit: "c0ffee", Files: 3, Parsed: 3},
			"indexed shop@c0ffee: 3 files (3 parsed, 0 reused)"},
		{"files left out", api.RepoStatus{Repo: "shop", LastCommit: "c0ffee", Files: 538, Parsed: 537, Indexed: 534,
			Skipped: map[string]int{"minified": 2, "generated": 1, "too_large": 1}},
			"indexed shop@c0ffee: 534 files of 538 listed (537 parsed, 0 reused)\n  skipped minified 2, generated 1, too_large 1"},
		{"none left out", api.RepoStatus{Repo: "shop", LastCommit: "c0ffee", Files: 3, Parsed: 1, Reused: 2, Indexed: 3},
			"indexed shop@c0ffee: 3 files (1 parsed, 2 reused)"},
		{"already", api.RepoStatus{Repo: "shop", LastCommit: "c0ffee", Files: 4, Indexed: 3, Already: true,
			Skipped: map[string]int{"binary": 1}, Degraded: map[string]int{"parse_timeout": 1}},
			"indexed shop@c0ffee: 3 files (already indexed)\n  skipped binary 1\n  degraded parse_timeout 1"},
		// The repository names a left-out file; its parser, the reason.
		{"hostile path", api.RepoStatus{Repo: "shop", LastCommit: "c0ffee", Files: 2, Parsed: 2, Failed: 1,
			LeftOut: []api.LeftOut{{Path: "a\x1b]0;pwned\x07\n  left out b.go.go", Reason: "parse: \x1b[2J"}}},
			"indexed shop@c0ffee: 2 files (2 parsed, 0 reused), 1 failed to parse\n  left out a\\x1b]0;pwned\\x07\\x0a  left out b.go.go: parse: \\x1b[2J"},
	} {
		if got := formatIndexed(&tc.st); got != tc.want {
			t.Errorf("%s: formatIndexed =\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}
