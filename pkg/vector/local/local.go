// Package local is the embedded vector store: nearest-neighbour search in
// process, one shard per collection, tenant and repository, persisted as
// one object in the blob store beside the repository's segments and
// loaded on first use. Vectors are normalised on upsert, so the score is
// the cosine similarity, and every returned score is exact (float32).
//
// Float32 scans every vector. Int8 scans int8 codes and re-scores the best
// with the float32 vectors. Binary (the default of codectx) keeps one bit
// per dimension, the sign of the vector, ranks
// every point by the Hamming distance of its bits to the query's
// (math/bits.OnesCount64 over 64 dimensions at a time, about 40 times less
// memory traffic than float32), and re-scores an oversampled candidate
// set with the float32 vectors; shards smaller than Options.ExactBelow are
// scanned exactly.
package local

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/vector"
)

// Precision selects the scan.
type Precision int

const (
	Float32 Precision = iota // scan the float32 vectors
	Int8                     // scan int8 codes, re-score the best with float32
	Binary                   // rank by Hamming distance of sign bits, re-score an oversampled set with float32
)

// Options tune a Store. The zero value of a field is its default.
type Options struct {
	Precision Precision
	// ExactBelow: with Binary, shards of fewer points are scanned
	// exactly (default DefaultExactBelow).
	ExactBelow int
	// Oversample: with Binary, a search for the top k re-scores
	// Oversample*k candidates (default DefaultOversample), and at least
	// MinCandidates (default DefaultMinCandidates).
	Oversample    int
	MinCandidates int
	// Prefilter: with Binary, the candidates are chosen among the
	// Prefilter*candidates points nearest by Hamming distance (default
	// DefaultPrefilter); 0 < Prefilter < 1 scores every point.
	Prefilter float64
}

// Defaults of Options, chosen by the recall and speed measured in
// docs/benchmarks.md (dense arm).
const (
	DefaultExactBelow    = 20000
	DefaultOversample    = 16
	DefaultMinCandidates = 512
	DefaultPrefilter     = 8
)

// Store is the embedded vector store over a blob bucket.
type Store struct {
	b    *blob.Bucket
	prec Precision
	opt  Options

	mu     sync.Mutex
	shards map[string]*shard // by blob key
}

// New returns a store persisting its shards in b, with the default
// options at precision p.
func New(b *blob.Bucket, p Precision) *Store {
	return Open(b, Options{Precision: p})
}

// Open returns a store persisting its shards in b.
func Open(b *blob.Bucket, o Options) *Store {
	if o.ExactBelow <= 0 {
		o.ExactBelow = DefaultExactBelow
	}
	if o.Oversample <= 0 {
		o.Oversample = DefaultOversample
	}
	if o.MinCandidates <= 0 {
		o.MinCandidates = DefaultMinCandidates
	}
	if o.Prefilter <= 0 {
		o.Prefilter = DefaultPrefilter
	}
	return &Store{b: b, prec: o.Precision, opt: o, shards: map[string]*shard{}}
}

// Key is where the shard of tenant/repo in collection c is stored.
func Key(c vector.Collection, tenant, repo string) string {
	return index.RepoPrefix("vectors/", tenant, repo) + c.Name() + ".vec"
}

// shard holds the points of one tenant/repo in one collection.
type shard struct {
	mu       sync.RWMutex
	loaded   bool
	dim      int
	ids      []string
	payloads []vector.Payload
	vecs     []float32 // len(ids)*dim, normalised
	codes    []int8    // len(ids)*dim (Int8 only)
	scales   []float32 // per point (Int8 only)
	pos      map[string]int

	// Binary only: words uint64 of sign bits per point.
	bits  []uint64
	words int
}

func (s *Store) shard(ctx context.Context, c vector.Collection, tenant, repo string) (*shard, string, error) {
	key := Key(c, tenant, repo)
	s.mu.Lock()
	sh, ok := s.shards[key]
	if !ok {
		sh = &shard{dim: c.Dim, pos: map[string]int{}, words: (c.Dim + 63) / 64}
		s.shards[key] = sh
	}
	s.mu.Unlock()
	sh.mu.RLock()
	loaded := sh.loaded
	sh.mu.RUnlock()
	if loaded {
		return sh, key, nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.loaded {
		return sh, key, nil
	}
	data, err := s.b.Get(ctx, key)
	switch {
	case errors.Is(err, blob.ErrNotFound):
	case err != nil:
		return nil, key, fmt.Errorf("vector/local: load %s: %w", key, err)
	default:
		if err := sh.decode(data, s.prec); err != nil {
			return nil, key, fmt.Errorf("vector/local: load %s: %w", key, err)
		}
		if sh.dim != c.Dim {
			return nil, key, fmt.Errorf("vector/local: %s holds %d-dimensional vectors: %w", key, sh.dim, vector.ErrDim)
		}
	}
	sh.loaded = true
	return sh, key, nil
}

// Upsert implements vector.Store. Each shard touched is written back once.
func (s *Store) Upsert(ctx context.Context, c vector.Collection, pts []vector.Point) error {
	if err := vector.CheckPoints(c, pts); err != nil {
		return err
	}
	type scope struct{ tenant, repo string }
	by := map[scope][]vector.Point{}
	var order []scope
	for _, p := range pts {
		k := scope{p.Payload.Tenant, p.Payload.Repo}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], p)
	}
	for _, k := range order {
		sh, key, err := s.shard(ctx, c, k.tenant, k.repo)
		if err != nil {
			return err
		}
		sh.mu.Lock()
		// Grow once: appending point by point would leave up to twice
		// the memory the vectors need.
		fresh := 0
		for _, p := range by[k] {
			if _, ok := sh.pos[p.ID]; !ok {
				fresh++
			}
		}
		sh.vecs = slices.Grow(sh.vecs, fresh*sh.dim)
		sh.ids, sh.payloads = slices.Grow(sh.ids, fresh), slices.Grow(sh.payloads, fresh)
		if s.prec == Int8 {
			sh.codes, sh.scales = slices.Grow(sh.codes, fresh*sh.dim), slices.Grow(sh.scales, fresh)
		}
		if s.prec == Binary {
			sh.bits = slices.Grow(sh.bits, fresh*sh.words)
		}
		for _, p := range by[k] {
			sh.put(p, s.prec)
		}
		err = s.save(ctx, key, sh)
		sh.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

func (sh *shard) put(p vector.Point, prec Precision) {
	v := normalize(p.Vector)
	i, ok := sh.pos[p.ID]
	if !ok {
		i = len(sh.ids)
		sh.pos[p.ID] = i
		sh.ids = append(sh.ids, p.ID)
		sh.payloads = append(sh.payloads, p.Payload)
		sh.vecs = append(sh.vecs, v...)
		if prec == Int8 {
			sh.codes = append(sh.codes, make([]int8, sh.dim)...)
			sh.scales = append(sh.scales, 0)
		}
		if prec == Binary {
			sh.bits = append(sh.bits, make([]uint64, sh.words)...)
		}
	} else {
		sh.payloads[i] = p.Payload
		copy(sh.vecs[i*sh.dim:], v)
	}
	if prec == Int8 {
		sh.scales[i] = quantize(sh.codes[i*sh.dim:(i+1)*sh.dim], v)
	}
	if prec == Binary {
		signBits(sh.bits[i*sh.words:(i+1)*sh.words], v)
	}
}

// signBits sets bit j of dst when v[j] > 0.
func signBits(dst []uint64, v []float32) {
	clear(dst)
	for j, x := range v {
		if x > 0 {
			dst[j/64] |= 1 << (j % 64)
		}
	}
}

func (s *Store) save(ctx context.Context, key string, sh *shard) error {
	if len(sh.ids) == 0 {
		if err := s.b.Delete(ctx, key); err != nil {
			return fmt.Errorf("vector/local: delete %s: %w", key, err)
		}
		return nil
	}
	data, err := sh.encode()
	if err != nil {
		return err
	}
	if err := s.b.Put(ctx, key, data); err != nil {
		return fmt.Errorf("vector/local: write %s: %w", key, err)
	}
	return nil
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
	qn := normalize(q)
	var qc []int8
	var qs float32
	if s.prec == Int8 {
		qc = make([]int8, len(qn))
		qs = quantize(qc, qn)
	}
	var hits []vector.Hit
	for _, repo := range uniq(f.Repos) {
		sh, _, err := s.shard(ctx, c, f.Tenant, repo)
		if err != nil {
			return nil, err
		}
		sh.mu.RLock()
		var top []scored
		if s.prec == Binary && len(sh.ids) >= s.opt.ExactBelow {
			cand := max(s.opt.Oversample*k, s.opt.MinCandidates)
			pre := len(sh.ids)
			if s.opt.Prefilter >= 1 {
				pre = int(s.opt.Prefilter * float64(cand))
			}
			top = sh.searchBinary(qn, k, cand, pre)
		} else if s.prec == Int8 {
			cand := sh.scan(func(i int) float32 { return qs * sh.scales[i] * float32(dotInt8(qc, sh.codes[i*sh.dim:(i+1)*sh.dim])) }, rescoreDepth(k))
			for j := range cand {
				cand[j].score = dot(qn, sh.vecs[cand[j].i*sh.dim:(cand[j].i+1)*sh.dim])
			}
			slices.SortFunc(cand, byScore)
			top = cand[:min(k, len(cand))]
		} else {
			top = sh.scan(func(i int) float32 { return dot(qn, sh.vecs[i*sh.dim:(i+1)*sh.dim]) }, k)
		}
		for _, t := range top {
			hits = append(hits, vector.Hit{ID: sh.ids[t.i], Score: t.score, Payload: sh.payloads[t.i]})
		}
		sh.mu.RUnlock()
	}
	slices.SortStableFunc(hits, func(a, b vector.Hit) int { return cmp.Compare(b.Score, a.Score) })
	if len(hits) > k {
		hits = hits[:k]
	}
	return hits, nil
}

// rescoreDepth is how many int8 candidates are re-scored for a top k.
func rescoreDepth(k int) int { return max(4*k, k+32) }

type scored struct {
	i     int
	score float32
}

func byScore(a, b scored) int {
	if c := cmp.Compare(b.score, a.score); c != 0 {
		return c
	}
	return cmp.Compare(a.i, b.i)
}

// parallelMin is the shard size from which the scan is split over cores.
const parallelMin = 16384

// scan returns the k best points by score, best first.
func (sh *shard) scan(score func(int) float32, k int) []scored {
	n := len(sh.ids)
	parts := 1
	if n >= parallelMin {
		parts = min(runtime.GOMAXPROCS(0), n/(parallelMin/2))
	}
	res := make([][]scored, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := n*p/parts, n*(p+1)/parts
		wg.Go(func() { res[p] = topK(score, lo, hi, k) })
	}
	wg.Wait()
	all := slices.Concat(res...)
	slices.SortFunc(all, byScore)
	return all[:min(k, len(all))]
}

// topK keeps the k best of [lo, hi) in a min-heap.
func topK(score func(int) float32, lo, hi, k int) []scored {
	h := make([]scored, 0, k)
	for i := lo; i < hi; i++ {
		s := score(i)
		if len(h) < k {
			h = append(h, scored{i, s})
			up(h, len(h)-1)
			continue
		}
		if s <= h[0].score {
			continue
		}
		h[0] = scored{i, s}
		down(h, 0)
	}
	return h
}

func up(h []scored, j int) {
	for j > 0 {
		p := (j - 1) / 2
		if h[p].score <= h[j].score {
			return
		}
		h[p], h[j] = h[j], h[p]
		j = p
	}
}

func down(h []scored, j int) {
	for {
		l := 2*j + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].score < h[l].score {
			m = r
		}
		if h[j].score <= h[m].score {
			return
		}
		h[j], h[m] = h[m], h[j]
		j = m
	}
}

// List implements vector.Store.
func (s *Store) List(ctx context.Context, c vector.Collection, f vector.Filter) ([]vector.Point, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	var out []vector.Point
	for _, repo := range uniq(f.Repos) {
		sh, _, err := s.shard(ctx, c, f.Tenant, repo)
		if err != nil {
			return nil, err
		}
		sh.mu.RLock()
		for i, id := range sh.ids {
			out = append(out, vector.Point{ID: id, Payload: sh.payloads[i]})
		}
		sh.mu.RUnlock()
	}
	return out, nil
}

// Delete implements vector.Store.
func (s *Store) Delete(ctx context.Context, c vector.Collection, f vector.Filter, ids []string) error {
	if err := f.Check(); err != nil {
		return err
	}
	for _, repo := range uniq(f.Repos) {
		sh, key, err := s.shard(ctx, c, f.Tenant, repo)
		if err != nil {
			return err
		}
		sh.mu.Lock()
		n := len(sh.ids)
		if ids == nil {
			sh.reset()
		} else {
			drop := map[int]bool{}
			for _, id := range ids {
				if i, ok := sh.pos[id]; ok {
					drop[i] = true
				}
			}
			if len(drop) > 0 {
				sh.compact(drop)
			}
		}

		if len(sh.ids) != n {
			err = s.save(ctx, key, sh)
		}
		sh.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// DeleteRepo implements vector.Store: it drops the shards of tenant/repo
// of every collection, loaded or stored.
func (s *Store) DeleteRepo(ctx context.Context, tenant, repo string) error {
	if tenant == "" || repo == "" {
		return vector.ErrFilter
	}
	prefix := index.RepoPrefix("vectors/", tenant, repo)
	// Its own shards, not those of a repository nested under its name.
	return s.dropShards(ctx, prefix, func(k string) bool {
		rest := k[len(prefix):]
		return !strings.Contains(rest, "/") && strings.HasSuffix(rest, ".vec")
	})
}

// dropShards drops the shards stored under prefix whose keys match,
// loaded or stored.
func (s *Store) dropShards(ctx context.Context, prefix string, match func(key string) bool) error {
	keys, err := s.b.List(ctx, prefix)
	if err != nil {
		return fmt.Errorf("vector/local: list %s: %w", prefix, err)
	}
	s.mu.Lock()
	for k, sh := range s.shards {
		if strings.HasPrefix(k, prefix) && match(k) {
			sh.mu.Lock()
			sh.reset()
			sh.mu.Unlock()
			delete(s.shards, k)
		}
	}
	s.mu.Unlock()
	for _, k := range keys {
		if !match(k) {
			continue
		}
		if err := s.b.Delete(ctx, k); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return fmt.Errorf("vector/local: delete %s: %w", k, err)
		}
	}
	return nil
}

// Collections implements vector.Store: the collections of the stored
// shards (a collection is in the store while one repository has a shard
// of it).
func (s *Store) Collections(ctx context.Context) ([]string, error) {
	keys, err := s.b.List(ctx, "vectors/")
	if err != nil {
		return nil, fmt.Errorf("vector/local: list vectors/: %w", err)
	}
	var names []string
	for _, k := range keys {
		if name, ok := collectionOf(k); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// collectionOf is the collection of the shard stored at key (Key).
func collectionOf(key string) (string, bool) {
	file := key[strings.LastIndexByte(key, '/')+1:]
	name, ok := strings.CutSuffix(file, ".vec")
	return name, ok && strings.Contains(key, "/@/") && vector.CheckName(name) == nil
}

// Drop implements vector.Store: it drops the shards of every repository
// in the collection, loaded or stored.
func (s *Store) Drop(ctx context.Context, name string) error {
	if err := vector.CheckName(name); err != nil {
		return err
	}
	return s.dropShards(ctx, "vectors/", func(k string) bool {
		c, ok := collectionOf(k)
		return ok && c == name
	})
}

func (sh *shard) reset() {
	sh.ids, sh.payloads, sh.vecs, sh.codes, sh.scales = nil, nil, nil, nil, nil
	sh.bits = nil
	sh.pos = map[string]int{}
}

func (sh *shard) compact(drop map[int]bool) {
	d := sh.dim
	w := 0
	for i := range sh.ids {
		if drop[i] {
			delete(sh.pos, sh.ids[i])
			continue
		}
		if w != i {
			sh.ids[w], sh.payloads[w] = sh.ids[i], sh.payloads[i]
			copy(sh.vecs[w*d:(w+1)*d], sh.vecs[i*d:(i+1)*d])
			if sh.codes != nil {
				copy(sh.codes[w*d:(w+1)*d], sh.codes[i*d:(i+1)*d])
				sh.scales[w] = sh.scales[i]
			}
			if sh.bits != nil {
				copy(sh.bits[w*sh.words:(w+1)*sh.words], sh.bits[i*sh.words:(i+1)*sh.words])
			}
			sh.pos[sh.ids[w]] = w
		}
		w++
	}
	sh.ids, sh.payloads, sh.vecs = sh.ids[:w], sh.payloads[:w], sh.vecs[:w*d]
	if sh.codes != nil {
		sh.codes, sh.scales = sh.codes[:w*d], sh.scales[:w]
	}
	if sh.bits != nil {
		sh.bits = sh.bits[:w*sh.words]
	}
}

// Close implements vector.Store; it drops the loaded shards.
func (s *Store) Close() error {
	s.mu.Lock()
	s.shards = map[string]*shard{}
	s.mu.Unlock()
	return nil
}

// The shard format: magic, dim, count, length of a JSON header (ids and
// payloads), the header, then count*dim little-endian float32.
var magic = [4]byte{'C', 'V', 'E', '1'}

type header struct {
	IDs      []string         `json:"ids"`
	Payloads []vector.Payload `json:"payloads"`
}

func (sh *shard) encode() ([]byte, error) {
	hd, err := json.Marshal(header{IDs: sh.ids, Payloads: sh.payloads})
	if err != nil {
		return nil, fmt.Errorf("vector/local: encode: %w", err)
	}
	var b bytes.Buffer
	b.Grow(16 + len(hd) + 4*len(sh.vecs))
	b.Write(magic[:])
	var u [4]byte
	for _, n := range []int{sh.dim, len(sh.ids), len(hd)} {
		binary.LittleEndian.PutUint32(u[:], uint32(n))
		b.Write(u[:])
	}
	b.Write(hd)
	for _, v := range sh.vecs {
		binary.LittleEndian.PutUint32(u[:], math.Float32bits(v))
		b.Write(u[:])
	}
	return b.Bytes(), nil
}

func (sh *shard) decode(data []byte, prec Precision) error {
	if len(data) < 16 || !bytes.Equal(data[:4], magic[:]) {
		return errors.New("not a vector shard")
	}
	dim := int(binary.LittleEndian.Uint32(data[4:]))
	n := int(binary.LittleEndian.Uint32(data[8:]))
	hl := int(binary.LittleEndian.Uint32(data[12:]))
	rest := data[16:]
	if hl > len(rest) || len(rest)-hl != 4*n*dim {
		return errors.New("truncated vector shard")
	}
	var hd header
	if err := json.Unmarshal(rest[:hl], &hd); err != nil {
		return err
	}
	if len(hd.IDs) != n || len(hd.Payloads) != n {
		return errors.New("vector shard header does not match its count")
	}
	sh.dim, sh.ids, sh.payloads = dim, hd.IDs, hd.Payloads
	sh.vecs = make([]float32, n*dim)
	raw := rest[hl:]
	for i := range sh.vecs {
		sh.vecs[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	sh.pos = make(map[string]int, n)
	for i, id := range sh.ids {
		sh.pos[id] = i
	}
	sh.words = (dim + 63) / 64
	if prec == Binary {
		sh.bits = make([]uint64, n*sh.words)
		for i := range n {
			signBits(sh.bits[i*sh.words:(i+1)*sh.words], sh.vecs[i*dim:(i+1)*dim])
		}
	}
	if prec == Int8 {
		sh.codes = make([]int8, n*dim)
		sh.scales = make([]float32, n)
		for i := range n {
			sh.scales[i] = quantize(sh.codes[i*dim:(i+1)*dim], sh.vecs[i*dim:(i+1)*dim])
		}
	}
	return nil
}

func uniq(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// normalize returns v scaled to unit length (a copy; zero stays zero).
func normalize(v []float32) []float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if s == 0 {
		return out
	}
	inv := float32(1 / math.Sqrt(s))
	for i, x := range v {
		out[i] = x * inv
	}
	return out
}

// quantize writes the int8 codes of v to dst and returns the scale:
// v[i] ≈ scale*dst[i].
func quantize(dst []int8, v []float32) float32 {
	var m float32
	for _, x := range v {
		m = max(m, float32(math.Abs(float64(x))))
	}
	if m == 0 {
		clear(dst)
		return 0
	}
	scale := m / 127
	for i, x := range v {
		dst[i] = int8(math.Round(float64(x / scale)))
	}
	return scale
}

// dot is the inner product, unrolled by four.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// dotInt8 is the inner product of int8 codes, unrolled by eight.
func dotInt8(a, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		s0 += int32(a[i])*int32(b[i]) + int32(a[i+4])*int32(b[i+4])
		s1 += int32(a[i+1])*int32(b[i+1]) + int32(a[i+5])*int32(b[i+5])
		s2 += int32(a[i+2])*int32(b[i+2]) + int32(a[i+6])*int32(b[i+6])
		s3 += int32(a[i+3])*int32(b[i+3]) + int32(a[i+7])*int32(b[i+7])
	}
	for ; i < len(a); i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

var _ vector.Store = (*Store)(nil)
