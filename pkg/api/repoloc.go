package api

import (
	"context"
	"errors"
	"fmt"

	"codectx/pkg/blob"
	"codectx/pkg/index"
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

// locationKey is the recorded location of tenant/repo.
func locationKey(tenant, repo string) string {
	return index.RepoPrefix(registryRoot, tenant, repo) + locationFile
}

// recordLocation records req's location for its repository, unless it is
// recorded already. A failure is logged, not answered: the push goes on,
// and the workflow holds the location.
func (s *Server) recordLocation(ctx context.Context, req IndexRequest) {
	if s.Store == nil || req.Location == "" {
		return
	}
	key := locationKey(req.Tenant, req.Repo)
	old, err := s.Store.Get(ctx, key)
	if err == nil && string(old) == req.Location {
		return
	}
	if err != nil && !errors.Is(err, blob.ErrNotFound) {
		s.Log.Warn("location of the repository not read", "tenant", req.Tenant, "repo", req.Repo, "error", err)
	}
	if err := s.Store.Put(ctx, key, []byte(req.Location)); err != nil {
		s.Log.Warn("location of the repository not recorded", "tenant", req.Tenant, "repo", req.Repo, "error", err)
	}
}

// forgetLocation removes the recorded location of tenant/repo (a push
// refused after its signal: the repository was deleted meanwhile).
func (s *Server) forgetLocation(ctx context.Context, tenant, repo string) {
	if err := s.Store.Delete(ctx, locationKey(tenant, repo)); err != nil && !errors.Is(err, blob.ErrNotFound) {
		s.Log.Warn("location of a deleted repository left", "tenant", tenant, "repo", repo, "error", err)
	}
}

// storedLocation answers the recorded location of tenant/repo, "" when
// none is (an empty object counts as none).
func (s *Server) storedLocation(ctx context.Context, tenant, repo string) (string, error) {
	b, err := s.Store.Get(ctx, locationKey(tenant, repo))
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("location of %s/%s: %w", tenant, repo, err)
	}
	return string(b), nil
}
