// Package vector is the port for vector stores: points (an id, a vector
// and a small payload naming the tenant, repository and chunk) grouped in
// collections, one per embedding model and dimension, searched by cosine
// similarity. Every search and every delete is scoped by a Filter naming
// the tenant and its repositories, so no query crosses tenants. Drivers:
// vector/local (exact search in process, persisted in the blob store) and
// vector/qdrant (a Qdrant server). vector/vectortest is the conformance
// suite both pass.
package vector

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors returned (wrapped) by every driver.
var (
	ErrDim    = errors.New("vector: dimension mismatch")
	ErrFilter = errors.New("vector: filter needs a tenant and at least one repository")
	ErrPoint  = errors.New("vector: invalid point")
)

// Collection names the vectors of one embedding model at one dimension:
// vectors of two models never mix.
type Collection struct {
	Model string
	Dim   int
}

// CollectionPrefix begins the name of every collection.
const CollectionPrefix = "codectx_"

// Name is the collection's name in a store: letters, digits, '_' and '-'.
func (c Collection) Name() string {
	var b strings.Builder
	b.WriteString(CollectionPrefix)
	for _, r := range strings.ToLower(c.Model) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > 80 {
		// Long model names keep a readable head and a hash of the whole.
		h := sha256.Sum256([]byte(c.Model))
		name = name[:60] + "_" + hex.EncodeToString(h[:6])
	}
	return name + "_" + strconv.Itoa(c.Dim)
}

// Payload is what a point says about its chunk.
type Payload struct {
	Tenant string `json:"tenant"`
	Repo   string `json:"repo"`
	Hash   string `json:"hash"`           // chunk content hash (codectx.HashText of its body)
	Path   string `json:"path,omitempty"` // a path the chunk was seen at
}

// Point is one stored vector.
type Point struct {
	ID      string // a PointID
	Vector  []float32
	Payload Payload
}

// PointID is the id of the point of a chunk hash in tenant/repo: a UUID
// derived from the three, as Qdrant requires, so that upserting a
// snapshot twice writes the same points.
func PointID(tenant, repo, hash string) string {
	h := sha256.Sum256([]byte(tenant + "\x00" + repo + "\x00" + hash))
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// Filter scopes a search, a listing or a delete to one tenant's
// repositories. Both are required: a store never answers across tenants.
type Filter struct {
	Tenant string
	Repos  []string
}

// Check returns ErrFilter unless f names a tenant and repositories.
func (f Filter) Check() error {
	if f.Tenant == "" || len(f.Repos) == 0 {
		return ErrFilter
	}
	for _, r := range f.Repos {
		if r == "" {
			return ErrFilter
		}
	}
	return nil
}

// Match reports whether p lies inside f.
func (f Filter) Match(p Payload) bool {
	if p.Tenant != f.Tenant {
		return false
	}
	for _, r := range f.Repos {
		if p.Repo == r {
			return true
		}
	}
	return false
}

// Hit is one search result.
type Hit struct {
	ID      string
	Score   float32 // cosine similarity, higher is closer
	Payload Payload
}

// Store is a vector store. Implementations are safe for concurrent use.
type Store interface {
	// Upsert writes points, replacing points with the same id. Every
	// vector has c.Dim elements (ErrDim) and every payload a tenant and
	// a repository (ErrPoint).
	Upsert(ctx context.Context, c Collection, pts []Point) error
	// Search returns the k points inside f closest to q, best first.
	Search(ctx context.Context, c Collection, q []float32, k int, f Filter) ([]Hit, error)
	// List returns the ids and payloads (no vectors) of the points inside f.
	List(ctx context.Context, c Collection, f Filter) ([]Point, error)
	// Delete removes the points inside f with the given ids; ids == nil
	// removes every point inside f.
	Delete(ctx context.Context, c Collection, f Filter, ids []string) error
	// DeleteRepo removes every point of tenant/repo in every collection
	// of the store (all models): the repository is gone. Both names are
	// required (ErrFilter).
	DeleteRepo(ctx context.Context, tenant, repo string) error
	// Collections names the collections of codectx in the store (each a
	// Collection.Name()), sorted.
	Collections(ctx context.Context) ([]string, error)
	// Drop removes the collection named name with every point in it, of
	// every tenant: the vectors of a model no longer used (codectx gc).
	// A collection that does not exist is no error; a name that is not
	// a collection of codectx is (ErrCollection).
	Drop(ctx context.Context, name string) error
	// Close releases the store's connections.
	Close() error
}

// ErrCollection is returned (wrapped) by Drop for a name that is not a
// collection of codectx.
var ErrCollection = errors.New("vector: not a collection of codectx")

// CheckName returns ErrCollection unless name is one Collection.Name can
// give.
func CheckName(name string) error {
	rest, ok := strings.CutPrefix(name, CollectionPrefix)
	if !ok || rest == "" || len(name) > 100 || strings.Trim(rest, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		return fmt.Errorf("%w: %q", ErrCollection, name)
	}
	return nil
}

// CheckPoints validates points against c before an upsert.
func CheckPoints(c Collection, pts []Point) error {
	for _, p := range pts {
		if len(p.Vector) != c.Dim {
			return fmt.Errorf("%w: point %s has %d elements, collection %s wants %d", ErrDim, p.ID, len(p.Vector), c.Name(), c.Dim)
		}
		if p.ID == "" || p.Payload.Tenant == "" || p.Payload.Repo == "" {
			return fmt.Errorf("%w: %q needs an id, a tenant and a repository", ErrPoint, p.ID)
		}
	}
	return nil
}
