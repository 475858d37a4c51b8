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

// Bounds of the cross-repository graph's inputs.
const (
	maxManifests     = 200     // manifest files read per repository
	maxManifestBytes = 1 << 20 // larger manifests are not read
	maxXTenants      = 256     // tenants whose graphs are kept
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
}

type xtenant struct {
	mu     sync.Mutex              // one build at a time per tenant
	graphs map[string]*xrepo.Graph // by the segments built from (a few)
	repos  map[string]xrepoInput   // segment key -> its input
}

type xrepoInput struct {
	repo xrepo.Repo
	used bool // by the graph just built
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
				delete(c.tenants, k)
				break
			}
		}
		t = &xtenant{graphs: map[string]*xrepo.Graph{}, repos: map[string]xrepoInput{}}
		c.tenants[name] = t
	}
	return t
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
	forEach(len(mine), func(i int) error {
		if in, ok := t.repos[segKey(mine[i])]; ok {
			repos[i], whole[i] = in.repo, true
		} else {
			repos[i], whole[i] = s.xrepoRepo(ctx, mine[i])
		}
		return nil
	})
	g := xrepo.Build(repos)
	if slices.Contains(whole, false) {
		return g // a manifest could not be read: answer, but keep nothing
	}
	for i, seg := range mine {
		t.repos[segKey(seg)] = xrepoInput{repo: repos[i], used: true}
	}
	if len(t.graphs) >= maxXGraphs {
		// Start over: drop the graphs and the inputs none of this build used.
		t.graphs = map[string]*xrepo.Graph{}
		for k, in := range t.repos {
			if !in.used {
				delete(t.repos, k)
			}
		}
	}
	for k, in := range t.repos {
		in.used = false
		t.repos[k] = in
	}
	t.graphs[key] = g
	return g
}

// xrepoRepo is what the resolver needs of a segment: each code file's
// module chunk (its name and imports) and the text of its manifests, read
// from the stored file texts by blob hash. A manifest whose text is not
// stored is left out; whole is false when one could not be read (the
// store failed, the request ended), so that the answer is not kept.
func (s *Server) xrepoRepo(ctx context.Context, seg *segment.Segment) (r xrepo.Repo, whole bool) {
	r = xrepo.Repo{Name: seg.Meta.Repo, Manifests: map[string][]byte{}}
	whole = true
	read := 0
	for _, f := range seg.Files {
		if xrepo.IsManifest(f.Path) && read < maxManifests && f.Size <= maxManifestBytes {
			read++
			data, err := index.ReadContent(ctx, s.Store, seg.Meta.Tenant, f.Path, f.Blob)
			switch {
			case err == nil:
				r.Manifests[f.Path] = data
			case !errors.Is(err, blob.ErrNotFound):
				whole = false
			}
		}
		if !codeLanguage(f.Language) || len(f.Chunks) == 0 {
			continue
		}
		c := seg.Chunks[f.Chunks[0]]
		if c.Kind != codectx.KindModule {
			continue
		}
		r.Files = append(r.Files, xrepo.File{Path: f.Path, Language: f.Language, Module: c.Name, Imports: c.Imports})
	}
	return r, whole
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
// the same names over plain HTTP, for the tenant the body names (default
// "default") with a key of scope query.
func graphRoute[In, Out any](s *Server, tool func(*Server, context.Context, Principal, In) (Out, error), tenantOf func(*In) *string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.authenticated(w, r) {
			return
		}
		var in In
		if !readJSON(w, r, s.limits.QueryBody, &in) {
			return
		}
		t := tenantOf(&in)
		if *t == "" {
			*t = index.DefaultTenant
		}
		if !index.ValidTenant(*t) {
			writeError(w, http.StatusBadRequest, fmt.Errorf("invalid tenant %q", *t))
			return
		}
		pay, ok := s.authorizePayer(w, r, *t, keys.Query)
		if !ok {
			return
		}
		// The tool charges the principal's tenant for the repositories it
		// reads: an operator's own, as on MCP.
		p := Principal{Tenant: *t}
		if pay != *t {
			p = Principal{Tenant: pay, Operator: true}
		}
		out, err := tool(s, r.Context(), p, in)
		if err != nil {
			writeError(w, searchCode(err), err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}
