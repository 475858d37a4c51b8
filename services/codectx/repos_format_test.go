package main

import (
	"fmt"
	"strings"
	"testing"

	"codectx/pkg/api"
	"codectx/pkg/segment"
)

// TestFormatStatusRevision: repos status says what a reindex follows and
// which push was not published, escaped for a terminal.
func TestFormatStatusRevision(t *testing.T) {
	st := &api.RepoStatus{Tenant: "acme", Repo: "shop", State: api.StateIdle, Received: 3, Covered: 3,
		Rev: "refs/heads/main", NotPublished: "abc123\x1b[2J"}
	out := formatStatus(st)
	for _, want := range []string{"follows   refs/heads/main", "not published abc123"} {
		if !strings.Contains(out, want) {
			t.Errorf("status %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("status %q holds an escape sequence", out)
	}
	if out := formatStatus(&api.RepoStatus{Tenant: "acme", Repo: "shop", State: api.StateIdle}); strings.Contains(out, "follows") || strings.Contains(out, "not published") {
		t.Errorf("status without them: %q", out)
	}
}

// TestFormatStatusSkippedFiles: repos status names the files the index
// left out or cut into windows, with their reasons, the first
// statusFiles of each, escaped, and how many it did not name.
func TestFormatStatusSkippedFiles(t *testing.T) {
	st := &api.RepoStatus{Tenant: "acme", Repo: "shop", State: api.StateIdle, Indexed: 3,
		Skipped:       map[string]int{"binary": 30, "minified": 2},
		Degraded:      map[string]int{"invalid_utf8": 1},
		DegradedFiles: []segment.FileReason{{Path: "latin.go", Reason: "invalid_utf8"}}}
	for i := range 30 {
		st.SkippedFiles = append(st.SkippedFiles, segment.FileReason{Path: fmt.Sprintf("img/%02d.png", i), Reason: "binary"})
	}
	st.SkippedFiles[0].Path = "img/\x1b[2Jevil.png"
	out := formatStatus(st)
	for _, want := range []string{`img/\x1b[2Jevil.png (binary)`, "img/19.png (binary)", "and 12 more", "latin.go (invalid_utf8)"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "img/20.png") || strings.Contains(out, "\x1b") {
		t.Errorf("status names more than %d skipped files, or holds an escape:\n%s", statusFiles, out)
	}
	if strings.Count(out, "more") != 1 {
		t.Errorf("status counts unnamed degraded files where all are named:\n%s", out)
	}
}

// TestFormatProgressQuiet: a stage that has seen no result for a while
// asks whether its workers run; a short pause says nothing.
func TestFormatProgressQuiet(t *testing.T) {
	p := &api.Progress{Stage: api.StageParse, Files: 10, Planned: 10, Quiet: 130}
	if out := formatProgress(p); !strings.Contains(out, "no parse result for 2m10s: is a parse worker running?") {
		t.Errorf("progress quiet 130 s: %q", out)
	}
	p.Quiet = quietNote - 1
	if out := formatProgress(p); strings.Contains(out, "worker running") {
		t.Errorf("progress quiet %d s: %q", p.Quiet, out)
	}
}
