package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/dense"
	"codectx/pkg/index"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue"
	"codectx/pkg/vector"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// EmbedPlanResult is the result of PlanEmbed.
type EmbedPlanResult struct {
	Skipped bool   // no embedder configured
	Model   string // model and dimension of the vectors
	Dim     int
	Key     string // where the plan is stored
	Chunks  int    // distinct chunk texts of the snapshot
	Missing int    // of those, without a cached vector
	Batches int
}

// EmbedPlanInput is the input of PlanEmbed.
type EmbedPlanInput struct {
	Plan   SnapshotPlan
	Failed []string // files whose parse failed: not in the segment
}

// EmbedInput is the input of the embed activities.
type EmbedInput struct {
	Plan  SnapshotPlan
	Embed EmbedPlanResult
	Run   string
}

// EmbedOutcome is the result of WaitEmbed.
type EmbedOutcome struct {
	Embedded int // vectors cached by this snapshot's batches
	Failed   int // chunks whose batch was dead-lettered: no vector
	Resent   int // batches re-published after ParseTimeout
	Retried  int // batches re-published after an infrastructure failure
}

// VectorsResult is the result of StoreVectors.
type VectorsResult struct {
	Points  int // points the snapshot needs
	Added   int // points written now
	Missing int // chunks without a vector
}

// embedBatchSize is the number of chunks of one embed message.
const embedBatchSize = 64

// PlanEmbed reads the snapshot's parse results, lists its distinct chunk
// texts and plans the embedding of those whose vector is not cached for
// the configured model. Without an embedder it returns Skipped.
func (a *Activities) PlanEmbed(ctx context.Context, in EmbedPlanInput) (EmbedPlanResult, error) {
	if a.Embedder == nil {
		return EmbedPlanResult{Skipped: true}, nil
	}
	defer keepAlive(ctx)()
	p := in.Plan
	c := dense.Collection(a.Embedder)
	res := EmbedPlanResult{Model: c.Model, Dim: c.Dim, Key: pipeline.EmbedPlanKey(p.Tenant, p.Repo, p.Commit)}
	m, err := pipeline.ReadManifest(ctx, a.Store, p.ManifestKey)
	if err != nil {
		return res, err
	}
	m = pipeline.FilterFailed(m, in.Failed)
	parsed, err := index.LoadParsed(ctx, a.Store, m)
	if err != nil {
		return res, err
	}
	plan := pipeline.EmbedPlan{Tenant: p.Tenant, Repo: p.Repo, Commit: p.Commit, Model: c.Model, Dim: c.Dim}
	var items []pipeline.EmbedItem
	seen := map[string]bool{}
	for i, pr := range parsed {
		f := m.Files[i]
		for j, ch := range pr.Result.Chunks {
			h := dense.Hash(ch)
			if seen[h] {
				continue
			}
			seen[h] = true
			plan.Points = append(plan.Points, dense.Point{Hash: h, Path: f.Path})
			items = append(items, pipeline.EmbedItem{Parse: pipeline.ResultKey(p.Tenant, f), Chunk: j, Hash: h})
		}
	}
	hashes := make([]string, len(items))
	for i, it := range items {
		hashes[i] = it.Hash
	}
	miss, err := dense.Missing(ctx, a.Store, c, p.Tenant, hashes)
	if err != nil {
		return res, err
	}
	var todo []pipeline.EmbedItem
	for i, it := range items {
		if miss[i] {
			todo = append(todo, it)
		}
	}
	res.Chunks, res.Missing = len(items), len(todo)
	for len(todo) > 0 {
		k := min(embedBatchSize, len(todo))
		plan.Batches = append(plan.Batches, todo[:k:k])
		todo = todo[k:]
	}
	res.Batches = len(plan.Batches)
	data, err := json.Marshal(plan)
	if err != nil {
		return res, err
	}
	if err := a.Store.Put(ctx, res.Key, data); err != nil {
		return res, fmt.Errorf("write embed plan: %w", err)
	}
	if err := a.undoIfGone(ctx, p.Tenant, p.Repo, "embed plan", res.Key); err != nil {
		return EmbedPlanResult{}, err
	}
	return res, nil
}

func (a *Activities) readEmbedPlan(ctx context.Context, key string) (*pipeline.EmbedPlan, error) {
	data, err := a.Store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read embed plan: %w", err)
	}
	var p pipeline.EmbedPlan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("decode embed plan %s: %w", key, err)
	}
	return &p, nil
}

func embedBatchID(in EmbedInput, n int) string {
	return fmt.Sprintf("%s/%s/%s/%s/embed/%d", in.Plan.Tenant, in.Plan.Repo, in.Plan.Commit, in.Run, n)
}

func (a *Activities) publishEmbed(ctx context.Context, p *pipeline.EmbedPlan, n int, items []pipeline.EmbedItem, id string) error {
	data, err := json.Marshal(pipeline.EmbedBatch{Tenant: p.Tenant, Repo: p.Repo, Commit: p.Commit, Model: p.Model, Dim: p.Dim, Batch: n, Items: items})
	if err != nil {
		return err
	}
	return a.Queue.Publish(ctx, pipeline.StageEmbed, jobSubject(p.Tenant, p.Repo, p.Commit), data, id)
}

// FanOutEmbed publishes the embed plan's first batches (Window of them),
// with message IDs unique per run and batch so that a retried fan-out is
// deduplicated; WaitEmbed publishes the others as those finish.
func (a *Activities) FanOutEmbed(ctx context.Context, in EmbedInput) error {
	defer keepAlive(ctx)()
	p, err := a.readEmbedPlan(ctx, in.Embed.Key)
	if err != nil {
		return err
	}
	for n, items := range p.Batches[:a.window(len(p.Batches))] {
		if err := a.publishEmbed(ctx, p, n, items, embedBatchID(in, n)); shareFull(err) {
			return nil // the tenant's share is full: WaitEmbed publishes the rest
		} else if err != nil {
			return err
		}
	}
	return nil
}

// WaitEmbed waits, heartbeating, until every planned chunk has a cached
// vector or its batch is dead-lettered as bad. As for parse, at most
// Window batches are in the queue at once, the next ones checked and
// published as those finish. The embed workers'
// notifications wake it, the poll catches what they miss. A batch with missing
// vectors after ParseTimeout is re-published (a lost message). A batch
// dead-lettered for an infrastructure error (the embedder or the store
// failing every delivery) is re-published after each of the InfraRetry
// delays, like a parse batch; after the last the snapshot fails with
// ErrInfra and HEAD stays where it was. A batch dead-lettered as poison
// (a panic or a timeout of the embedder on its texts, or the embedder
// refusing one of them, embed.ErrRejected) fails its missing
// chunks, which are then left without a vector: texts are truncated, so
// this is rare, and it does not hold up the snapshot.
func (a *Activities) WaitEmbed(ctx context.Context, in EmbedInput) (EmbedOutcome, error) {
	var out EmbedOutcome
	var still quiet
	p, err := a.readEmbedPlan(ctx, in.Embed.Key)
	if err != nil {
		return out, err
	}
	c := vector.Collection{Model: p.Model, Dim: p.Dim}
	type batch struct {
		n       int
		missing map[string]bool
		sends
	}
	var open, queued []*batch // published; not yet
	queuedItems := 0
	for n, items := range p.Batches {
		b := &batch{n: n, missing: map[string]bool{}}
		for _, it := range items {
			b.missing[it.Hash] = true
		}
		queued = append(queued, b)
		queuedItems += len(b.missing)
	}
	// checkBatch drops the chunks of b whose vector is cached.
	checkBatch := func(b *batch) error {
		for h := range b.missing {
			ok, err := a.Store.Exists(ctx, dense.CacheKey(c, p.Tenant, h))
			if err != nil {
				return err
			}
			if ok {
				delete(b.missing, h)
				out.Embedded++
			}
		}
		return nil
	}
	missingItems := func(b *batch) []pipeline.EmbedItem {
		var items []pipeline.EmbedItem
		for _, it := range p.Batches[b.n] {
			if b.missing[it.Hash] {
				items = append(items, it)
			}
		}
		return items
	}
	publish := func(b *batch) func(id string) error {
		return func(id string) error { return a.publishEmbed(ctx, p, b.n, missingItems(b), id) }
	}
	subject := jobSubject(p.Tenant, p.Repo, p.Commit)
	// An embed worker's notification wakes the wait, as for parse and
	// graph jobs; the poll stays for a lost one.
	wake := a.watch(ctx, pipeline.StageEmbed, subject)
	defer wake.stop()
	tick := time.NewTicker(a.poll())
	defer tick.Stop()
	window := a.window(len(p.Batches))
	// Once a publish was refused for a full share: woken as any of the
	// tenant's embed batches finishes, the wait only tops up (fillOnly).
	var shareWake waker
	defer func() {
		if shareWake.stop != nil {
			shareWake.stop()
		}
	}()
	fillOnly := false
	for len(open) > 0 || len(queued) > 0 {
		var next []*batch
		if fillOnly {
			next = open
		} else {
			for _, b := range open {
				if err := checkBatch(b); err != nil {
					return out, err
				}
				if len(b.missing) > 0 {
					next = append(next, b)
				}
			}
		}
		fillOnly = false
		// Top the queue up to Window batches; the first Window were
		// published by FanOutEmbed under the same IDs (dropped as
		// duplicates).
		for len(next) < window && len(queued) > 0 {
			b := queued[0]
			queued = queued[1:]
			queuedItems -= len(b.missing)
			if err := checkBatch(b); err != nil {
				return out, err
			}
			if len(b.missing) == 0 {
				continue
			}
			b.sends = newSends(embedBatchID(in, b.n), time.Now())
			if err := a.publishEmbed(ctx, p, b.n, missingItems(b), b.base); shareFull(err) {
				// The tenant's share of the queue is full: the next
				// round tries again.
				queued = append([]*batch{b}, queued...)
				queuedItems += len(b.missing)
				if shareWake.stop == nil {
					shareWake = a.watchShare(ctx, pipeline.StageEmbed, subject)
				}
				break
			} else if err != nil {
				return out, err
			}
			next = append(next, b)
		}
		open = next
		if len(open) == 0 && len(queued) == 0 {
			break
		}
		var dead map[string]queue.DeadLetter
		if len(open) > 0 {
			if dead, err = a.deadIDs(ctx, pipeline.StageEmbed, subject); err != nil {
				return out, err
			}
		}
		next = next[:0]
		left := queuedItems
		for _, b := range open {
			st := b.settle(dead, a.infraRetry())
			if st.exhausted {
				return out, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("embed batch %d: %d chunks not embedded after %d retries: %s", b.n, len(b.missing), b.infra, b.cause), ErrInfra, nil)
			}
			if st.scheduled {
				activity.GetLogger(ctx).Warn("embed batch failed: infrastructure, will retry",
					"tenant", p.Tenant, "repo", p.Repo, "commit", p.Commit, "batch", b.n, "in", st.wait.String(), "cause", b.cause)
			}
			reason, poison := st.reason, st.poison
			switch {
			case !b.retryAt.IsZero():
				sent, err := b.retry(publish(b))
				if err != nil {
					return out, err
				}
				if sent {
					out.Retried++
				}
			case poison:
				// The worker caches what the embedder took before it
				// gives a batch up: only the rest failed.
				if err := checkBatch(b); err != nil {
					return out, err
				}
				activity.GetLogger(ctx).Warn("embed batch failed", "batch", b.n, "chunks", len(b.missing), "reason", firstLine(reason))
				out.Failed += len(b.missing)
				continue
			case time.Since(b.sent) > a.parseTimeout():
				sent, err := b.resendNow(publish(b))
				if err != nil {
					return out, err
				}
				if sent {
					out.Resent++
				}
			}
			next = append(next, b)
			left += len(b.missing)
		}
		open = next
		activity.RecordHeartbeat(ctx, map[string]int{"missing": left, "failed": out.Failed, "quiet": still.see(left, time.Now())})
		if len(open) == 0 && len(queued) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-stopping(ctx):
			return out, errStopping()
		case <-tick.C:
		case d := <-wake.c:
			wake.drain(d) // one round checks every batch
		case d := <-shareWake.c:
			shareWake.drain(d)
			fillOnly = true
		}
	}
	return out, nil
}

// VectorSetKey is where the chunk hashes a snapshot holds as points are
// listed, for GC to know which points a kept snapshot references.
func VectorSetKey(tenant, repo, commit string) string {
	return index.RepoPrefix("vectorsets/", tenant, repo) + commit + ".json"
}

// StoreVectors writes the snapshot's points (tenant, repository, chunk
// hash) to the vector store from the embedding cache, and records the
// snapshot's hashes for GC.
func (a *Activities) StoreVectors(ctx context.Context, in EmbedInput) (VectorsResult, error) {
	var out VectorsResult
	if a.Vectors == nil {
		return out, invalid(fmt.Errorf("no vector store configured"))
	}
	defer keepAlive(ctx)()
	p, err := a.readEmbedPlan(ctx, in.Embed.Key)
	if err != nil {
		return out, err
	}
	hashes := make([]string, len(p.Points))
	for i, pt := range p.Points {
		hashes[i] = pt.Hash
	}
	data, err := json.Marshal(hashes)
	if err != nil {
		return out, err
	}
	// The set is written first: a GC between the two steps keeps the points.
	if err := a.Store.Put(ctx, VectorSetKey(p.Tenant, p.Repo, p.Commit), data); err != nil {
		return out, fmt.Errorf("write vector set: %w", err)
	}
	r, err := dense.Upsert(ctx, a.Store, a.Vectors, vector.Collection{Model: p.Model, Dim: p.Dim}, p.Tenant, p.Repo, p.Points)
	if err != nil {
		return out, fmt.Errorf("store vectors: %w", err)
	}
	if err := a.undoIfGone(ctx, p.Tenant, p.Repo, "vector store", VectorSetKey(p.Tenant, p.Repo, p.Commit)); err != nil {
		// The points too: a DELETE removed the repository's before.
		if derr := a.Vectors.DeleteRepo(context.WithoutCancel(ctx), p.Tenant, p.Repo); derr != nil {
			activity.GetLogger(ctx).Warn("vectors of a deleted repository left", "tenant", p.Tenant, "repo", p.Repo, "error", derr)
		}
		return out, err
	}
	return VectorsResult{Points: r.Points, Added: r.Added, Missing: r.Missing}, nil
}

// pruneVectors deletes the repository's points that no kept snapshot's
// vector set references. A kept commit without a set (indexed before an
// embedder was configured) references nothing.
func (a *Activities) pruneVectors(ctx context.Context, tenant, repo string, keep map[string]bool, stop func() bool) (int, error) {
	if a.Vectors == nil || a.Embedder == nil {
		return 0, nil
	}
	hashes := map[string]bool{}
	for commit := range keep {
		data, err := a.Store.Get(ctx, VectorSetKey(tenant, repo, commit))
		if err != nil {
			if errors.Is(err, blob.ErrNotFound) {
				continue
			}
			return 0, err
		}
		var hs []string
		if err := json.Unmarshal(data, &hs); err != nil {
			return 0, fmt.Errorf("decode vector set of %s: %w", commit, err)
		}
		for _, h := range hs {
			hashes[h] = true
		}
	}
	return dense.Prune(ctx, a.Vectors, dense.Collection(a.Embedder), tenant, repo, hashes, stop)
}

// VectorCheck is the result of CheckVectors.
type VectorCheck struct {
	Skipped bool // no embedder or no vector store configured
	NoSet   bool // the snapshot has no vector set (published without an embedder)
	Points  int  // points of the snapshot (its vector set)
	Missing int  // of those, not in the vector store
}

// CheckVectors counts the points of a published snapshot (its vector set)
// that the vector store does not hold, with one listing of the
// repository's points: the vector store is derived data, and a store that
// lost them (a volume lost, a collection dropped) gets them back from a
// reindex of the published commit.
func (a *Activities) CheckVectors(ctx context.Context, p SnapshotPlan) (VectorCheck, error) {
	var out VectorCheck
	if a.Embedder == nil || a.Vectors == nil {
		out.Skipped = true
		return out, nil
	}
	defer keepAlive(ctx)()
	data, err := a.Store.Get(ctx, VectorSetKey(p.Tenant, p.Repo, p.Commit))
	if errors.Is(err, blob.ErrNotFound) {
		out.NoSet = true
		return out, nil
	}
	if err != nil {
		return out, err
	}
	var hashes []string
	if err := json.Unmarshal(data, &hashes); err != nil {
		return out, fmt.Errorf("decode vector set of %s: %w", p.Commit, err)
	}
	stored, err := dense.Stored(ctx, a.Vectors, dense.Collection(a.Embedder), p.Tenant, p.Repo)
	if err != nil {
		return out, fmt.Errorf("list vectors: %w", err)
	}
	out.Points = len(hashes)
	for _, h := range hashes {
		if !stored[vector.PointID(p.Tenant, p.Repo, h)] {
			out.Missing++
		}
	}
	return out, nil
}
