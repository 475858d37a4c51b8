package query_test

import (
	"context"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/query"
	"codectx/pkg/segment"
	"codectx/pkg/source"
)

var benchQueries = []string{
	"parse http request header",
	"ReadResponse",
	"(*Transport).RoundTrip",
	"how are idle connections reused by the transport",
	"cookie jar set cookies for url",
	"what depends on textproto.Reader",
	"TLS handshake timeout",
	"dial tcp with context deadline",
	"resolve host name lookup ip address",
	"http2 frame write settings",
	"ServeMux pattern matching",
	"multipart form file upload",
	"chunked transfer encoding writer",
	"url query escape",
	"keep alive connection close",
	"redirect policy check redirect",
	"proxy from environment",
	"mime type sniff content",
	"fix race in connection pool",
	"Header.Get canonical key",
}

var (
	benchOnce sync.Once
	benchSeg  *segment.Segment
	benchErr  error
)

// benchSegment indexes $GOROOT/src/net (about 10k symbols) once.
func benchSegment(b *testing.B) *segment.Segment {
	benchOnce.Do(func() {
		dir := filepath.Join(runtime.GOROOT(), "src", "net")
		snap, err := source.Open(context.Background(), dir, source.Options{})
		if err != nil {
			benchErr = err
			return
		}
		defer snap.Close()
		benchSeg, _, benchErr = index.BuildSegment(context.Background(), blob.NewMem(), snap, "go/net", index.Options{})
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchSeg
}

func benchQuery(b *testing.B, arms []string, route bool, budget int) {
	seg := benchSegment(b)
	eng := &query.Engine{Seg: seg}
	b.ReportMetric(float64(len(seg.Chunks)), "chunks")
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := benchQueries[i%len(benchQueries)]
		start := time.Now()
		if _, err := eng.Query(context.Background(), query.Request{Query: q, Budget: budget, Arms: arms, Route: route}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}

// BenchmarkQueryFull is the whole pipeline: classify, every arm, fuse, pack 8k.
func BenchmarkQueryFull(b *testing.B) { benchQuery(b, nil, true, 8000) }

// BenchmarkQueryBM25 is the chunk BM25 arm alone, packed into 8k.
func BenchmarkQueryBM25(b *testing.B) { benchQuery(b, []string{query.ArmBM25}, false, 8000) }

// BenchmarkSearchFull is retrieval and fusion without packing.
func BenchmarkSearchFull(b *testing.B) {
	seg := benchSegment(b)
	eng := &query.Engine{Seg: seg}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := eng.Search(context.Background(), query.Request{Query: benchQueries[i%len(benchQueries)], Route: true}); err != nil {
			b.Fatal(err)
		}
	}
}
