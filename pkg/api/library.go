package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/classify"
	"codectx/pkg/codectx"
	"codectx/pkg/fusion"
	"codectx/pkg/index"
	"codectx/pkg/pack"
	"codectx/pkg/query"
	"codectx/pkg/segment"
	"codectx/pkg/session"
)

// AllRepos in a query's repos stands for every repository of the tenant.
const AllRepos = "*"

// maxRepos caps the repositories one query may search.
const maxRepos = 1000

// maxLanguages bounds the languages a query may restrict its results
// to; there are 9 (codectx.Languages).
const maxLanguages = 32

// languageList names codectx.Languages for errors and the API's docs.
var languageList = strings.Join(codectx.LanguageNames(), ", ")

// reposPerToken is how many repositories past the first a query searches
// for one more request of its tenant's rate.
const reposPerToken = 4

// sessionBytesPerToken is how many bytes of a session past the first
// that many its query writes for one more request of its tenant's rate.
const sessionBytesPerToken = 64 << 10

// maxSessionCharge bounds what a session's write is charged: a store
// writes at most about 1 MiB (natskv trims to fit a value).
const maxSessionCharge = 1 << 20

// chargeSession charges payer's rate for a session of n bytes read or
// written, less the paid bytes already charged for it in this query: a
// session is read and written whole at each query of it, so a session of
// long names and paths (up to about 1 MiB) made each query of a few
// hundred bytes, one request of the rate, write that much to the store
// that every tenant's sessions, queues and delivery log share: about 690
// KB a query, 34 MB/s within the default rate, and the whole session
// bucket turned over in half a minute (TestSecuritySessionWriteCharged).
// The read is charged when it is done, so that a query that fails after
// it (TestSecuritySessionReadCharged) pays for it too, and the write only
// for what it adds. It returns the bytes charged for so far.
func (s *Server) chargeSession(payer string, n, paid int) int {
	n = max(min(n, maxSessionCharge), paid)
	s.rate.charge(payer, float64(n-max(paid, sessionBytesPerToken))/sessionBytesPerToken)
	return n
}

// chargeRepos charges payer's rate for work over n repositories, about
// one query per repository: the request paid for the first, and each
// reposPerToken more cost one more request.
func (s *Server) chargeRepos(payer string, n int) {
	s.rate.charge(payer, float64(n-1)/reposPerToken)
}

// errNotIndexed is wrapped by loads of a repository with no HEAD.
var errNotIndexed = errors.New("not indexed")

// badRequest marks an error of the request itself (HTTP 400).
type badRequest struct{ err error }

func (e badRequest) Error() string { return e.err.Error() }
func (e badRequest) Unwrap() error { return e.err }

// repoNames lists the repositories of a tenant that have a published
// HEAD, sorted.
func (s *Server) repoNames(ctx context.Context, tenant string) ([]string, error) {
	prefix := "heads/" + tenant + "/"
	keys, err := s.Store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list repositories of %s: %w", tenant, err)
	}
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		// HEADs end in /@/HEAD; one without is of the old layout.
		name := strings.TrimPrefix(k, prefix)
		name = strings.TrimSuffix(name, "/@/HEAD")
		if index.ValidName(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// resolveRepos turns a query's repos (names, or "*" for all of the
// tenant's; at most maxRepos) and one more name (or "") into the sorted,
// distinct names to search. No name at all is an error: the caller says
// which repositories it means.
func (s *Server) resolveRepos(ctx context.Context, tenant string, repos []string, one string) ([]string, error) {
	if len(repos) > maxRepos {
		return nil, badRequest{fmt.Errorf("%d repositories: at most %d per query", len(repos), maxRepos)}
	}
	if one != "" {
		repos = append([]string{one}, repos...)
	}
	if len(repos) == 0 {
		return nil, badRequest{errors.New("no repo")}
	}
	// Every name is checked, "*" beside them or not: a list holding "*"
	// took any strings (the request's whole body) as names.
	if err := validRepos(tenant, repos); err != nil {
		return nil, badRequest{err}
	}
	if slices.Contains(repos, AllRepos) {
		names, err := s.repoNames(ctx, tenant)
		if err != nil {
			return nil, err
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("tenant %s has no indexed repository: %w", tenant, errNotIndexed)
		}
		if len(names) > maxRepos {
			names = names[:maxRepos]
		}
		return names, nil
	}
	out := slices.Clone(repos)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// headTimeout bounds the read of a HEAD when the server already knows one
// for the repository: past it the known HEAD answers, marked stale.
const headTimeout = 1500 * time.Millisecond

// headReadTimeout bounds the read of a HEAD the server has no other answer
// for (status, a repository not read yet): a store that takes connections
// but never answers (a hung or stopped server) makes a 503 within it, not
// a request held for as long as the store client retries (minutes). A
// variable for tests.
var headReadTimeout = 10 * time.Second

// staleKey carries a request's *staleNote in its context.
type staleKey struct{}

// staleNote collects, for one request, why an answer is stale.
type staleNote struct {
	mu     sync.Mutex
	reason string
}

func withStaleNote(ctx context.Context) (context.Context, *staleNote) {
	n := &staleNote{}
	return context.WithValue(ctx, staleKey{}, n), n
}

func (n *staleNote) get() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.reason
}

// load returns the published segment of a repository. A repository with
// no HEAD gives an error wrapping errNotIndexed. When the store cannot be
// read, the last HEAD this server read for the repository answers (its
// segment is usually in the cache), and the request's stale note says so;
// with no HEAD known the error says the store is unavailable.
func (s *Server) load(ctx context.Context, tenant, repo string) (*segment.Segment, error) {
	key := tenant + "\x00" + repo
	known, haveKnown := s.heads.Load(key)
	if haveKnown && s.HeadsHeard != nil && !s.HeadsHeard() {
		haveKnown = false // it may be of a repository deleted on another server meanwhile
	}
	wait := headReadTimeout
	if haveKnown {
		wait = headTimeout
	}
	hctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	head, err := index.ReadHead(hctx, s.Store, tenant, repo)
	if errors.Is(err, blob.ErrNotFound) {
		s.heads.Delete(key)
		return nil, fmt.Errorf("repository %s/%s is %w (the repos tool and GET /v1/repos list those that are)", tenant, repo, errNotIndexed)
	}
	if err != nil && ctx.Err() == nil {
		if haveKnown {
			head = known.(index.Head)
			seg, serr := s.segs.get(ctx, head.Segment)
			if serr == nil {
				if n, ok := ctx.Value(staleKey{}).(*staleNote); ok {
					n.mu.Lock()
					n.reason = fmt.Sprintf("store unavailable: answered from the last known HEAD of %s/%s (%.12s): %v", tenant, repo, head.Commit, err)
					n.mu.Unlock()
				}
				if s.Metrics != nil {
					s.Metrics.StaleHeads.Inc()
				}
				s.fails.Warn(ctx, "stale\x00"+key, "store unavailable: answering from the last known HEAD",
					"tenant", tenant, "repo", repo, "commit", head.Commit, "cause", err.Error())
				return seg, nil
			}
		}
		return nil, fmt.Errorf("store unavailable: %w", err)
	}
	if err != nil {
		return nil, err
	}
	s.heads.Store(key, head)
	return s.segs.get(ctx, head.Segment)
}

// loadAll loads the segments of repos concurrently, in the order given.
func (s *Server) loadAll(ctx context.Context, tenant string, repos []string) ([]*segment.Segment, error) {
	segs := make([]*segment.Segment, len(repos))
	err := forEach(len(repos), func(i int) error {
		seg, err := s.load(ctx, tenant, repos[i])
		segs[i] = seg
		return err
	})
	return segs, err
}

// forEach runs fn(0..n-1) on up to GOMAXPROCS goroutines and returns the
// first error.
func forEach(n int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	errs := make([]error, n)
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Search is one query over one or more repositories of a tenant.
type Search struct {
	Tenant    string
	Repos     []string // names, or "*" for all of the tenant's
	Repo      string   // one more name beside Repos' (QueryRequest.Repo); "" = none
	Query     string
	Budget    int
	Arms      []string
	NoRoute   bool
	Languages []string
	Session   string // id of the caller's session; "" = none
	// Payer is the bucket whose rate let the request in ("" = Tenant): an
	// operator's call is let in on the operators' bucket, and its cost
	// must not land on the tenant it reads.
	Payer string
}

// Search answers q in process, as POST /v1/query does without a key:
// what `codectx query --data` asks of several repositories.
func (s *Server) Search(ctx context.Context, q Search) (*query.Response, error) {
	s.init()
	return s.search(ctx, q)
}

// search answers a query over several repositories: each is searched on
// its own segment, then the candidates of all are fused into one ranking
// and packed into one budget (query.PackAll). With a session, chunks it
// was already sent are left out and named; a TEMPORAL_HISTORY query ("the
// function we looked at before") instead puts the session's chunks first.
func (s *Server) search(ctx context.Context, q Search) (*query.Response, error) {
	ctx, note := withStaleNote(ctx)
	if len(q.Query) > s.limits.Query {
		return nil, badRequest{fmt.Errorf("query of %d bytes is longer than the %d-byte limit", len(q.Query), s.limits.Query)}
	}
	if len(q.Languages) > maxLanguages {
		// Each repository's search builds a set of them: 90,000 names
		// cost 8 ms per repository, for one request's charge
		// (TestLanguagesBounded).
		return nil, badRequest{fmt.Errorf("%d languages: at most %d per query", len(q.Languages), maxLanguages)}
	}
	for _, l := range q.Languages {
		// A misspelt language ("golang", "Go") restricted the answer to
		// nothing and said so with an empty 200.
		if !slices.Contains(codectx.Languages, codectx.Language(l)) {
			return nil, badRequest{fmt.Errorf("unknown language %q (want some of %s)", l, languageList)}
		}
	}
	repos, err := s.resolveRepos(ctx, q.Tenant, q.Repos, q.Repo)
	if err != nil {
		return nil, err
	}
	// A query costs about what one query per repository costs: the
	// request paid for the first, each reposPerToken more cost one more.
	payer := q.Payer
	if payer == "" {
		payer = q.Tenant
	}
	s.chargeRepos(payer, len(repos))
	var sess *session.Session
	var skey string
	var paid int // session bytes charged for
	if q.Session != "" {
		if skey, err = session.Key(q.Tenant, q.Session); err != nil {
			return nil, badRequest{err}
		}
		unlock, err := s.sessLocks.lock(ctx, skey)
		if err != nil {
			return nil, err
		}
		defer unlock()
		if sess, err = s.Sessions.Load(ctx, skey); err != nil {
			return nil, fmt.Errorf("session store unavailable (a search without a session works): %w", err)
		}
		paid = s.chargeSession(payer, sess.Bytes(), 0)
	}
	segs, err := s.loadAll(ctx, q.Tenant, repos)
	if err != nil {
		return nil, err
	}
	langs := make([]codectx.Language, 0, len(q.Languages))
	for _, l := range q.Languages {
		langs = append(langs, codectx.Language(l))
	}
	req := query.Request{Query: q.Query, Budget: q.Budget, Arms: q.Arms, Route: !q.NoRoute, Languages: langs}
	parts := make([]query.Part, len(segs))
	dn := s.Dense
	if r, ok := dn.(interface{ ForRequest() query.Dense }); ok {
		dn = r.ForRequest() // the query is embedded once for all repositories
	}
	err = forEach(len(segs), func(i int) error {
		rk, err := (&query.Engine{Seg: segs[i], Dense: dn, DegradeDense: true}).Search(ctx, req)
		parts[i] = query.Part{Seg: segs[i], Ranking: rk}
		var arm *query.ArmError
		if err != nil && ctx.Err() == nil && !errors.As(err, &arm) {
			return badRequest{err}
		}
		return err // an arm's failure is the server's (503)
	})
	if err != nil {
		return nil, err
	}
	if len(parts) > 1 {
		// The graph arm across repositories: imports one repository
		// resolves into another (pkg/xrepo).
		query.ExpandAcross(parts, req, crossLinks(s.crossGraph(ctx, q.Tenant, segs)))
	}
	if sess != nil && len(sess.Sent) > 0 {
		if parts[0].Ranking.Class.Trigger == classify.TemporalHistory {
			recall(parts, sess, q.Query)
		} else {
			req.Sent = sess.Sent
		}
	}
	resp := query.PackAll(parts, req, nil)
	s.segs.used(segs)
	if r := note.get(); r != "" {
		resp.Stale, resp.StaleReason = true, r
	}
	if sess != nil {
		seq := 1
		if n := len(sess.Sent); n > 0 {
			seq = sess.Sent[n-1].Seq + 1
		}
		sent := make([]query.Sent, 0, len(resp.Chunks))
		for _, c := range resp.Chunks {
			if c.Granularity != string(pack.Full) {
				// A stub (signature and doc) is not the chunk: recorded,
				// it kept a later query, even one naming it, from
				// sending its body.
				continue
			}
			sent = append(sent, query.Sent{Repo: c.Repo, Commit: c.Commit, Path: c.Path, StartLine: c.StartLine, EndLine: c.EndLine, Symbol: c.Symbol, Tokens: c.Tokens, Seq: seq, Outline: c.Outline})
		}
		// Appended, not saved: the session's other queries may have
		// written it since it was read (an agent's calls at once).
		if sess, err = s.Sessions.Append(ctx, skey, sent); err != nil {
			return nil, err
		}
		s.chargeSession(payer, sess.Bytes(), paid)
	}
	return resp, nil
}

// recallOrder is the order a recall offers a session's chunks in: the
// latest query's first, each query's in the order it ranked them (read
// from the newest chunk back, the last query's weakest came first).
// Chunks written before queries were numbered (Seq 0) come newest first.
func recallOrder(sent []query.Sent) []int {
	idx := make([]int, len(sent))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if sa, sb := sent[a].Seq, sent[b].Seq; sa != sb {
			return cmp.Compare(sb, sa)
		} else if sa == 0 {
			return cmp.Compare(b, a)
		}
		return cmp.Compare(a, b)
	})
	return idx
}

// recall puts the chunks a session was sent at the top of each
// repository's ranking in recallOrder, those whose symbol or path the
// query names before the others. A chunk of an older commit is found
// again by its symbol in the same file.
func recall(parts []query.Part, sess *session.Session, q string) {
	var words []string
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !(r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) {
		if len(w) >= 4 {
			words = append(words, w)
		}
	}
	for i, p := range parts {
		seg := p.Seg
		var picked []fusion.Scored
		seen := map[int]bool{}
		for _, j := range recallOrder(sess.Sent) {
			sent := sess.Sent[j]
			if sent.Repo != seg.Meta.Repo {
				continue
			}
			id, ok := findSent(seg, sent)
			if !ok || seen[id] {
				continue
			}
			seen[id] = true
			score := 1.0 / float64(len(picked)+2) // in recallOrder
			text := strings.ToLower(sent.Symbol + " " + sent.Path)
			for _, w := range words {
				if strings.Contains(text, w) {
					score += 1
					break
				}
			}
			picked = append(picked, fusion.Scored{ID: strconv.Itoa(id), Score: score, Arms: []string{"session"}})
		}
		if len(picked) == 0 {
			continue
		}
		slices.SortStableFunc(picked, func(a, b fusion.Scored) int { return cmp.Compare(b.Score, a.Score) })
		top := 0.0
		if len(p.Ranking.Fused) > 0 {
			top = p.Ranking.Fused[0].Score
		}
		fused := make([]fusion.Scored, 0, len(picked)+len(p.Ranking.Fused))
		for _, s := range picked {
			s.Score += top + 1 // above anything the arms found
			fused = append(fused, s)
		}
		for _, s := range p.Ranking.Fused {
			if !seen[atoi(s.ID)] {
				fused = append(fused, s)
			}
		}
		rk := *p.Ranking
		rk.Fused = fused
		rk.Arms = append([]string{"session"}, rk.Arms...)
		// The history question's commits are of the files the arms
		// found, not of the chunks recalled: a header over unrelated
		// files.
		rk.Commits = nil
		parts[i].Ranking = &rk
	}
}

// findSent finds a sent chunk in a segment: by its lines at the same
// commit, else by its symbol in the same file.
func findSent(seg *segment.Segment, s query.Sent) (int, bool) {
	f, ok := seg.File(s.Path)
	if !ok {
		return 0, false
	}
	for _, id := range f.Chunks {
		c := seg.Chunks[id]
		if seg.Meta.Commit == s.Commit && c.StartLine == s.StartLine && c.EndLine == s.EndLine {
			return id, true
		}
	}
	if s.Symbol == "" {
		return 0, false
	}
	for _, id := range f.Chunks {
		if seg.Chunks[id].Name == s.Symbol {
			return id, true
		}
	}
	return 0, false
}
