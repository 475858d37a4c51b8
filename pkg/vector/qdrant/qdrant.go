// Package qdrant is the vector.Store driver for a Qdrant server, over its
// gRPC API (github.com/qdrant/go-client). One collection per embedding
// model and dimension, created on first use with cosine distance; the
// tenant is a payload field with a keyword index marked is_tenant (as
// Qdrant's multitenancy guide says), and every search, listing and delete
// carries a tenant-and-repository filter, applied by the server.
package qdrant

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"codectx/pkg/vector"

	qc "github.com/qdrant/go-client/qdrant"
)

// Env is the variable naming the Qdrant gRPC endpoint (host:port).
const Env = "CODECTX_QDRANT"

// EnvAPIKey is the variable holding Qdrant's API key, if it needs one.
const EnvAPIKey = "CODECTX_QDRANT_API_KEY"

// Payload field names.
const (
	fieldTenant = "tenant"
	fieldRepo   = "repo"
	fieldHash   = "hash"
	fieldPath   = "path"
)

// Store is a vector.Store on a Qdrant server.
type Store struct {
	c *qc.Client

	mu    sync.Mutex
	ready map[string]bool // collections known to exist with their indexes
}

// Open connects to the Qdrant gRPC endpoint addr ("host:port",
// "http://host:port" or "https://host:port"); an empty addr reads Env.
// The API key, if any, comes from EnvAPIKey.
func Open(addr string) (*Store, error) {
	if addr == "" {
		addr = os.Getenv(Env)
	}
	if addr == "" {
		return nil, fmt.Errorf("vector/qdrant: no address (set $%s)", Env)
	}
	cfg := &qc.Config{APIKey: os.Getenv(EnvAPIKey), SkipCompatibilityCheck: true, PoolSize: 1}
	hostPort := addr
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		hostPort, cfg.UseTLS = u.Host, u.Scheme == "https"
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return nil, fmt.Errorf("vector/qdrant: address %q: %w", addr, err)
	}
	if cfg.Port, err = strconv.Atoi(port); err != nil {
		return nil, fmt.Errorf("vector/qdrant: address %q: bad port", addr)
	}
	cfg.Host = host
	c, err := qc.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("vector/qdrant: connect %s: %w", addr, err)
	}
	return &Store{c: c, ready: map[string]bool{}}, nil
}

// Health checks that the server answers.
func (s *Store) Health(ctx context.Context) error {
	_, err := s.c.HealthCheck(ctx)
	return err
}

// ensure creates the collection and its payload indexes unless they exist.
func (s *Store) ensure(ctx context.Context, c vector.Collection) (string, error) {
	name := c.Name()
	s.mu.Lock()
	ok := s.ready[name]
	s.mu.Unlock()
	if ok {
		return name, nil
	}
	exists, err := s.c.CollectionExists(ctx, name)
	if err != nil {
		return name, fmt.Errorf("vector/qdrant: collection %s: %w", name, err)
	}
	if !exists {
		m, payloadM := uint64(0), uint64(16)
		err := s.c.CreateCollection(ctx, &qc.CreateCollection{
			CollectionName: name,
			VectorsConfig:  qc.NewVectorsConfig(&qc.VectorParams{Size: uint64(c.Dim), Distance: qc.Distance_Cosine}),
			// Multitenancy: no global HNSW graph, one per tenant (payload_m).
			HnswConfig: &qc.HnswConfigDiff{M: &m, PayloadM: &payloadM},
		})
		if err != nil && !strings.Contains(err.Error(), "already exists") {
			return name, fmt.Errorf("vector/qdrant: create collection %s: %w", name, err)
		}
	} else {
		info, err := s.c.GetCollectionInfo(ctx, name)
		if err != nil {
			return name, fmt.Errorf("vector/qdrant: collection %s: %w", name, err)
		}
		if p := info.GetConfig().GetParams().GetVectorsConfig().GetParams(); p != nil && int(p.GetSize()) != c.Dim {
			return name, fmt.Errorf("%w: collection %s holds %d-dimensional vectors", vector.ErrDim, name, p.GetSize())
		}
	}
	wait, tenant := true, true
	kw := qc.FieldType_FieldTypeKeyword
	for _, f := range []struct {
		name   string
		params *qc.KeywordIndexParams
	}{{fieldTenant, &qc.KeywordIndexParams{IsTenant: &tenant}}, {fieldRepo, &qc.KeywordIndexParams{}}, {fieldHash, &qc.KeywordIndexParams{}}} {
		_, err := s.c.CreateFieldIndex(ctx, &qc.CreateFieldIndexCollection{
			CollectionName: name, Wait: &wait, FieldName: f.name, FieldType: &kw,
			FieldIndexParams: qc.NewPayloadIndexParamsKeyword(f.params),
		})
		if err != nil {
			return name, fmt.Errorf("vector/qdrant: index %s of %s: %w", f.name, name, err)
		}
	}
	s.mu.Lock()
	s.ready[name] = true
	s.mu.Unlock()
	return name, nil
}

// filter is the server-side filter of f.
func filter(f vector.Filter) *qc.Filter {
	return &qc.Filter{Must: []*qc.Condition{
		qc.NewMatchKeyword(fieldTenant, f.Tenant),
		qc.NewMatchKeywords(fieldRepo, f.Repos...),
	}}
}

// upsertBatch bounds the points of one request.
const upsertBatch = 256

// Upsert implements vector.Store.
func (s *Store) Upsert(ctx context.Context, c vector.Collection, pts []vector.Point) error {
	if err := vector.CheckPoints(c, pts); err != nil {
		return err
	}
	if len(pts) == 0 {
		return nil
	}
	name, err := s.ensure(ctx, c)
	if err != nil {
		return err
	}
	wait := true
	for len(pts) > 0 {
		n := min(upsertBatch, len(pts))
		batch := make([]*qc.PointStruct, 0, n)
		for _, p := range pts[:n] {
			batch = append(batch, &qc.PointStruct{
				Id:      qc.NewID(p.ID),
				Vectors: qc.NewVectorsDense(p.Vector),
				Payload: qc.NewValueMap(map[string]any{fieldTenant: p.Payload.Tenant, fieldRepo: p.Payload.Repo, fieldHash: p.Payload.Hash, fieldPath: p.Payload.Path}),
			})
		}
		if _, err := s.c.Upsert(ctx, &qc.UpsertPoints{CollectionName: name, Wait: &wait, Points: batch}); err != nil {
			return fmt.Errorf("vector/qdrant: upsert into %s: %w", name, err)
		}
		pts = pts[n:]
	}
	return nil
}

func payload(m map[string]*qc.Value) vector.Payload {
	return vector.Payload{
		Tenant: m[fieldTenant].GetStringValue(), Repo: m[fieldRepo].GetStringValue(),
		Hash: m[fieldHash].GetStringValue(), Path: m[fieldPath].GetStringValue(),
	}
}

// Search implements vector.Store.
func (s *Store) Search(ctx context.Context, c vector.Collection, q []float32, k int, f vector.Filter) ([]vector.Hit, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	if len(q) != c.Dim {
		return nil, fmt.Errorf("%w: query has %d elements, collection %s wants %d", vector.ErrDim, len(q), c.Name(), c.Dim)
	}
	if k <= 0 {
		return nil, nil
	}
	name, err := s.ensure(ctx, c)
	if err != nil {
		return nil, err
	}
	limit := uint64(k)
	exact := true // exact search: scores equal the embedded driver's
	res, err := s.c.Query(ctx, &qc.QueryPoints{
		CollectionName: name, Query: qc.NewQueryDense(q), Filter: filter(f), Limit: &limit,
		WithPayload: qc.NewWithPayload(true), Params: &qc.SearchParams{Exact: &exact},
	})
	if err != nil {
		return nil, fmt.Errorf("vector/qdrant: search %s: %w", name, err)
	}
	hits := make([]vector.Hit, 0, len(res))
	for _, p := range res {
		hits = append(hits, vector.Hit{ID: p.GetId().GetUuid(), Score: p.GetScore(), Payload: payload(p.GetPayload())})
	}
	return hits, nil
}

// List implements vector.Store, scrolling page by page.
func (s *Store) List(ctx context.Context, c vector.Collection, f vector.Filter) ([]vector.Point, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	name, err := s.ensure(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []vector.Point
	limit := uint32(256)
	var offset *qc.PointId
	for {
		pts, next, err := s.c.ScrollAndOffset(ctx, &qc.ScrollPoints{
			CollectionName: name, Filter: filter(f), Limit: &limit, Offset: offset,
			WithPayload: qc.NewWithPayload(true),
		})
		if err != nil {
			return nil, fmt.Errorf("vector/qdrant: scroll %s: %w", name, err)
		}
		for _, p := range pts {
			out = append(out, vector.Point{ID: p.GetId().GetUuid(), Payload: payload(p.GetPayload())})
		}
		if next == nil || len(pts) == 0 {
			return out, nil
		}
		offset = next
	}
}

// Delete implements vector.Store. Ids are deleted only inside f: the
// filter and the id list are one server-side condition.
func (s *Store) Delete(ctx context.Context, c vector.Collection, f vector.Filter, ids []string) error {
	if err := f.Check(); err != nil {
		return err
	}
	if ids != nil && len(ids) == 0 {
		return nil
	}
	name, err := s.ensure(ctx, c)
	if err != nil {
		return err
	}
	flt := filter(f)
	if ids != nil {
		pids := make([]*qc.PointId, len(ids))
		for i, id := range ids {
			pids[i] = qc.NewID(id)
		}
		flt.Must = append(flt.Must, qc.NewHasID(pids...))
	}
	wait := true
	if _, err := s.c.Delete(ctx, &qc.DeletePoints{CollectionName: name, Wait: &wait, Points: qc.NewPointsSelectorFilter(flt)}); err != nil {
		return fmt.Errorf("vector/qdrant: delete from %s: %w", name, err)
	}
	return nil
}

// DeleteRepo implements vector.Store: a filtered delete of tenant/repo in
// every collection of codectx on the server.
func (s *Store) DeleteRepo(ctx context.Context, tenant, repo string) error {
	if tenant == "" || repo == "" {
		return vector.ErrFilter
	}
	names, err := s.c.ListCollections(ctx)
	if err != nil {
		return fmt.Errorf("vector/qdrant: list collections: %w", err)
	}
	wait := true
	flt := filter(vector.Filter{Tenant: tenant, Repos: []string{repo}})
	for _, name := range names {
		if !strings.HasPrefix(name, vector.CollectionPrefix) {
			continue
		}
		if _, err := s.c.Delete(ctx, &qc.DeletePoints{CollectionName: name, Wait: &wait, Points: qc.NewPointsSelectorFilter(flt)}); err != nil {
			return fmt.Errorf("vector/qdrant: delete %s/%s from %s: %w", tenant, repo, name, err)
		}
	}
	return nil
}

// Collections implements vector.Store: the server's collections of
// codectx.
func (s *Store) Collections(ctx context.Context) ([]string, error) {
	names, err := s.c.ListCollections(ctx)
	if err != nil {
		return nil, fmt.Errorf("vector/qdrant: list collections: %w", err)
	}
	var out []string
	for _, name := range names {
		if vector.CheckName(name) == nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Drop implements vector.Store: it deletes the collection on the server.
func (s *Store) Drop(ctx context.Context, name string) error {
	if err := vector.CheckName(name); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.ready, name)
	s.mu.Unlock()
	exists, err := s.c.CollectionExists(ctx, name)
	if err != nil {
		return fmt.Errorf("vector/qdrant: collection %s: %w", name, err)
	}
	if !exists {
		return nil
	}
	if err := s.c.DeleteCollection(ctx, name); err != nil {
		return fmt.Errorf("vector/qdrant: drop collection %s: %w", name, err)
	}
	return nil
}

// Close implements vector.Store.
func (s *Store) Close() error {
	if err := s.c.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

var _ vector.Store = (*Store)(nil)
