package bm25

// Comparison benchmarks against bleve (scorch, BM25 scoring). Bleve is
// linked into the test binary only. Both engines see the same documents and
// the same term streams: fields are tokenized with tokenize.Tokens, joined by
// spaces and given to bleve with a whitespace analyzer, so differences in
// ranking come from scoring alone (bleve: per-field BM25 summed over a
// disjunction with field boosts and a coordination factor; ours: BM25F).

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"codectx/pkg/tokenize"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/whitespace"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
)

var bleveFields = [NumFields]string{"name", "sig", "doc", "body", "path"}

func bleveMapping() (*mapping.IndexMappingImpl, error) {
	im := bleve.NewIndexMapping()
	im.ScoringModel = "bm25"
	if err := im.AddCustomAnalyzer("ws", map[string]any{
		"type":      custom.Name,
		"tokenizer": whitespace.Name,
	}); err != nil {
		return nil, fmt.Errorf("bleve analyzer: %w", err)
	}
	dm := bleve.NewDocumentStaticMapping()
	for _, name := range bleveFields {
		fm := bleve.NewTextFieldMapping()
		fm.Analyzer = "ws"
		fm.Store = false
		fm.IncludeTermVectors = false
		fm.IncludeInAll = false
		fm.DocValues = false
		dm.AddFieldMappingsAt(name, fm)
	}
	im.DefaultMapping = dm
	im.DefaultAnalyzer = "ws"
	im.StoreDynamic = false
	im.IndexDynamic = false
	im.DocValuesDynamic = false
	return im, nil
}

// buildBleve indexes the corpus into a new scorch index at dir and closes it.
func buildBleve(c *corpus, dir string) error {
	im, err := bleveMapping()
	if err != nil {
		return err
	}
	ix, err := bleve.New(dir, im)
	if err != nil {
		return fmt.Errorf("bleve new %s: %w", dir, err)
	}
	batch := ix.NewBatch()
	for i, d := range c.docs {
		m := make(map[string]any, NumFields)
		for f, s := range d.Fields {
			m[bleveFields[f]] = strings.Join(tokenize.Tokens(s), " ")
		}
		if err := batch.Index(strconv.Itoa(i), m); err != nil {
			ix.Close()
			return fmt.Errorf("bleve doc %d: %w", i, err)
		}
		if batch.Size() >= 1000 {
			if err := ix.Batch(batch); err != nil {
				ix.Close()
				return fmt.Errorf("bleve batch: %w", err)
			}
			batch.Reset()
		}
	}
	if err := ix.Batch(batch); err != nil {
		ix.Close()
		return fmt.Errorf("bleve batch: %w", err)
	}
	if err := ix.Close(); err != nil {
		return fmt.Errorf("bleve close: %w", err)
	}
	return nil
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// bleveLiveBytes opens the scorch index at dir, merges it into one
// segment if merge is set, and returns the bytes of the segment files its
// root refers to (scorch removes obsolete files asynchronously, so the
// directory size is not stable).
func bleveLiveBytes(dir string, merge bool) (int64, error) {
	ix, err := bleve.Open(dir)
	if err != nil {
		return 0, fmt.Errorf("bleve open %s: %w", dir, err)
	}
	n, err := liveBytes(ix, merge)
	if cerr := ix.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("bleve close: %w", cerr)
	}
	return n, err
}

func liveBytes(ix bleve.Index, merge bool) (int64, error) {
	adv, err := ix.Advanced()
	if err != nil {
		return 0, fmt.Errorf("bleve advanced: %w", err)
	}
	sc, ok := adv.(*scorch.Scorch)
	if !ok {
		return 0, fmt.Errorf("bleve index is %T, not scorch", adv)
	}
	if merge {
		if err := sc.ForceMerge(context.Background(), nil); err != nil {
			return 0, fmt.Errorf("bleve force merge: %w", err)
		}
	}
	n, ok := sc.StatsMap()["num_bytes_used_disk_by_root"].(uint64)
	if !ok {
		return 0, fmt.Errorf("bleve stats: no num_bytes_used_disk_by_root")
	}
	return int64(n), nil
}

// The shared bleve index for search benchmarks, built once per test binary
// in a temporary directory that TestMain removes.
var (
	bleveOnce sync.Once
	bleveTmp  string
	bleveIx   bleve.Index
	bleveSize int64
	bleveErr  error
)

func sharedBleve(tb testing.TB, c *corpus) bleve.Index {
	tb.Helper()
	bleveOnce.Do(func() {
		bleveTmp, bleveErr = os.MkdirTemp("", "bm25-bleve-")
		if bleveErr != nil {
			return
		}
		dir := filepath.Join(bleveTmp, "ix")
		if bleveErr = buildBleve(c, dir); bleveErr != nil {
			return
		}
		if bleveSize, bleveErr = bleveLiveBytes(dir, true); bleveErr != nil {
			return
		}
		bleveIx, bleveErr = bleve.Open(dir)
	})
	if bleveErr != nil {
		tb.Fatal(bleveErr)
	}
	return bleveIx
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bleveIx != nil {
		bleveIx.Close()
	}
	if bleveTmp != "" {
		os.RemoveAll(bleveTmp)
	}
	os.Exit(code)
}

// bleveQuery is a disjunction of one term query per (field, term), boosted
// by the field weight.
func bleveQuery(terms []string, p Params) query.Query {
	var qs []query.Query
	for _, t := range terms {
		for f, name := range bleveFields {
			tq := bleve.NewTermQuery(t)
			tq.SetField(name)
			tq.SetBoost(p.Weights[f])
			qs = append(qs, tq)
		}
	}
	return bleve.NewDisjunctionQuery(qs...)
}

func bleveSearch(ix bleve.Index, terms []string, k int, p Params) ([]int, error) {
	req := bleve.NewSearchRequestOptions(bleveQuery(terms, p), k, 0, false)
	res, err := ix.Search(req)
	if err != nil {
		return nil, fmt.Errorf("bleve search %v: %w", terms, err)
	}
	out := make([]int, len(res.Hits))
	for i, h := range res.Hits {
		out[i], _ = strconv.Atoi(h.ID)
	}
	return out, nil
}

// BenchmarkBleveBuild measures tokenizing and indexing the corpus with
// bleve into an on-disk scorch index; MB/s is over source bytes.
func BenchmarkBleveBuild(b *testing.B) {
	c := loadCorpus(b)
	b.SetBytes(c.bytes)
	var dir string
	i := 0
	for b.Loop() {
		dir = filepath.Join(b.TempDir(), strconv.Itoa(i))
		if err := buildBleve(c, dir); err != nil {
			b.Fatal(err)
		}
		i++
	}
	disk, err := dirSize(dir)
	if err != nil {
		b.Fatal(err)
	}
	live, err := bleveLiveBytes(dir, false)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(disk), "dir-bytes")
	b.ReportMetric(float64(live), "index-bytes")
	b.ReportMetric(float64(live)/float64(c.bytes), "index/source")
}

// BenchmarkBleveSearch runs the query list once per op against bleve.
func BenchmarkBleveSearch(b *testing.B) {
	c := loadCorpus(b)
	ix := sharedBleve(b, c)
	qs := queryTerms()
	p := DefaultParams()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, q := range qs {
			if _, err := bleveSearch(ix, q, 10, p); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(qs)), "ns/query")
	b.ReportMetric(float64(bleveSize), "merged-index-bytes")
	b.ReportMetric(float64(bleveSize)/float64(c.bytes), "merged-index/source")
}

// BenchmarkOverlap reports the mean overlap@10 between our top 10 and
// bleve's on the query list (1 = same sets) and how often the first hit
// agrees, once with the default field weights and once with unit weights
// (both engines always get the same weights as boosts).
func BenchmarkOverlap(b *testing.B) {
	c := loadCorpus(b)
	ours := ourIndex(c)
	bl := sharedBleve(b, c)
	qs := queryTerms()
	unit := DefaultParams()
	unit.Weights = [NumFields]float64{1, 1, 1, 1, 1}
	cases := []struct {
		name string
		p    Params
	}{{"default", DefaultParams()}, {"unit", unit}}
	sum := make([]float64, len(cases))
	top1 := make([]int, len(cases))
	for b.Loop() {
		for ci, tc := range cases {
			sum[ci], top1[ci] = 0, 0
			for qi, q := range qs {
				want, err := bleveSearch(bl, q, 10, tc.p)
				if err != nil {
					b.Fatal(err)
				}
				got := docs(ours.Search(q, 10, tc.p))
				sum[ci] += overlap(got, want)
				if len(got) > 0 && len(want) > 0 && got[0] == want[0] {
					top1[ci]++
				}
				if testing.Verbose() && ci == 0 {
					b.Logf("%-28q ours %v bleve %v", benchQueries[qi], names(c, got, 3), names(c, want, 3))
				}
			}
		}
	}
	for ci, tc := range cases {
		b.ReportMetric(sum[ci]/float64(len(qs)), "overlap@10-"+tc.name)
		b.ReportMetric(float64(top1[ci])/float64(len(qs)), "top1-agree-"+tc.name)
	}
}

// names returns "path:Name" of the first n docs, for logs.
func names(c *corpus, ds []int, n int) []string {
	var out []string
	for _, d := range ds[:min(n, len(ds))] {
		out = append(out, c.docs[d].Fields[FieldPath]+":"+c.docs[d].Fields[FieldName])
	}
	return out
}

func overlap(a, b []int) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	in := make(map[int]bool, len(b))
	for _, d := range b {
		in[d] = true
	}
	n := 0
	for _, d := range a {
		if in[d] {
			n++
		}
	}
	return float64(n) / float64(max(len(a), len(b)))
}
