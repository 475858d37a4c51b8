// Package dense joins the embedder and the vector store to the index: it
// says what text of a chunk is embedded, caches vectors in the blob store
// by (model, text hash) so that an unchanged chunk is embedded once however
// many snapshots and repositories contain it, writes a snapshot's chunks
// as points of its tenant and repository, prunes the points no published
// snapshot references, and is the query engine's dense arm (query.Dense).
package dense

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"codectx/pkg/blob"
	"codectx/pkg/codectx"
	"codectx/pkg/embed"
	"codectx/pkg/vector"
)

// MaxChars bounds the text of one chunk sent to the embedder; the driver
// truncates further to the model's token limit. The head is kept: the
// name, signature and doc come first.
const MaxChars = 2048

// Text is what is embedded for a chunk: its qualified name, signature and
// doc (each unless the body already holds it) and its body, truncated to
// MaxChars bytes at a character boundary.
func Text(c codectx.Chunk) string {
	var b strings.Builder
	for _, part := range []string{c.Name, c.Signature, c.Doc} {
		if part != "" && !strings.Contains(c.Body, part) {
			b.WriteString(part)
			b.WriteByte('\n')
		}
	}
	b.WriteString(c.Body)
	return codectx.Clip(b.String(), MaxChars)
}

// Hash is the cache and point key of a chunk: the content hash of its Text.
func Hash(c codectx.Chunk) string { return hashOf(Text(c)) }

func hashOf(text string) string { return codectx.HashText(text) }

// Collection is the vector collection of an embedder.
func Collection(e embed.Embedder) vector.Collection {
	return vector.Collection{Model: e.Model(), Dim: e.Dim()}
}

// CacheKey is where the vector of a text hash is cached for a collection
// and tenant. Like the parse cache it is per tenant, shared by the
// tenant's repositories only: a reuse count never tells one tenant that a
// text exists in another's code. Tenant names hold no "/" and no "@".
func CacheKey(c vector.Collection, tenant, hash string) string {
	return "embeddings/" + c.Name() + "/@" + tenant + "/" + hash[:2] + "/" + hash
}

func encodeVec(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

func decodeVec(data []byte, dim int) ([]float32, error) {
	if len(data) != 4*dim {
		return nil, fmt.Errorf("%w: cached vector of %d bytes, want %d", vector.ErrDim, len(data), 4*dim)
	}
	v := make([]float32, dim)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return v, nil
}

// ReadVector returns the cached vector of hash.
func ReadVector(ctx context.Context, store *blob.Bucket, c vector.Collection, tenant, hash string) ([]float32, error) {
	data, err := store.Get(ctx, CacheKey(c, tenant, hash))
	if err != nil {
		return nil, err
	}
	return decodeVec(data, c.Dim)
}

// parallel runs f(i) for i in [0, n) on a few goroutines and joins the errors.
func parallel(ctx context.Context, n int, f func(i int) error) error {
	errs := make([]error, n)
	var mu sync.Mutex
	next := 0
	var wg sync.WaitGroup
	for range min(8, n) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n || ctx.Err() != nil {
					return
				}
				errs[i] = f(i)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// Missing reports, per hash, whether its vector is not cached.
func Missing(ctx context.Context, store *blob.Bucket, c vector.Collection, tenant string, hashes []string) ([]bool, error) {
	out := make([]bool, len(hashes))
	err := parallel(ctx, len(hashes), func(i int) error {
		ok, err := store.Exists(ctx, CacheKey(c, tenant, hashes[i]))
		out[i] = !ok
		return err
	})
	return out, err
}

// EmbedBatch bounds the texts of one call to the embedder.
const EmbedBatch = 32

// EmbedAndCache embeds the texts whose hash has no cached vector yet and
// caches the vectors; hashes[i] is the hash of texts[i]. It returns how
// many it embedded. A redelivered job embeds only what is still missing.
func EmbedAndCache(ctx context.Context, store *blob.Bucket, e embed.Embedder, tenant string, hashes, texts []string) (int, error) {
	c := Collection(e)
	miss, err := Missing(ctx, store, c, tenant, hashes)
	if err != nil {
		return 0, err
	}
	var hs, ts []string
	seen := map[string]bool{}
	for i, m := range miss {
		if m && !seen[hashes[i]] {
			seen[hashes[i]] = true
			hs, ts = append(hs, hashes[i]), append(ts, texts[i])
		}
	}
	done, rejected := 0, 0
	var rejectErr error
	for lo := 0; lo < len(ts); lo += EmbedBatch {
		hi := min(lo+EmbedBatch, len(ts))
		vecs, rej, err := embedSplitting(ctx, e, ts[lo:hi])
		if err != nil {
			return done, fmt.Errorf("dense: embed: %w", err)
		}
		if rej != nil {
			rejected += len(ts[lo:hi]) - countVecs(vecs)
			rejectErr = rej
		}
		err = parallel(ctx, len(vecs), func(j int) error {
			if vecs[j] == nil {
				return nil // rejected by the embedder: no vector
			}
			if len(vecs[j]) != c.Dim {
				return fmt.Errorf("dense: %w: %d elements, model %s announced %d", embed.ErrDim, len(vecs[j]), c.Model, c.Dim)
			}
			return store.Put(ctx, CacheKey(c, tenant, hs[lo+j]), encodeVec(vecs[j]))
		})
		if err != nil {
			return done, err
		}
		done += countVecs(vecs)
	}
	if rejected > 0 {
		// The others are cached: the caller's retry would get the same answer.
		return done, fmt.Errorf("dense: embedder rejected %d of %d texts, left without a vector: %w", rejected, len(ts), rejectErr)
	}
	return done, nil
}

func countVecs(vecs [][]float32) int {
	n := 0
	for _, v := range vecs {
		if v != nil {
			n++
		}
	}
	return n
}

// embedSplitting embeds texts; when the embedder rejects a batch
// (embed.ErrRejected: one text too long for its server, say), it embeds
// the halves apart, down to single texts, so that only the texts it
// rejects alone are left without a vector (nil), and returns the
// rejection as rej.
func embedSplitting(ctx context.Context, e embed.Embedder, texts []string) (vecs [][]float32, rej error, err error) {
	vecs, err = e.Embed(ctx, texts, embed.Passage)
	if err == nil && len(vecs) != len(texts) {
		return nil, nil, fmt.Errorf("embedder returned %d vectors for %d texts", len(vecs), len(texts))
	}
	if err == nil || !errors.Is(err, embed.ErrRejected) || ctx.Err() != nil {
		return vecs, nil, err
	}
	if len(texts) == 1 {
		return [][]float32{nil}, err, nil
	}
	mid := len(texts) / 2
	a, rejA, err := embedSplitting(ctx, e, texts[:mid])
	if err != nil {
		return nil, nil, err
	}
	b, rejB, err := embedSplitting(ctx, e, texts[mid:])
	if err != nil {
		return nil, nil, err
	}
	if rej = rejA; rej == nil {
		rej = rejB
	}
	return append(a, b...), rej, nil
}

// Point is a chunk of a snapshot to hold as a point: its hash and a path.
type Point struct {
	Hash string `json:"hash"`
	Path string `json:"path"`
}

// StoreResult counts what Upsert did.
type StoreResult struct {
	Points  int // points the snapshot needs
	Added   int // written now (the rest were stored by an earlier snapshot)
	Missing int // hashes without a cached vector (their embedding failed)
}

// Stored returns the IDs of the points the vector store holds for
// tenant/repo in c, from one listing.
func Stored(ctx context.Context, vs vector.Store, c vector.Collection, tenant, repo string) (map[string]bool, error) {
	have, err := vs.List(ctx, c, vector.Filter{Tenant: tenant, Repos: []string{repo}})
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(have))
	for _, p := range have {
		ids[p.ID] = true
	}
	return ids, nil
}

// Upsert makes the vector store hold a point in tenant/repo for each of
// pts, reading the vectors from the cache. Points already stored are not
// rewritten.
func Upsert(ctx context.Context, store *blob.Bucket, vs vector.Store, c vector.Collection, tenant, repo string, pts []Point) (StoreResult, error) {
	res := StoreResult{Points: len(pts)}
	stored, err := Stored(ctx, vs, c, tenant, repo)
	if err != nil {
		return res, err
	}
	var todo []Point
	for _, p := range pts {
		if id := vector.PointID(tenant, repo, p.Hash); !stored[id] {
			stored[id] = true
			todo = append(todo, p)
		}
	}
	const batch = 512
	for lo := 0; lo < len(todo); lo += batch {
		part := todo[lo:min(lo+batch, len(todo))]
		out := make([]vector.Point, len(part))
		ok := make([]bool, len(part))
		err := parallel(ctx, len(part), func(i int) error {
			v, err := ReadVector(ctx, store, c, tenant, part[i].Hash)
			if errors.Is(err, blob.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			out[i] = vector.Point{ID: vector.PointID(tenant, repo, part[i].Hash), Vector: v, Payload: vector.Payload{Tenant: tenant, Repo: repo, Hash: part[i].Hash, Path: part[i].Path}}
			ok[i] = true
			return nil
		})
		if err != nil {
			return res, err
		}
		var up []vector.Point
		for i, p := range out {
			if ok[i] {
				up = append(up, p)
			} else {
				res.Missing++
			}
		}
		if err := vs.Upsert(ctx, c, up); err != nil {
			return res, err
		}
		res.Added += len(up)
	}
	return res, nil
}

// Prune deletes the points of tenant/repo whose hash keep does not hold
// and returns how many it deleted. If stop (may be nil) reports true
// once they are listed, none is deleted: the caller learnt that the
// listing may hold points written by someone else since it decided what
// to keep.
func Prune(ctx context.Context, vs vector.Store, c vector.Collection, tenant, repo string, keep map[string]bool, stop func() bool) (int, error) {
	f := vector.Filter{Tenant: tenant, Repos: []string{repo}}
	have, err := vs.List(ctx, c, f)
	if err != nil {
		return 0, err
	}
	var drop []string
	for _, p := range have {
		if !keep[p.Payload.Hash] {
			drop = append(drop, p.ID)
		}
	}
	if len(drop) == 0 || stop != nil && stop() {
		return 0, nil
	}
	return len(drop), vs.Delete(ctx, c, f, drop)
}
