package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/source"
)

// The location of a repository (its clone URL, or an operator's path on
// the server) is the workflow's, in the orchestrator: a reindex takes it
// from there. It is also recorded in the blob store, next to the
// repository's registration (locationFile under registryRoot), by every
// push that is signalled (index request, webhook push, reindex), so that
// a reindex still knows it when the orchestrator has no record of the
// repository (its state lost). The object is not a registration: the
// count of a tenant's repositories skips it, and it is written whether or
// not the server bounds them (Limits.TenantRepos). DELETE of the
// repository removes it with the registration. A registration itself
// stays empty, so that one written by an earlier version reads the same:
// no location known.
//
// A stored location is the tenant's word as much as a new one: the
// reindex that falls back to it checks it as an index request's
// (checkLocation, with the caller's operator flag) and signals it through
// the same bound (signal); the clone checks the host again where it dials.

// locationFile is the repository's last signalled location:
// registryRoot/<tenant>/<repo>/@/LOCATION.
const locationFile = "LOCATION"

// revisionFile is the revision the repository follows on reindex
// (source.Follows of its last signalled push), beside its location;
// absent when it follows the location's HEAD.
const revisionFile = "REVISION"

// locationKey is the recorded location of tenant/repo.
func locationKey(tenant, repo string) string {
	return index.RepoPrefix(registryRoot, tenant, repo) + locationFile
}

// revisionKey is the recorded revision of tenant/repo.
func revisionKey(tenant, repo string) string {
	return index.RepoPrefix(registryRoot, tenant, repo) + revisionFile
}

// recordLocation records req's location for its repository, unless it is
// recorded already. A failure is logged, not answered: the push goes on,
// and the workflow holds the location.
func (s *Server) recordLocation(ctx context.Context, req IndexRequest) {
	if s.Store == nil || req.Location == "" || len(req.Location) > MaxLocation {
		// Past the bound: a workflow's location from before it, which a
		// reindex falling back to the store would refuse anyway.
		return
	}
	s.record(ctx, req.Tenant, req.Repo, locationKey(req.Tenant, req.Repo), req.Location)
	s.record(ctx, req.Tenant, req.Repo, revisionKey(req.Tenant, req.Repo), source.Follows(req.Branch, req.Commit))
}

// record sets the object at key of tenant/repo's records to value ("":
// none), unless it holds it already. A failure is logged.
func (s *Server) record(ctx context.Context, tenant, repo, key, value string) {
	old, err := s.Store.Get(ctx, key)
	switch {
	case err == nil && string(old) == value, errors.Is(err, blob.ErrNotFound) && value == "":
		return
	case err != nil && !errors.Is(err, blob.ErrNotFound):
		s.Log.Warn("record of the repository not read", "tenant", tenant, "repo", repo, "key", key, "error", err)
	}
	if value == "" {
		err = s.Store.Delete(ctx, key)
	} else {
		err = s.Store.Put(ctx, key, []byte(value))
	}
	if err != nil && !errors.Is(err, blob.ErrNotFound) {
		s.Log.Warn("record of the repository not written", "tenant", tenant, "repo", repo, "key", key, "error", err)
	}
}

// forgetLocation removes the recorded location of tenant/repo (a push
// refused after its signal: the repository was deleted meanwhile).
func (s *Server) forgetLocation(ctx context.Context, tenant, repo string) {
	for _, key := range []string{locationKey(tenant, repo), revisionKey(tenant, repo)} {
		if err := s.Store.Delete(ctx, key); err != nil && !errors.Is(err, blob.ErrNotFound) {
			s.Log.Warn("location of a deleted repository left", "tenant", tenant, "repo", repo, "key", key, "error", err)
		}
	}
}

// storedLocation answers the recorded location of tenant/repo, "" when
// none is (an empty object counts as none).
func (s *Server) storedLocation(ctx context.Context, tenant, repo string) (string, error) {
	return s.stored(ctx, tenant, repo, locationKey(tenant, repo), "location")
}

// storedRevision answers the recorded revision of tenant/repo, "" when it
// follows its location's HEAD (or was recorded by a version that did not
// record revisions).
func (s *Server) storedRevision(ctx context.Context, tenant, repo string) (string, error) {
	return s.stored(ctx, tenant, repo, revisionKey(tenant, repo), "revision")
}

func (s *Server) stored(ctx context.Context, tenant, repo, key, what string) (string, error) {
	b, err := s.Store.Get(ctx, key)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("%s of %s/%s: %w", what, tenant, repo, err)
	}
	return string(b), nil
}

// Backfill is what RecordLocations did.
type Backfill struct {
	Published int // repositories with a HEAD
	Recorded  int // locations recorded now
	Unknown   int // no location in the orchestrator either (its state lost)
	Left      int // the orchestrator or the store failed: try again
}

// RecordLocations records, for every published repository of every tenant
// that has no location recorded (indexed by a version that kept it only
// in the workflow), the location its workflow holds, so that a reindex
// after a loss of the orchestrator's state still finds it. A repository
// whose push or DELETE runs meanwhile is left to it: the record is written
// under lockRepo, only when still absent, and removed again when the
// repository's HEAD is gone after the write (a DELETE on another server).
// It needs an Indexer; errors of single repositories count in Left, and
// err is set only when the store cannot be listed.
func (s *Server) RecordLocations(ctx context.Context) (Backfill, error) {
	var b Backfill
	if s.Indexer == nil || s.Store == nil {
		return b, nil
	}
	s.init()
	heads, err := s.Store.List(ctx, "heads/")
	if err != nil {
		return b, fmt.Errorf("list published repositories: %w", err)
	}
	locs, err := s.Store.List(ctx, registryRoot)
	if err != nil {
		return b, fmt.Errorf("list recorded locations: %w", err)
	}
	have := map[[2]string]bool{}
	for _, k := range locs {
		if t, r, ok := splitRepoKey(strings.TrimPrefix(k, registryRoot), "/@/"+locationFile); ok {
			have[[2]string{t, r}] = true
		}
	}
	var todo [][2]string
	seen := map[[2]string]bool{}
	for _, k := range heads {
		t, r, ok := splitRepoKey(strings.TrimPrefix(k, "heads/"), "/@/HEAD")
		if !ok || seen[[2]string{t, r}] {
			continue
		}
		seen[[2]string{t, r}] = true
		b.Published++
		if !have[[2]string{t, r}] {
			todo = append(todo, [2]string{t, r})
		}
	}
	var mu sync.Mutex
	count := func(n *int) { mu.Lock(); *n++; mu.Unlock() }
	forEach(len(todo), func(i int) error {
		tenant, repo := todo[i][0], todo[i][1]
		switch done, err := s.recordFromWorkflow(ctx, tenant, repo); {
		case err != nil:
			s.Log.Warn("location of the repository not recorded", "tenant", tenant, "repo", repo, "error", err)
			count(&b.Left)
		case done:
			count(&b.Recorded)
		default:
			count(&b.Unknown)
		}
		return nil
	})
	return b, ctx.Err()
}

// recordFromWorkflow records the location tenant/repo's workflow holds if
// none is recorded; done is false when the workflow knows none.
func (s *Server) recordFromWorkflow(ctx context.Context, tenant, repo string) (done bool, err error) {
	unlock := s.lockRepo(tenant, repo)
	defer unlock()
	st, err := s.Indexer.Status(ctx, tenant, repo)
	switch {
	case errors.Is(err, ErrUnknownRepo):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("status: %w", err)
	case st.Location == "":
		return false, nil
	}
	key := locationKey(tenant, repo)
	switch _, err := s.Store.Get(ctx, key); {
	case err == nil:
		return true, nil // a push recorded one meanwhile: it is the newer
	case !errors.Is(err, blob.ErrNotFound):
		return false, err
	}
	if err := s.Store.Put(ctx, key, []byte(st.Location)); err != nil {
		return false, err
	}
	if st.Rev != "" {
		if err := s.Store.Put(ctx, revisionKey(tenant, repo), []byte(st.Rev)); err != nil {
			return false, err
		}
	}
	if ok, err := s.hasHead(ctx, tenant, repo); err != nil || !ok {
		// Deleted while the record was written: a DELETE removes the HEAD
		// before the records, so it either removed this one or the HEAD
		// is already gone here.
		s.forgetLocation(ctx, tenant, repo)
		return false, err
	}
	return true, nil
}

// splitRepoKey splits "<tenant>/<repo><suffix>" (the repository's name
// may hold slashes); a key of the old HEAD layout, "<tenant>/<repo>",
// passes when suffix is "/@/HEAD".
func splitRepoKey(key, suffix string) (tenant, repo string, ok bool) {
	tenant, rest, found := strings.Cut(key, "/")
	if !found {
		return "", "", false
	}
	switch {
	case strings.HasSuffix(rest, suffix):
		repo = strings.TrimSuffix(rest, suffix)
	case suffix == "/@/HEAD" && !strings.Contains(rest, "/@/"):
		repo = rest
	default:
		return "", "", false
	}
	return tenant, repo, index.ValidTenant(tenant) && index.ValidName(repo)
}
