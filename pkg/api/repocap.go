package api

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/index"
)

// The repositories a tenant holds, and the bound on how many it may hold
// (Limits.TenantRepos, --tenant-repos).
//
// A repository costs wherever it exists: its workflow's state, its
// objects in the store, its index in memory, and an entry in the list an
// org-wide ("*") query scans. A tenant holds the repositories it has a
// registration for (an empty object under repos/, written before the
// first push of a repository is signalled) and those with a published
// HEAD (repositories indexed before the bound was on). A push, an index
// request or a reindex of a repository the tenant holds always passes; a
// new one is registered only while the tenant holds fewer than the bound,
// and refused (409) otherwise. DELETE of the repository removes its
// registration with its HEAD, which frees the slot.
//
// The count is exact however many servers register at once: a new
// registration is first written as pending (counted, but trusted as held
// by no server), then a per-tenant generation object is moved on by a
// compare-and-swap from the value read before the count, and only then is
// the registration settled. Of two registrations counted at once only one
// swap succeeds; the other removes its pending registration and counts
// again, now seeing the first. A push of a repository that another request
// is still registering registers it too, rather than trusting a
// registration whose swap may lose. One server also takes its tenant's
// registrations one at a time, so that its own requests do not race each
// other's swaps.

// DefaultTenantRepos is the bound of Limits.TenantRepos with keys: enough
// for a tenant that indexes a whole organisation.
const DefaultTenantRepos = 10000

const (
	// registryRoot holds one registration per repository a tenant holds:
	// registryRoot/<tenant>/<repo>/@/REPO.
	registryRoot = "repos/"
	registryFile = "REPO"
	// pendingFile starts the name of a registration written before its
	// swap: registryRoot/<tenant>/<repo>/@/PENDING.<random>. It is
	// counted, but not trusted as held, until the swap succeeds and the
	// registration is settled under registryFile.
	pendingFile = "PENDING."
	// generationName is the object every new registration of a tenant
	// swaps: registryRoot/<tenant>/@/GEN (no repository is named "@").
	generationName = "@/GEN"
	// registerTries bounds the rounds of a registration that loses its
	// swap to registrations of other servers.
	registerTries = 16
)

// registryKey is the registration of tenant/repo.
func registryKey(tenant, repo string) string {
	return index.RepoPrefix(registryRoot, tenant, repo) + registryFile
}

// pendingKey is a new pending registration of tenant/repo, one per
// request, so that a request removing its own never removes another's.
// It carries the time it was written: a DELETE leaves a pending
// registration younger than pendingLife to the request that wrote it.
func pendingKey(tenant, repo string) string {
	return index.RepoPrefix(registryRoot, tenant, repo) + pendingFile + strconv.FormatInt(time.Now().Unix(), 10) + "." + rand.Text()
}

// pendingLife is how long a pending registration belongs to the request
// that wrote it: a DELETE does not remove it before then. A DELETE that
// removed one between its swap and its settling let another server count
// the tenant's repositories without it, and the settled registration then
// came on top of that count. One round of a registration (registerRound)
// ends well within it; an older one was left by a request that ended
// (a crash), and a DELETE of the repository removes it.
const pendingLife = time.Minute

// registerRound bounds one round of a registration (register, and the
// registration of a HEAD-only repository in holds), so that its pending
// registration is settled or removed within pendingLife.
const registerRound = pendingLife / 3

// youngPending reports whether the registry file name is a pending
// registration younger than pendingLife (one a request may still settle).
func youngPending(file string) bool {
	rest, ok := strings.CutPrefix(file, pendingFile)
	if !ok {
		return false
	}
	sec, _, ok := strings.Cut(rest, ".")
	if !ok {
		return false
	}
	t, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return false
	}
	return time.Since(time.Unix(t, 0)) < pendingLife
}

func generationKey(tenant string) string { return registryRoot + tenant + "/" + generationName }

// TooManyRepos is the error of a new repository past its tenant's bound.
type TooManyRepos struct {
	Tenant string
	Held   int // repositories the tenant holds
	Limit  int // Limits.TenantRepos
}

func (e *TooManyRepos) Error() string {
	return fmt.Sprintf("tenant %q holds %d repositories, the server's limit per tenant (tenant-repos: %d): delete one of them (DELETE /v1/repos/%s/REPO) to index another; the ones it holds may still be pushed and reindexed", e.Tenant, e.Held, e.Limit, e.Tenant)
}

// errRegisterBusy is answered when a registration lost its swap every
// round (other servers registering the tenant's repositories at once).
var errRegisterBusy = errors.New("the tenant's repositories are being registered by other requests: retry")

// heldRepos lists the repositories tenant holds or is registering, sorted
// and distinct: what the bound counts.
func (s *Server) heldRepos(ctx context.Context, tenant string) ([]string, error) {
	names, _, err := s.registry(ctx, tenant)
	return names, err
}

// registry lists the repositories tenant holds or is registering (sorted,
// distinct) and, of those, the ones settled: registered for good or with
// a published HEAD. The others have only a pending registration, one
// whose swap has not (yet) made it count.
func (s *Server) registry(ctx context.Context, tenant string) (names []string, settled map[string]bool, err error) {
	heads, err := s.repoNames(ctx, tenant)
	if err != nil {
		return nil, nil, err
	}
	settled = make(map[string]bool, len(heads))
	for _, n := range heads {
		settled[n] = true
	}
	names = heads
	prefix := registryRoot + tenant + "/"
	keys, err := s.Store.List(ctx, prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("list repositories of %s: %w", tenant, err)
	}
	for _, k := range keys {
		name, file, ok := strings.Cut(strings.TrimPrefix(k, prefix), "/@/")
		if !ok || !index.ValidName(name) {
			continue
		}
		switch {
		case file == registryFile:
			settled[name] = true
		case strings.HasPrefix(file, pendingFile):
		default:
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names), settled, nil
}

// holds reports whether tenant holds repo: a registration, else a HEAD in
// either layout (a repository from before the bound). A HEAD-only
// repository is registered on the spot (it is counted already), so that
// a push of it can be confirmed by its registration after the signal.
func (s *Server) holds(ctx context.Context, tenant, repo string) (bool, error) {
	if ok, err := s.Store.Exists(ctx, registryKey(tenant, repo)); err != nil || ok {
		return ok, err
	}
	ok, err := s.hasHead(ctx, tenant, repo)
	if err != nil || !ok {
		return false, err
	}
	// The HEAD counts the repository only while it is there: a DELETE on
	// another server may remove it now, and another registration count
	// the tenant without it. A pending registration counts it from before
	// the HEAD is checked again until the registration is settled (a
	// DELETE leaves a young one), so that the count never misses it.
	ctx, cancel := context.WithTimeout(ctx, registerRound)
	defer cancel()
	pending := pendingKey(tenant, repo)
	if err := s.Store.Put(ctx, pending, []byte{}); err != nil {
		return false, err
	}
	defer func() {
		if derr := s.Store.Delete(context.WithoutCancel(ctx), pending); derr != nil {
			s.Log.Warn("pending registration left (counted, harmless)", "tenant", tenant, "repo", repo, "error", derr)
		}
	}()
	if ok, err = s.hasHead(ctx, tenant, repo); err != nil || !ok {
		return false, err // deleted meanwhile: a new repository
	}
	return true, s.Store.Put(ctx, registryKey(tenant, repo), []byte{})
}

// hasHead reports whether tenant/repo has a HEAD, in either layout.
func (s *Server) hasHead(ctx context.Context, tenant, repo string) (bool, error) {
	for _, k := range []string{index.HeadKey(tenant, repo), "heads/" + tenant + "/" + repo} {
		ok, err := s.Store.Exists(ctx, k)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// registered reports whether tenant/repo has a settled registration.
func (s *Server) registered(ctx context.Context, tenant, repo string) (bool, error) {
	return s.Store.Exists(ctx, registryKey(tenant, repo))
}

// signal sends a push of req once its tenant holds the repository
// (holdRepo), and confirms after the signal that the registration is
// still there. A DELETE removes the HEAD and the registration before it
// ends the workflow, so a push checked before a DELETE (on any server)
// and signalled after it ended the workflow finds the registration gone:
// the workflow it started again is ended, and the push is refused (409).
// Without the confirmation that workflow indexed the repository after
// its DELETE answered, with no registration: outside the bound.
// It answers the run ID, or the status code and error to write.
func (s *Server) signal(ctx context.Context, req IndexRequest, operator bool) (string, int, error) {
	if code, err := s.holdRepo(ctx, req.Tenant, req.Repo, operator); err != nil {
		return "", code, err
	}
	// Held (or no bound): the location is recorded before the signal, so
	// that a DELETE on another server that removes the registration after
	// this point removes it too.
	s.recordLocation(ctx, req)
	run, err := s.Indexer.Index(ctx, req)
	if err != nil {
		s.Log.Error("index request", "tenant", req.Tenant, "repo", req.Repo, "error", err)
		return "", http.StatusServiceUnavailable, fmt.Errorf("signal %s/%s: %w", req.Tenant, req.Repo, err)
	}
	if s.limits.TenantRepos <= 0 {
		return run, 0, nil
	}
	// A failed read is asked again before the workflow is ended: ending
	// it on one error stopped a held repository's running snapshot and
	// dropped its queued pushes.
	var ok bool
	for i := range confirmTries {
		if i > 0 {
			time.Sleep(time.Duration(i) * 50 * time.Millisecond)
		}
		if ok, err = s.registered(context.WithoutCancel(ctx), req.Tenant, req.Repo); err == nil {
			break
		}
	}
	if err == nil && ok {
		return run, 0, nil
	}
	if c, isCloser := s.Indexer.(RepoCloser); isCloser {
		if _, cerr := c.CloseRepo(context.WithoutCancel(ctx), req.Tenant, req.Repo); cerr != nil {
			s.Log.Error("push of a repository deleted meanwhile: its workflow not ended", "tenant", req.Tenant, "repo", req.Repo, "error", cerr)
		}
	}
	if err == nil {
		// Deleted meanwhile: the location this push recorded, perhaps
		// after the DELETE removed the repository's, goes too.
		s.forgetLocation(context.WithoutCancel(ctx), req.Tenant, req.Repo)
	}
	if err != nil {
		return "", http.StatusServiceUnavailable, fmt.Errorf("confirm %s/%s: %w", req.Tenant, req.Repo, err)
	}
	return "", http.StatusConflict, fmt.Errorf("%s/%s was deleted while this push was taken: push or index it again", req.Tenant, req.Repo)
}

// confirmTries bounds the reads of a push's confirmation (signal).
const confirmTries = 3

// holdRepo makes sure tenant holds repo before a push of it is signalled.
// A repository the tenant holds passes at the cost of one existence check;
// a new one is registered if the tenant holds fewer than the bound, else
// refused with 409 and a *TooManyRepos. An operator's request registers
// it past the bound too (operators are not tenants), so it is counted.
// It answers the status code and error to write, 0 and nil to go on.
func (s *Server) holdRepo(ctx context.Context, tenant, repo string, operator bool) (int, error) {
	limit := s.limits.TenantRepos
	if limit <= 0 {
		return 0, nil
	}
	ok, err := s.holds(ctx, tenant, repo)
	switch {
	case err != nil:
		return http.StatusServiceUnavailable, fmt.Errorf("repositories of %s: %w", tenant, err)
	case ok:
		return 0, nil
	}
	unlock := s.registering.lock(tenant)
	defer unlock()
	for i := range registerTries {
		code, err := s.register(ctx, tenant, repo, limit, operator)
		if !errors.Is(err, blob.ErrConflict) {
			return code, err
		}
		// Another server registered one of the tenant's repositories
		// between this count and this swap: count again, after a random
		// wait that grows (1 ms, up to 2, 4, ... 32): two servers that
		// waited 1 ms each met again, and under load one request in 48
		// lost all its rounds (TestTenantReposConcurrent).
		select {
		case <-ctx.Done():
			return http.StatusServiceUnavailable, ctx.Err()
		case <-time.After(time.Duration(1+mrand.IntN(1<<min(i, 5))) * time.Millisecond):
		}
	}
	return http.StatusServiceUnavailable, errRegisterBusy
}

// register is one round of holdRepo for a repository not held a moment
// ago: read the generation, count, write the registration, swap the
// generation on. A lost swap removes the registration and returns an
// error wrapping blob.ErrConflict.
func (s *Server) register(ctx context.Context, tenant, repo string, limit int, operator bool) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, registerRound)
	defer cancel()
	genKey := generationKey(tenant)
	gen, err := s.Store.Get(ctx, genKey)
	if errors.Is(err, blob.ErrNotFound) {
		gen, err = nil, nil
	}
	if err != nil {
		return http.StatusServiceUnavailable, fmt.Errorf("repositories of %s: %w", tenant, err)
	}
	if c, ok := s.repoCounts.Load(tenant); ok && !operator {
		// A tenant at its bound is refused without listing its
		// repositories again while nothing was registered or deleted
		// since (both move the generation on), for a few seconds.
		c := c.(repoCount)
		if c.gen == string(gen) && c.held >= limit && time.Since(c.at) < countFresh {
			return http.StatusConflict, &TooManyRepos{Tenant: tenant, Held: c.held, Limit: limit}
		}
	}
	held, settled, err := s.registry(ctx, tenant)
	if err != nil {
		return http.StatusServiceUnavailable, err
	}
	if settled[repo] {
		return 0, nil // registered meanwhile by another request
	}
	// A repository another request is registering (pending) is not held:
	// that request's swap may lose. This one registers it too, under the
	// same rule as a new one: the tenant's repositories with it, pending
	// ones included, within the bound.
	n := len(held)
	if _, ok := slices.BinarySearch(held, repo); !ok {
		n++
	}
	if n > limit && !operator {
		s.repoCounts.Store(tenant, repoCount{gen: string(gen), held: len(held), at: time.Now()})
		return http.StatusConflict, &TooManyRepos{Tenant: tenant, Held: len(held), Limit: limit}
	}
	pending := pendingKey(tenant, repo)
	if err := s.Store.Put(ctx, pending, []byte{}); err != nil {
		return http.StatusServiceUnavailable, fmt.Errorf("register %s/%s: %w", tenant, repo, err)
	}
	err = s.Store.Swap(ctx, genKey, gen, nextGeneration(gen))
	if err == nil {
		// Counted: settle it. Until then (or if this fails) the pending
		// registration is counted, but no server trusts it as held.
		if err := s.Store.Put(ctx, registryKey(tenant, repo), []byte{}); err != nil {
			// Refused: the pending registration must not stay counted.
			if derr := s.Store.Delete(context.WithoutCancel(ctx), pending); derr != nil {
				s.Log.Warn("pending registration left after a failed registration", "tenant", tenant, "repo", repo, "error", derr)
			}
			return http.StatusServiceUnavailable, fmt.Errorf("register %s/%s: %w", tenant, repo, err)
		}
		if derr := s.Store.Delete(context.WithoutCancel(ctx), pending); derr != nil {
			s.Log.Warn("pending registration left (counted, harmless)", "tenant", tenant, "repo", repo, "error", derr)
		}
		return 0, nil
	}
	// Lost or failed: the pending registration must not stay counted.
	if derr := s.Store.Delete(context.WithoutCancel(ctx), pending); derr != nil {
		s.Log.Warn("pending registration left after a failed swap", "tenant", tenant, "repo", repo, "error", derr)
	}
	if errors.Is(err, blob.ErrConflict) {
		return 0, err
	}
	return http.StatusServiceUnavailable, fmt.Errorf("register %s/%s: %w", tenant, repo, err)
}

// lockRepo takes tenant/repo on this server until unlock: a push holds it
// from the check that the tenant holds the repository to the signal, and
// a DELETE for its whole run. Without it a push that found the
// registration before a DELETE removed it, and signalled after the DELETE
// ended the workflow, started the workflow again: the repository was
// indexed again after its DELETE answered, with no registration, so not
// counted until it published (and never, if it did not).
// Servers sharing a store do not share this lock (see docs/security.md).
func (s *Server) lockRepo(tenant, repo string) (unlock func()) {
	return s.repoBusy.lock(tenant + "\x00" + repo)
}

// nextGeneration is the value a generation moves on to.
func nextGeneration(gen []byte) []byte {
	n, _ := strconv.ParseUint(string(gen), 10, 64)
	return []byte(strconv.FormatUint(n+1, 10))
}

// released moves tenant's generation on after a DELETE removed one of its
// repositories, so that no server keeps refusing on a count from before.
// A swap lost to a registration moved it on already.
func (s *Server) released(ctx context.Context, tenant string) {
	if s.limits.TenantRepos <= 0 {
		return
	}
	s.repoCounts.Delete(tenant)
	key := generationKey(tenant)
	gen, err := s.Store.Get(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		gen, err = nil, nil
	}
	if err == nil {
		err = s.Store.Swap(ctx, key, gen, nextGeneration(gen))
	}
	if err != nil && !errors.Is(err, blob.ErrConflict) {
		s.Log.Warn("repository count not moved on after a delete", "tenant", tenant, "error", err)
	}
}

// repoCount is a tenant's count of repositories at its bound, as listed at
// generation gen.
type repoCount struct {
	gen  string
	held int
	at   time.Time
}

// countFresh is how long a count at the bound answers for its generation.
// The generation alone would do, but for a registration that lost its
// swap: counted by a listing before it removed itself, it moved nothing.
const countFresh = 5 * time.Second

// tenantLocks serialises one server's registrations per tenant; a
// tenant's entry lives while a request holds or waits for it.
type tenantLocks struct {
	mu sync.Mutex
	m  map[string]*tenantLock
}

type tenantLock struct {
	sync.Mutex
	users int
}

func (l *tenantLocks) lock(tenant string) (unlock func()) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*tenantLock{}
	}
	e := l.m[tenant]
	if e == nil {
		e = &tenantLock{}
		l.m[tenant] = e
	}
	e.users++
	l.mu.Unlock()
	e.Lock()
	return func() {
		e.Unlock()
		l.mu.Lock()
		if e.users--; e.users == 0 {
			delete(l.m, tenant)
		}
		l.mu.Unlock()
	}
}
