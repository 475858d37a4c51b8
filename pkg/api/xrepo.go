package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"codectx/pkg/blob"
	"codectx/pkg/codectx"
	"codectx/pkg/index"
	"codectx/pkg/keys"
	"codectx/pkg/query"
	"codectx/pkg/segment"
	"codectx/pkg/xrepo"
)

// Bounds of the cross-repository graph's inputs. The manifests are read
// whole into the heap and kept with the tenant's graphs, outside the
// segment cache's budget: 48 package.json files of 1 MiB (one blob, so a
// small push, and a second name of the repository reuses every parse)
// kept 96 MiB after one query over two names, and a tenant holds
// thousands of names (TestSecurityCrossRepoManifestBytes).
const (
	maxManifests     = 200     // manifest files read per repository
	maxManifestBytes = 1 << 20 // larger manifests are not read
	maxXTenants      = 256     // tenants whose graphs are kept
	// maxRepoManifestBytes bounds the manifest bytes read per repository,
	// in the order of its files: a repository's real manifests weigh
	// kilobytes each.
	maxRepoManifestBytes = 4 << 20
	// maxGraphManifestBytes bounds the manifest bytes one graph reads, and
	// what a tenant's cache keeps of its inputs (their manifests, and
	// their code files' paths, module names and imports): past it the
	// graph is built from what was read, and kept for no later query.
	maxGraphManifestBytes = 64 << 20
	// maxXBytes bounds what the caches of all tenants keep together (each
	// at most maxGraphManifestBytes and a build's overshoot): past it the
	// largest other tenant's cache is dropped, so that many tenants at
	// their bound hold no more than this, and a tenant filling its own
	// cache evicts the greediest of the others first.
	maxXBytes = 256 << 20
)

// xrepoCache keeps, per tenant, cross-repository import graphs
// (pkg/xrepo) and what they are built from: each repository's code files
// and manifests, keyed by the segment its HEAD names (repository, commit,
// build time). A graph is keyed by the segments it was built from, so a
// reindexed repository gives a new graph, re-reading only that
// repository. The cache is per tenant and its inputs are the segments a
// request loaded for its own tenant: a graph never sees another tenant's
// repositories.
type xrepoCache struct {
	mu      sync.Mutex
	tenants map[string]*xtenant
	bytes   int64 // the sum of the tenants' counted
}

type xtenant struct {
	mu     sync.Mutex              // one build at a time per tenant
	graphs map[string]*xrepo.Graph // by the segments built from (a few)
	repos  map[string]xrepoInput   // segment key -> its input
	bytes  int64                   // of the inputs in repos (xrepoInput.bytes)
	builds int                     // graphs built since the cache started over, kept or not
	// counted is bytes as last added to xrepoCache.bytes (under
	// xrepoCache.mu, not mu).
	counted int64
}

type xrepoInput struct {
	repo  xrepo.Repo
	bytes int64 // of its manifests, and its files' paths, names and imports
	used  bool  // by the graph just built
}

// maxXGraphs bounds the graphs kept per tenant (one per distinct set of
// repositories queried together).
const maxXGraphs = 8

func (c *xrepoCache) tenant(name string) *xtenant {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tenants == nil {
		c.tenants = map[string]*xtenant{}
	}
	t := c.tenants[name]
	if t == nil {
		if len(c.tenants) >= maxXTenants {
			for k := range c.tenants { // forget one: it is rebuilt on its next use
				c.drop(k)
				break
			}
		}
		t = &xtenant{graphs: map[string]*xrepo.Graph{}, repos: map[string]xrepoInput{}}
		c.tenants[name] = t
	}
	return t
}

// drop forgets tenant name's cache (c.mu held). A build of it under way
// ends as usual; its account finds it gone.
func (c *xrepoCache) drop(name string) {
	c.bytes -= c.tenants[name].counted
	delete(c.tenants, name)
}

// account records t's bytes in the total of all tenants after a build
// (t.mu held), and drops the largest other tenants' caches while the total
// is past maxXBytes.
func (c *xrepoCache) account(name string, t *xtenant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tenants[name] != t {
		return // dropped during the build: what it keeps goes with it
	}
	c.bytes += t.bytes - t.counted
	t.counted = t.bytes
	for c.bytes > maxXBytes {
		big := ""
		for k, o := range c.tenants {
			if o != t && (big == "" || o.counted > c.tenants[big].counted) {
				big = k
			}
		}
		if big == "" {
			return
		}
		c.drop(big)
	}
}

func segKey(seg *segment.Segment) string {
	return seg.Meta.Repo + "\x00" + seg.Meta.Commit + "\x00" + seg.Meta.Built
}

// crossGraph returns the cross-repository import graph of the given
// segments of tenant's repositories (nil for none). Links join
// only these repositories: what a query does not search, it does not
// reach.
func (s *Server) crossGraph(ctx context.Context, tenant string, segs []*segment.Segment) *xrepo.Graph {
	var mine []*segment.Segment
	for _, seg := range segs {
		if seg != nil && (seg.Meta.Tenant == "" || seg.Meta.Tenant == tenant) {
			mine = append(mine, seg)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	keys := make([]string, len(mine))
	for i, seg := range mine {
		keys[i] = segKey(seg)
	}
	slices.Sort(keys)
	key := strings.Join(keys, "\x00\x00")

	t := s.xrepo.tenant(tenant)
	t.mu.Lock()
	defer t.mu.Unlock()
	if g, ok := t.graphs[key]; ok {
		return g
	}
	repos := make([]xrepo.Repo, len(mine))
	whole := make([]bool, len(mine))
	budget := &manifestBudget{left: maxGraphManifestBytes}
	for i, seg := range mine {
		if in, ok := t.repos[segKey(seg)]; ok {
			budget.take(in.repo.ManifestBytes()) // kept inputs count as read
			repos[i], whole[i] = in.repo, true
		}
	}
	forEach(len(mine), func(i int) error {
		if !whole[i] {
			repos[i], whole[i] = s.xrepoRepo(ctx, mine[i], budget)
		}
		return nil
	})
	g := xrepo.Build(repos)
	// Keep each input read whole, so that a repository past the budget
	// does not make every later query read the others again; they count
	// against the budget then, and what is past it is not read at all.
	for i, seg := range mine {
		if !whole[i] {
			continue
		}
		k := segKey(seg)
		n := inputBytes(repos[i])
		t.bytes -= t.repos[k].bytes
		t.repos[k] = xrepoInput{repo: repos[i], bytes: n, used: true}
		t.bytes += n
	}
	partial := slices.Contains(whole, false) // a manifest not read, or past the budget: keep no graph
	t.builds++
	if t.builds > maxXGraphs || t.bytes > maxGraphManifestBytes {
		// Start over: drop the graphs and the inputs none of this build
		// used. Every build counts, kept or not: builds past the budget
		// keep no graph but keep their inputs, and a tenant's queries
		// over ever new repositories would add inputs without end.
		t.builds = 1
		t.graphs = map[string]*xrepo.Graph{}
		for k, in := range t.repos {
			if !in.used {
				t.bytes -= in.bytes
				delete(t.repos, k)
			}
		}
	}
	for k, in := range t.repos {
		in.used = false
		t.repos[k] = in
	}
	if !partial {
		t.graphs[key] = g
	}
	s.xrepo.account(tenant, t)
	return g
}

// manifestBudget is what one graph may still read of manifests, shared
// by the repositories read at once.
type manifestBudget struct {
	mu   sync.Mutex
	left int64
}

// take reserves n bytes and reports whether they were left.
func (b *manifestBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.left {
		return false
	}
	b.left -= n
	return true
}

// xrepoRepo is what the resolver needs of a segment: each code file's
// module chunk (its name and imports) and the text of its manifests, read
// from the stored file texts by blob hash, at most maxRepoManifestBytes
// of them, taken from the graph's budget. A manifest whose text is not
// stored, or past the repository's bound, is left out; whole is false
// when one could not be read (the store failed, the request ended) or
// the graph's budget was spent, so that the answer is not kept; the
// code files are all there either way. Its strings are copies: a kept
// input holds no segment's memory.
func (s *Server) xrepoRepo(ctx context.Context, seg *segment.Segment, budget *manifestBudget) (r xrepo.Repo, whole bool) {
	r = xrepo.Repo{Name: strings.Clone(seg.Meta.Repo), Manifests: map[string][]byte{}}
	whole = true
	read := 0
	var size int64
	for _, f := range seg.Files {
		if whole && xrepo.IsManifest(f.Path) && read < maxManifests && f.Size <= maxManifestBytes && size+f.Size <= maxRepoManifestBytes {
			if budget.take(f.Size) {
				read++
				size += f.Size
				data, err := index.ReadContent(ctx, s.Store, seg.Meta.Tenant, f.Path, f.Blob)
				switch {
				case err == nil:
					r.Manifests[strings.Clone(f.Path)] = data
				case !errors.Is(err, blob.ErrNotFound):
					whole = false
				}
			} else {
				whole = false // no more manifests; the code files still count
			}
		}
		if !codeLanguage(f.Language) || len(f.Chunks) == 0 {
			continue
		}
		c := seg.Chunks[f.Chunks[0]]
		if c.Kind != codectx.KindModule {
			continue
		}
		imports := make([]string, len(c.Imports))
		for i, im := range c.Imports {
			imports[i] = strings.Clone(im)
		}
		r.Files = append(r.Files, xrepo.File{Path: strings.Clone(f.Path), Language: f.Language, Module: strings.Clone(c.Name), Imports: imports})
	}
	return r, whole
}

// inputBytes is about what a kept input holds: its manifests, and its code
// files' paths, module names and imports.
func inputBytes(r xrepo.Repo) int64 {
	n := r.ManifestBytes()
	for _, f := range r.Files {
		n += int64(len(f.Path) + len(f.Module) + 16)
		for _, im := range f.Imports {
			n += int64(len(im) + 16)
		}
	}
	return n
}

func codeLanguage(l codectx.Language) bool {
	switch l {
	case codectx.Go, codectx.Python, codectx.TypeScript, codectx.TSX, codectx.JavaScript, codectx.Java, codectx.Rust:
		return true
	}
	return false
}

// crossLinks adapts a graph to query.ExpandAcross: both directions.
func crossLinks(g *xrepo.Graph) query.CrossLinks {
	if g == nil {
		return nil
	}
	return func(repo, path string) []query.FileRef {
		var out []query.FileRef
		for _, l := range g.Imports(repo, path) {
			out = append(out, query.FileRef{Repo: l.To.Repo, Path: l.To.Path})
		}
		for _, l := range g.Importers(repo, path) {
			out = append(out, query.FileRef{Repo: l.From.Repo, Path: l.From.Path, Importer: true})
		}
		return out
	}
}

// graphRoute serves POST /v1/impact and /v1/references: the MCP tools of
// the same names over plain HTTP, for the tenant the body names (default:
// tenantOr's) with a key of scope query.
func graphRoute[In, Out any](s *Server, tool func(*Server, context.Context, Principal, In) (Out, error), tenantOf func(*In) *string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		k, ok := s.admit(w, r)
		if !ok {
			return
		}
		var in In
		if !readJSON(w, r, s.limits.QueryBody, &in) {
			return
		}
		t := tenantOf(&in)
		*t = s.tenantOr(r, *t)
		if !index.ValidTenant(*t) {
			writeError(w, http.StatusBadRequest, fmt.Errorf("invalid tenant %q", *t))
			return
		}
		pay, ok := s.authorizePayer(w, r, k, *t, keys.Query)
		if !ok {
			return
		}
		// The tool charges the principal's payer for the repositories it
		// reads: an operator's own bucket, as on MCP.
		p := Principal{Tenant: *t, Payer: pay, Operator: s.keysOn() && k.Tenant == AllTenants}
		out, err := tool(s, r.Context(), p, in)
		if err != nil {
			writeError(w, searchCode(err), err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}
