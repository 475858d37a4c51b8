package dense

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/embed"
	"codectx/pkg/query"
	"codectx/pkg/segment"
	"codectx/pkg/vector"
)

// Arm is the dense retrieval arm of the query engine (query.Dense): it
// embeds the query once, searches the store inside the segment's tenant
// and repository, and maps the hits to the segment's chunks.
type Arm struct {
	Embedder embed.Embedder
	Store    vector.Store
	// Timeout bounds the embedding of the query and the search of the
	// store (0: QueryTimeout). An embedder's own timeouts and retries
	// are the indexing's (a minute a request, retried), which a query
	// must not wait for: past it the arm fails, and the engine answers
	// with the other arms (query.Engine.DegradeDense).
	Timeout time.Duration
}

// QueryTimeout is the default bound of the dense arm of one query.
const QueryTimeout = 10 * time.Second

// hashIndex maps the text hash of each chunk of a segment to its ids.
func hashIndex(seg *segment.Segment) map[string][]int {
	return seg.Memo("dense.hashes", func() any {
		m := make(map[string][]int, len(seg.Chunks))
		for i, c := range seg.Chunks {
			h := Hash(c)
			m[h] = append(m[h], i)
		}
		return m
	}).(map[string][]int)
}

// Search implements query.Dense. It asks the store for more than k hits:
// points of the previous snapshot that HEAD no longer holds are skipped.
func (a *Arm) Search(ctx context.Context, seg *segment.Segment, q string, k int) ([]int, error) {
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = QueryTimeout
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	vecs, err := a.Embedder.Embed(ctx, []string{q}, embed.Query)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && parent.Err() == nil {
		err = fmt.Errorf("no answer within %s: %w", timeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("embed query: %w", err)
	}
	if len(vecs) != 1 {
		return nil, fmt.Errorf("embed query: %d vectors for one text", len(vecs))
	}
	hits, err := a.Store.Search(ctx, Collection(a.Embedder), vecs[0], k+k/4+8, vector.Filter{Tenant: seg.Meta.Tenant, Repos: []string{seg.Meta.Repo}})
	if err != nil {
		return nil, err
	}
	idx := hashIndex(seg)
	out := make([]int, 0, k)
	for _, h := range hits {
		for _, id := range idx[h.Payload.Hash] {
			if len(out) < k {
				out = append(out, id)
			}
		}
	}
	return out, nil
}

// Stats is what IndexSegment did.
type Stats struct {
	Model    string  `json:"model"`
	Chunks   int     `json:"chunks"`   // distinct chunk texts of the snapshot
	Embedded int     `json:"embedded"` // embedded now
	Reused   int     `json:"reused"`   // found in the embedding cache
	Added    int     `json:"added"`    // points written to the store
	Deleted  int     `json:"deleted"`  // points of older snapshots removed
	Seconds  float64 `json:"seconds"`
}

// SegmentPoints lists the distinct chunk hashes of a segment with a path
// each, and the text of each, in segment order.
func SegmentPoints(seg *segment.Segment) ([]Point, []string) {
	seen := map[string]bool{}
	var pts []Point
	var texts []string
	for _, c := range seg.Chunks {
		t := Text(c)
		h := hashOf(t)
		if seen[h] {
			continue
		}
		seen[h] = true
		pts = append(pts, Point{Hash: h, Path: c.Path})
		texts = append(texts, t)
	}
	return pts, texts
}

// IndexSegment embeds the chunks of a published segment that the cache
// lacks, stores the segment's points and removes the repository's points
// the segment does not hold. It is the library path (`codectx index`
// without a server): there HEAD is the only published snapshot.
func IndexSegment(ctx context.Context, store *blob.Bucket, vs vector.Store, e embed.Embedder, seg *segment.Segment) (*Stats, error) {
	start := time.Now()
	c := Collection(e)
	pts, texts := SegmentPoints(seg)
	hashes := make([]string, len(pts))
	for i, p := range pts {
		hashes[i] = p.Hash
	}
	st := &Stats{Model: c.Model, Chunks: len(pts)}
	n, err := EmbedAndCache(ctx, store, e, seg.Meta.Tenant, hashes, texts)
	if err != nil {
		return nil, err
	}
	st.Embedded, st.Reused = n, len(pts)-n
	res, err := Upsert(ctx, store, vs, c, seg.Meta.Tenant, seg.Meta.Repo, pts)
	if err != nil {
		return nil, err
	}
	st.Added = res.Added
	keep := make(map[string]bool, len(hashes))
	for _, h := range hashes {
		keep[h] = true
	}
	if st.Deleted, err = Prune(ctx, vs, c, seg.Meta.Tenant, seg.Meta.Repo, keep, nil); err != nil {
		return nil, err
	}
	st.Seconds = time.Since(start).Seconds()
	return st, nil
}

// ForRequest returns an arm for one request over several repositories:
// the query text is embedded once, however many segments it searches.
func (a *Arm) ForRequest() query.Dense {
	return &Arm{Embedder: &queryMemo{Embedder: a.Embedder}, Store: a.Store, Timeout: a.Timeout}
}

// queryMemo embeds each query text once: its failure too, so that the
// repositories of one request do not each wait for an embedder that is
// down.
type queryMemo struct {
	embed.Embedder
	mu   sync.Mutex
	vecs map[string][]float32
	errs map[string]error
}

func (m *queryMemo) Embed(ctx context.Context, texts []string, kind embed.Kind) ([][]float32, error) {
	if kind != embed.Query || len(texts) != 1 {
		return m.Embedder.Embed(ctx, texts, kind)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.vecs[texts[0]]; ok {
		return [][]float32{v}, nil
	}
	if err, ok := m.errs[texts[0]]; ok {
		return nil, err
	}
	vs, err := m.Embedder.Embed(ctx, texts, kind)
	if err != nil {
		if m.errs == nil {
			m.errs = map[string]error{}
		}
		m.errs[texts[0]] = err
		return nil, err
	}
	if len(vs) != 1 {
		return vs, err
	}
	if m.vecs == nil {
		m.vecs = map[string][]float32{}
	}
	m.vecs[texts[0]] = vs[0]
	return vs, nil
}
