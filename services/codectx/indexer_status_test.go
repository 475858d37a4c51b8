package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/workflows"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
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

// silentClient is a Temporal client whose workflow queries no worker
// answers (the orchestrator was killed, or Temporal is unreachable): the
// query ends with the deadline the client gives it, or the caller's.
type silentClient struct {
	client.Client
	err error // nil: wait for the caller's deadline
}

func (c silentClient) QueryWorkflowWithOptions(ctx context.Context, _ *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	if c.err != nil {
		return nil, c.err
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// A status nobody answers says who did not answer, not a bare "context
// deadline exceeded" an operator cannot act on.
func TestStatusNamesTheSilentOrchestrator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	for _, c := range []silentClient{{err: serviceerror.NewDeadlineExceeded("context deadline exceeded")}, {}} {
		_, err := temporalIndexer{c}.Status(ctx, "default", "shop")
		if err == nil || !strings.Contains(err.Error(), "orchestrator") || !strings.Contains(err.Error(), workflows.TaskQueue) {
			t.Errorf("status with no orchestrator answering: %v, want an error naming the orchestrator and its task queue", err)
		}
	}
}

func (c silentClient) SignalWithStartWorkflow(ctx context.Context, _, _ string, _ any, _ client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	return nil, c.err
}

// A push Temporal does not take says who did not take it: a webhook
// while Temporal was down answered "context canceled".
func TestIndexNamesTemporal(t *testing.T) {
	for _, err := range []error{context.Canceled, serviceerror.NewUnavailable("connection refused"), serviceerror.NewDeadlineExceeded("deadline")} {
		_, got := temporalIndexer{silentClient{err: err}}.Index(context.Background(), api.IndexRequest{Tenant: "acme", Repo: "shop", Location: "https://example.com/acme/shop.git"})
		if got == nil || !strings.Contains(got.Error(), "Temporal server did not take the push") {
			t.Errorf("push refused with %v: %v, want an error naming Temporal", err, got)
		}
	}
	// A caller that went away is no fault of Temporal's.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, got := (temporalIndexer{silentClient{err: context.Canceled}}).Index(ctx, api.IndexRequest{Tenant: "acme", Repo: "shop", Location: "https://example.com/acme/shop.git"}); got == nil || strings.Contains(got.Error(), "Temporal server") {
		t.Errorf("push of a caller gone: %v", got)
	}
}
