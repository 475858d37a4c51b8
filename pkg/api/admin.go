package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/keys"
	"codectx/pkg/pipeline"
)

// RepoInfo is one repository in GET /v1/repos.
type RepoInfo struct {
	Repo      string `json:"repo"`
	Commit    string `json:"commit"`               // published HEAD ("": none yet)
	IndexedAt string `json:"indexed_at"`           // RFC 3339, when that HEAD was built
	Files     int    `json:"files"`                // files in the published index
	Skipped   int    `json:"skipped"`              // files left out (binary, too large, generated, ...)
	Degraded  int    `json:"degraded"`             // files cut into line windows (parse timeout, invalid UTF-8, ...)
	Failed    int    `json:"failed"`               // files whose parse failed in the last snapshot (with an orchestrator)
	State     string `json:"state,omitempty"`      // idle, indexing, queued or unknown (with an orchestrator)
	LastError string `json:"last_error,omitempty"` // error of the last snapshot
}

// RepoPage is the answer of GET /v1/repos: one page of a tenant's
// repositories, by name. Pass Next as cursor for the next page; "" = last.
type RepoPage struct {
	Tenant string     `json:"tenant"`
	Repos  []RepoInfo `json:"repos"`
	Next   string     `json:"next,omitempty"`
}

// DeleteResponse is the answer of DELETE /v1/repos/{tenant}/{repo}.
type DeleteResponse struct {
	Tenant  string `json:"tenant"`
	Repo    string `json:"repo"`
	Deleted int    `json:"deleted"` // objects removed: HEAD, segments, manifests, plans, embedded vector shards and sets, the registration, the workflow
}

const (
	defaultPage = 50
	maxPage     = 500
)

// listRepos serves GET /v1/repos?tenant=T&limit=N&cursor=C.
func (s *Server) listRepos(w http.ResponseWriter, r *http.Request) {
	k, ok := s.admit(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	for name, vs := range q {
		if len(vs) > 1 {
			writeError(w, http.StatusBadRequest, fmt.Errorf("parameter %s given %d times", name, len(vs)))
			return
		}
	}
	tenant := s.tenantOr(r, q.Get("tenant"))
	if !index.ValidTenant(tenant) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("invalid tenant %q", tenant))
		return
	}
	limit := defaultPage
	if _, given := q["limit"]; given {
		v := q.Get("limit")
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPage {
			writeError(w, http.StatusBadRequest, fmt.Errorf("limit %q: want 1..%d", v, maxPage))
			return
		}
		limit = n
	}
	cursor := q.Get("cursor")
	pay, ok := s.authorizePayer(w, r, k, tenant, keys.Query)
	if !ok {
		return
	}
	page, err := s.repoPage(r.Context(), tenant, cursor, limit, func(n int) { s.chargeRepos(pay, n) })
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// Repos returns one page of a tenant's repositories, by name, as GET
// /v1/repos answers it: at most limit (1..500; 0: 50) after cursor (""
// = from the first). For an in-process caller (codectx repos --data):
// no key, no charge.
func (s *Server) Repos(ctx context.Context, tenant, cursor string, limit int) (RepoPage, error) {
	s.init()
	if !index.ValidTenant(tenant) {
		return RepoPage{}, fmt.Errorf("invalid tenant %q", tenant)
	}
	if limit == 0 {
		limit = defaultPage
	}
	if limit < 1 || limit > maxPage {
		return RepoPage{}, fmt.Errorf("limit %d: want 1..%d", limit, maxPage)
	}
	return s.repoPage(ctx, tenant, cursor, limit, func(int) {})
}

// repoPage lists the page; charge is called with its number of
// repositories before their entries are read.
func (s *Server) repoPage(ctx context.Context, tenant, cursor string, limit int, charge func(n int)) (RepoPage, error) {
	// With the repository bound on, every repository the tenant holds is
	// listed, published or not (a registration whose first snapshot has
	// not published, or failed): the list is what the bound counts, and
	// each entry can be deleted to free its slot.
	list := s.repoNames
	if s.limits.TenantRepos > 0 {
		list = s.heldRepos
	}
	names, err := list(ctx, tenant)
	if err != nil {
		return RepoPage{}, err
	}
	page := RepoPage{Tenant: tenant, Repos: []RepoInfo{}}
	start := 0
	for start < len(names) && cursor != "" && names[start] <= cursor {
		start++
	}
	end := min(start+limit, len(names))
	if end < len(names) {
		page.Next = names[end-1]
	}
	names = names[start:end]
	// Each repository of the page costs a HEAD read, a segment load and
	// (with an orchestrator) a status query: a page pays what a query
	// over its repositories does (search), the request the first.
	charge(len(names))
	page.Repos = make([]RepoInfo, len(names))
	err = forEach(len(names), func(i int) error {
		info, err := s.repoInfo(ctx, tenant, names[i])
		page.Repos[i] = info
		return err
	})
	if err != nil {
		return RepoPage{}, err
	}
	return page, nil
}

func (s *Server) repoInfo(ctx context.Context, tenant, repo string) (RepoInfo, error) {
	info := RepoInfo{Repo: repo}
	if s.Indexer != nil {
		if st, err := s.Indexer.Status(ctx, tenant, repo); err == nil {
			info.State, info.Failed, info.LastError = st.State, st.Failed, st.LastError
		}
	}
	head, err := index.ReadHead(ctx, s.Store, tenant, repo)
	if errors.Is(err, blob.ErrNotFound) {
		return info, nil // held, but nothing published yet
	}
	if err != nil {
		return info, fmt.Errorf("HEAD of %s/%s: %w", tenant, repo, err)
	}
	info.Commit, info.IndexedAt = head.Commit, head.Built
	seg, err := s.segs.get(ctx, head.Segment)
	if err != nil {
		return info, err
	}
	info.Files, info.Skipped, info.Degraded = len(seg.Files), index.Total(seg.Meta.Skipped), index.Total(seg.Meta.Degraded)
	return info, nil
}

// repoAction routes POST /v1/repos/{tenant}/{repo}/reindex.
func (s *Server) repoAction(w http.ResponseWriter, r *http.Request) {
	tenant, repo, ok := s.repoRoute(w, r, "reindex", keys.Index)
	if !ok {
		return
	}
	if s.Indexer == nil {
		writeError(w, http.StatusServiceUnavailable, errors.New("no orchestrator configured"))
		return
	}
	ctx := r.Context()
	st, err := s.Indexer.Status(ctx, tenant, repo)
	switch {
	case errors.Is(err, ErrUnknownRepo), err == nil && st.Location == "":
		// The orchestrator has no location (no workflow: its state was
		// lost): the one recorded with the repository in the store, if
		// any (storedLocation). It is checked as an index request's.
		loc, lerr := s.storedLocation(ctx, tenant, repo)
		if lerr != nil {
			writeError(w, http.StatusServiceUnavailable, lerr)
			return
		}
		if loc != "" {
			if code, cerr := s.checkLocation(loc, tenant, s.operator(r), s.operator(r)); cerr != nil {
				writeError(w, code, fmt.Errorf("recorded %w", cerr))
				return
			}
			rev, rerr := s.storedRevision(ctx, tenant, repo)
			if rerr != nil {
				writeError(w, http.StatusServiceUnavailable, rerr)
				return
			}
			st.Location, st.Rev = loc, rev
			break
		}
		if err == nil {
			writeError(w, http.StatusConflict, fmt.Errorf("%s/%s: no location recorded; POST /v1/index with one", tenant, repo))
			return
		}
		if _, herr := index.ReadHead(ctx, s.Store, tenant, repo); herr == nil {
			writeError(w, http.StatusConflict, fmt.Errorf("%s/%s is indexed but neither the orchestrator (its state lost?) nor the store has a record of its location; POST /v1/index with its location", tenant, repo))
			return
		}
		writeError(w, http.StatusNotFound, fmt.Errorf("unknown repository %s/%s", tenant, repo))
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("status of %s/%s: %w", tenant, repo, err))
		return
	}
	// A repository deleted since has a workflow still: indexing it again
	// takes a slot as a new one does.
	unlock := s.lockRepo(tenant, repo)
	defer unlock()
	run, code, err := s.signal(ctx, IndexRequest{Tenant: tenant, Repo: repo, Location: st.Location, Commit: st.Rev}, s.operator(r))
	if err != nil {
		writeError(w, code, err)
		return
	}
	writeJSON(w, http.StatusAccepted, IndexResponse{Tenant: tenant, Repo: repo, RunID: run})
}

// deleteRepo serves DELETE /v1/repos/{tenant}/{repo}: the HEAD goes first
// (queries stop finding the repository), then its registration (which
// frees its slot of Limits.TenantRepos), then the repository's workflow is
// ended (with an Indexer that can), then its vectors in the vector store
// (every model's), its manifests, segments, shards and plans, and the
// embedded vector store's shards, vector sets and embed plans, and the
// HEAD once more. The parse and embedding caches are shared by the
// tenant's repositories and are left to `codectx gc`.
//
// Work of the repository already running when its workflow ends may still
// write: what it wrote before the end is removed here (the second HEAD
// removal catches a publish that landed between the first and the end);
// the activities and the graph worker check after their writes and remove
// what they wrote after it (workflows.Activities, pipeline.BuildSegment:
// the manifests go first, so that a graph job that still finds its
// manifest wrote before the segments were listed).
func (s *Server) deleteRepo(w http.ResponseWriter, r *http.Request) {
	k, ok := s.admit(w, r)
	if !ok {
		return
	}
	tenant, repo := r.PathValue("tenant"), r.PathValue("rest")
	if err := validRepo(tenant, repo); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if !s.authorize(w, r, k, tenant, keys.Admin) {
		return
	}
	// No push of the repository on this server checks that it is held
	// before the registration goes and signals after the workflow ended:
	// that push would start the workflow again, unregistered, and index
	// the repository after the DELETE answered.
	unlock := s.lockRepo(tenant, repo)
	defer unlock()
	ctx := r.Context()
	res := DeleteResponse{Tenant: tenant, Repo: repo}
	// Where the repository was fetched from, read before its record goes:
	// its clone is removed last.
	loc := ""
	if s.CloneDir != "" {
		loc = s.repoLocation(ctx, tenant, repo)
	}
	// HEAD first, in both layouts (RepoPrefix, and the older one without
	// the /@/ separator), so queries stop finding the repository.
	n, err := s.deleteHeads(ctx, tenant, repo)
	res.Deleted += n
	// The HEAD this server last read is forgotten too: kept, a query
	// whose HEAD read is slow or fails answered from it (load), the
	// deleted repository's code from the segment still in the cache.
	s.forgetHead(ctx, tenant, repo)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	// Then the registration, before the workflow ends: a push taken
	// meanwhile on any server, signalled after the workflow ended, finds
	// it gone and ends the workflow it started again (signal). A
	// registration written after this point is a new repository's.
	// A young pending registration is left to the request that wrote it
	// (see pendingLife): removed between its swap and its settling, it
	// let another server count the tenant without it.
	n, err = s.deleteUnder(ctx, registryRoot, tenant, repo, youngPending)
	res.Deleted += n
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	if res.Deleted > 0 { // a HEAD or a registration: a slot is free
		s.released(ctx, tenant)
	}
	// The workflow: no snapshot of it starts after the delete, and a
	// tenant that deletes and creates repositories in turn leaves no
	// workflow behind for each.
	if c, ok := s.Indexer.(RepoCloser); ok {
		closed, err := c.CloseRepo(ctx, tenant, repo)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, fmt.Errorf("end the workflow of %s/%s: %w", tenant, repo, err))
			return
		}
		if closed {
			res.Deleted++
		}
	}
	if s.Vectors != nil {
		// Even when nothing else is left: a DELETE that failed here
		// before is retried by the client and must reach the vectors.
		if err := s.Vectors.DeleteRepo(ctx, tenant, repo); err != nil {
			writeError(w, http.StatusServiceUnavailable, fmt.Errorf("delete vectors of %s/%s: %w", tenant, repo, err))
			return
		}
	}
	// The manifests first: see pipeline.BuildSegment.
	for _, root := range []string{"manifests/", "segments/", "shards/", "plans/", "vectors/", "vectorsets/", "embedplans/"} {
		n, err := s.deleteUnder(ctx, root, tenant, repo)
		res.Deleted += n
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, err)
			return
		}
	}
	// A publish that moved HEAD after the first removal, before the
	// workflow ended.
	n, err = s.deleteHeads(ctx, tenant, repo)
	res.Deleted += n
	// And again: a query that read the HEAD before its first removal may
	// have stored it since.
	s.forgetHead(ctx, tenant, repo)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	if n > 0 {
		s.released(ctx, tenant)
	}
	if loc != "" {
		// After the workflow ended, so no new snapshot of it fetches into
		// the clone; one still fetching keeps it until it closes. Another
		// repository of the tenant indexed from the same URL clones it
		// again on its next push.
		removed, err := pipeline.RemoveClone(ctx, s.CloneDir, tenant, loc, cloneWait)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, err)
			return
		}
		if removed {
			res.Deleted++
		}
	}
	if res.Deleted == 0 {
		writeError(w, http.StatusNotFound, fmt.Errorf("unknown repository %s/%s", tenant, repo))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// cloneWait is how long DELETE waits for a snapshot that still uses the
// repository's clone (one closing as its workflow ended) before leaving
// the clone to be removed when that snapshot closes it.
const cloneWait = 5 * time.Second

// repoLocation is where tenant/repo was last fetched from: the location
// recorded in the store, else its workflow's; "" if neither says.
func (s *Server) repoLocation(ctx context.Context, tenant, repo string) string {
	if loc, err := s.storedLocation(ctx, tenant, repo); err == nil && loc != "" {
		return loc
	}
	if s.Indexer != nil {
		if st, err := s.Indexer.Status(ctx, tenant, repo); err == nil {
			return st.Location
		}
	}
	return ""
}

// HeadNotices tells the servers sharing a store that a repository's HEAD
// was removed (best effort: a notice may be lost).
type HeadNotices interface {
	HeadGone(ctx context.Context, tenant, repo string) error
}

// forgetHead drops the HEAD of tenant/repo this server last read (the one
// load answers from while the store cannot be read), and tells the other
// servers to (Notices).
func (s *Server) forgetHead(ctx context.Context, tenant, repo string) {
	s.ForgetHead(tenant, repo)
	if s.Notices != nil {
		if err := s.Notices.HeadGone(ctx, tenant, repo); err != nil {
			s.Log.Warn("delete: the other servers were not told to forget the HEAD", "tenant", tenant, "repo", repo, "error", err)
		}
	}
}

// ForgetHead drops the HEAD of tenant/repo this server last read: a query
// reads it again, and while the store cannot be read answers 503, not the
// repository as it was. A notice of a DELETE on another server calls it.
func (s *Server) ForgetHead(tenant, repo string) {
	s.heads.Delete(tenant + "\x00" + repo)
}

// ForgetHeads forgets every HEAD this server last read: DELETE notices
// may have gone unheard (before it listened, while NATS was away).
func (s *Server) ForgetHeads() {
	s.heads.Clear()
}

// deleteHeads removes the HEAD of tenant/repo in both layouts (RepoPrefix,
// and the older one without the /@/ separator) and returns how many it
// removed.
func (s *Server) deleteHeads(ctx context.Context, tenant, repo string) (int, error) {
	n := 0
	for _, head := range []string{index.HeadKey(tenant, repo), "heads/" + tenant + "/" + repo} {
		had, err := s.Store.Exists(ctx, head)
		if err != nil {
			return n, err
		}
		if !had {
			continue
		}
		if err := s.Store.Delete(ctx, head); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return n, err
		}
		n++
	}
	return n, nil
}

// deleteUnder removes the objects of tenant/repo under root, in both
// layouts, but those whose name below the repository keep reports true
// (optional), and returns how many it removed.
func (s *Server) deleteUnder(ctx context.Context, root, tenant, repo string, keep ...func(string) bool) (int, error) {
	n := 0
	for _, prefix := range []string{index.RepoPrefix(root, tenant, repo), root + tenant + "/" + repo + "/"} {
		ks, err := s.Store.List(ctx, prefix)
		if err != nil {
			return n, err
		}
		for _, k := range ks {
			if strings.Contains(strings.TrimPrefix(k, prefix), "/") {
				continue // another repository nested under this name, or the other layout
			}
			if len(keep) > 0 && keep[0](strings.TrimPrefix(k, prefix)) {
				continue
			}
			if err := s.Store.Delete(ctx, k); err != nil && !errors.Is(err, blob.ErrNotFound) {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
