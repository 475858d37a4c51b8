package main

import (
	"strings"
	"testing"

	"codectx/pkg/api"
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
