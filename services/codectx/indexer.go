package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"codectx/pkg/api"
	"codectx/workflows"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// temporalIndexer adapts the workflows package to the API's Indexer port.
type temporalIndexer struct{ c client.Client }

func (t temporalIndexer) Index(ctx context.Context, req api.IndexRequest) (string, error) {
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	run, err := workflows.SignalPush(sctx, t.c, workflows.Push{Tenant: req.Tenant, Repo: req.Repo, Location: req.Location, Commit: req.Commit, Forward: req.Forward, Branch: req.Branch})
	if err != nil && ctx.Err() == nil && (timedOut(err) || errors.Is(err, context.Canceled) || unavailable(err)) {
		// Not a bare "context canceled": say who did not take it.
		return "", fmt.Errorf("the Temporal server did not take the push in time (is it running and reachable?): %w", err)
	}
	return run, err
}

// unavailable reports whether err is Temporal's server refusing or
// unreachable.
func unavailable(err error) bool {
	var ue *serviceerror.Unavailable
	return errors.As(err, &ue)
}

func (t temporalIndexer) Status(ctx context.Context, tenant, repo string) (api.RepoStatus, error) {
	// A query waits for a worker: bound it, so a stopped orchestrator
	// makes a 503 rather than a hung request.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, open, err := workflows.StatusOpen(ctx, t.c, tenant, repo)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return api.RepoStatus{}, fmt.Errorf("%w: %v", api.ErrUnknownRepo, err)
	}
	if timedOut(err) {
		// Not a bare "context deadline exceeded": say who did not answer.
		return api.RepoStatus{}, fmt.Errorf("no orchestrator answered in time (is one running on task queue %s, and Temporal reachable?): %w", workflows.TaskQueue, err)
	}
	if err != nil {
		return api.RepoStatus{}, err
	}
	out := convertStatus(st)
	out.Closed = !open // a DELETE terminated it, most likely
	if st.State == workflows.StateIndexing && st.Child != "" {
		// Best effort: a child not started yet, or finishing, has no
		// progress to tell; the status stands without it.
		if p, err := workflows.Progress(ctx, t.c, st.Child); err == nil {
			out.Progress = &api.Progress{Stage: p.Stage, Commit: p.Commit, Files: p.Files, Planned: p.Planned, Parsed: p.Parsed, Failed: p.Failed, Reused: p.Reused, Lost: p.Lost, Quiet: p.Quiet}
		}
	}
	return out, nil
}

// timedOut reports whether err is a deadline that ran out: this call's, or
// one the Temporal client or server gave the query.
func timedOut(err error) bool {
	var de *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &de)
}

// CloseRepo terminates the repository's workflow (DELETE of the
// repository); its running snapshot, a child, is terminated with it.
func (t temporalIndexer) CloseRepo(ctx context.Context, tenant, repo string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	err := t.c.TerminateWorkflow(ctx, workflows.RepoWorkflowID(tenant, repo), "", "repository deleted")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil // none, or ended already
	}
	return err == nil, err
}

func convertStatus(st workflows.RepoStatus) api.RepoStatus {
	out := api.RepoStatus{
		Tenant: st.Tenant, Repo: st.Repo, State: st.State, Current: st.Current,
		Received: st.Received, Covered: st.Covered, LastCommit: st.LastCommit, LastError: st.LastError, LastDetail: st.LastDetail,
		Location: st.Location, Rev: st.Rev,
	}
	if st.Pending != nil {
		out.HasPending, out.Pending = true, st.Pending.Commit
	}
	if l := st.Last; l != nil {
		out.Files, out.Parsed, out.Reused, out.Failed, out.Embed = l.Files, l.Parsed, l.Reused, l.Failed, l.Embed
		// What the last snapshot found is said only while it is the
		// last: a failed snapshot after it keeps Last (the published
		// index's figures) but not its finding.
		if st.LastError == "" {
			out.Already = l.Skipped && l.Behind == ""
			out.NotPublished = l.Behind
		}
		for _, f := range l.LeftOut {
			out.LeftOut = append(out.LeftOut, api.LeftOut{Path: f.Path, Reason: f.Reason})
		}
		out.Embedded, out.EmbedReused, out.Restored = l.Embedded, l.EmbedReused, l.Restored
	}
	return out
}
