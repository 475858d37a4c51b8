package local_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"testing"
	"time"

	blobdir "codectx/pkg/blob/local"
	"codectx/pkg/embed"
	"codectx/pkg/embed/embedders"
	"codectx/pkg/vector"
	"codectx/pkg/vector/local"
)

// fill makes a store of n random 384-dimensional points in one repository.
func fill(b *testing.B, prec local.Precision, n int) (*local.Store, vector.Collection) {
	return fillOpts(b, local.Options{Precision: prec}, n)
}

func fillOpts(b *testing.B, o local.Options, n int) (*local.Store, vector.Collection) {
	b.Helper()
	c := vector.Collection{Model: "bench", Dim: 384}
	// A bucket on disk: the shard's persisted copy is not in the heap.
	bk, err := blobdir.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	s := local.Open(bk, o)
	r := rand.New(rand.NewPCG(7, 8))
	pts := make([]vector.Point, n)
	for i := range pts {
		h := fmt.Sprintf("%040x", i)
		pts[i] = vector.Point{ID: vector.PointID("t", "r", h), Vector: randVec(r, 384), Payload: vector.Payload{Tenant: "t", Repo: "r", Hash: h}}
	}
	if err := s.Upsert(context.Background(), c, pts); err != nil {
		b.Fatal(err)
	}
	return s, c
}

// BenchmarkSearch100k is the dense arm's store cost: top 200 (the arm's
// depth, plus its slack) of 100k 384-dimensional vectors, the size of a
// large repository. It reports p50 and p95 over the iterations.
func BenchmarkSearch100k(b *testing.B) {
	for _, p := range searchConfigs {
		b.Run(p.name, func(b *testing.B) {
			s, c := fillOpts(b, p.opt, 100_000)
			r := rand.New(rand.NewPCG(9, 10))
			f := vector.Filter{Tenant: "t", Repos: []string{"r"}}
			var lat []time.Duration
			b.ResetTimer()
			for b.Loop() {
				q := randVec(r, 384)
				t := time.Now()
				if _, err := s.Search(context.Background(), c, q, 258, f); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t))
			}
			report(b, lat, "")
		})
	}
}

// searchConfigs are the layouts benchmarked side by side.
var searchConfigs = []struct {
	name string
	opt  local.Options
}{
	{"float32", local.Options{Precision: local.Float32}},
	{"int8", local.Options{Precision: local.Int8}},
	{"binary-x8", local.Options{Precision: local.Binary, Oversample: 8}},
	{"binary-x16", local.Options{Precision: local.Binary, Oversample: 16}}, // the default
	{"binary-x16-noprefilter", local.Options{Precision: local.Binary, Oversample: 16, Prefilter: 0.5}},
	{"binary-x32", local.Options{Precision: local.Binary, Oversample: 32}},
}

// BenchmarkDenseArm100k is what the dense arm adds to a query: embedding
// the query with the default model (when make model has fetched it) and
// searching 100k vectors for the arm's top 258, side by side for the exact
// float32 scan and the default binary layout. It reports p50 and p95 of
// the whole and of the embedding alone.
func BenchmarkDenseArm100k(b *testing.B) {
	dir := "../../../.cache/models/bge-small-en-v1.5-q"
	if _, err := os.Stat(dir); err != nil {
		b.Skip("no default model (make model)")
	}
	e, err := embedders.Open(context.Background(), "onnx:"+dir+"?threads=1")
	if err != nil {
		b.Fatal(err)
	}
	defer embed.Close(e)
	queries := []string{
		"where is the retry backoff computed",
		"how are webhook signatures verified",
		"parse the repository's go.mod",
		"BM25 scoring of chunk fields",
		"who deletes old snapshots",
		"token budget when packing context",
		"tenant isolation of vector search",
		"rate limit per API key",
	}
	for _, p := range []struct {
		name string
		opt  local.Options
	}{{"float32", local.Options{Precision: local.Float32}}, {"binary", local.Options{Precision: local.Binary}}} {
		b.Run(p.name, func(b *testing.B) {
			s, c := fillOpts(b, p.opt, 100_000)
			f := vector.Filter{Tenant: "t", Repos: []string{"r"}}
			var lat, emb []time.Duration
			i := 0
			b.ResetTimer()
			for b.Loop() {
				t := time.Now()
				v, err := e.Embed(context.Background(), []string{queries[i%len(queries)]}, embed.Query)
				if err != nil {
					b.Fatal(err)
				}
				emb = append(emb, time.Since(t))
				if _, err := s.Search(context.Background(), c, v[0], 258, f); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t))
				i++
			}
			report(b, lat, "")
			report(b, emb, "embed-")
		})
	}
}

func report(b *testing.B, lat []time.Duration, prefix string) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, prefix+"p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, prefix+"p95-ms")
}

// BenchmarkMemory100k reports the heap held by 100k loaded vectors of 384
// dimensions with their ids and payloads (what the process's RSS grows
// by: the Go heap is the store's only allocation), for each precision.
func BenchmarkMemory100k(b *testing.B) {
	for _, p := range []struct {
		name string
		prec local.Precision
	}{{"float32", local.Float32}, {"int8", local.Int8}, {"binary", local.Binary}} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				runtime.GC()
				debug.FreeOSMemory()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				s, _ := fill(b, p.prec, 100_000)
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB/100k")
				runtime.KeepAlive(s)
			}
		})
	}
}
