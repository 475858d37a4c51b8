package main

import (
	"testing"

	"codectx/workflows"
)

// TestConvertStatusLastFinding: what the last snapshot found (a push not
// published, HEAD already complete) is not told once a later snapshot
// failed: repos status said "not published" beside the later failure.
func TestConvertStatusLastFinding(t *testing.T) {
	for _, tc := range []struct {
		name         string
		last         workflows.SnapshotResult
		lastErr      string
		notPublished string
		already      bool
	}{
		{"not published", workflows.SnapshotResult{Skipped: true, Behind: "c1"}, "", "c1", false},
		{"already indexed", workflows.SnapshotResult{Skipped: true}, "", "", true},
		{"not published, then a failure", workflows.SnapshotResult{Skipped: true, Behind: "c1"}, "fetch failed", "", false},
		{"already indexed, then a failure", workflows.SnapshotResult{Skipped: true}, "fetch failed", "", false},
	} {
		last := tc.last
		out := convertStatus(workflows.RepoStatus{Last: &last, LastError: tc.lastErr})
		if out.NotPublished != tc.notPublished || out.Already != tc.already || out.LastError != tc.lastErr {
			t.Errorf("%s: not published %q, already %v, error %q; want %q, %v", tc.name, out.NotPublished, out.Already, out.LastError, tc.notPublished, tc.already)
		}
	}
}
