package bm25

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/whitespace"
	"github.com/blevesearch/bleve/v2/search/query"

	"codectx/pkg/tokenize"
)

// BenchmarkSingleField compares the two engines where they rank alike: one
// field holding every token of a document, plain BM25 (k1 1.2, b 0.75) in
// both. It reports overlap@10 and top-1 agreement, both engines' search
// time per query and their index sizes, all on the same corpus.
func BenchmarkSingleField(b *testing.B) {
	c := loadCorpus(b)
	whole := func(d Doc) []string {
		var all []string
		for _, s := range d.Fields {
			all = append(all, tokenize.Tokens(s)...)
		}
		return all
	}
	ob := NewBuilder()
	for _, d := range c.docs {
		var f [NumFields][]string
		f[FieldBody] = whole(d)
		ob.AddTokens(f)
	}
	ours := ob.Build()
	data, err := ours.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	var p Params
	p.K1, p.B = 1.2, 0.75
	p.Weights[FieldBody] = 1

	dir := filepath.Join(b.TempDir(), "single")
	im := bleve.NewIndexMapping()
	im.ScoringModel = "bm25"
	if err := im.AddCustomAnalyzer("ws", map[string]any{"type": custom.Name, "tokenizer": whitespace.Name}); err != nil {
		b.Fatal(err)
	}
	dm := bleve.NewDocumentStaticMapping()
	fm := bleve.NewTextFieldMapping()
	fm.Analyzer, fm.Store, fm.IncludeTermVectors, fm.IncludeInAll, fm.DocValues = "ws", false, false, false, false
	dm.AddFieldMappingsAt("body", fm)
	im.DefaultMapping, im.DefaultAnalyzer = dm, "ws"
	im.StoreDynamic, im.IndexDynamic, im.DocValuesDynamic = false, false, false
	ix, err := bleve.New(dir, im)
	if err != nil {
		b.Fatal(err)
	}
	batch := ix.NewBatch()
	for i, d := range c.docs {
		if err := batch.Index(strconv.Itoa(i), map[string]any{"body": strings.Join(whole(d), " ")}); err != nil {
			b.Fatal(err)
		}
	}
	if err := ix.Batch(batch); err != nil {
		b.Fatal(err)
	}
	ix.Close()
	size, err := bleveLiveBytes(dir, true)
	if err != nil {
		b.Fatal(err)
	}
	ix, err = bleve.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	search := func(terms []string) []int {
		var qs []query.Query
		for _, t := range terms {
			tq := bleve.NewTermQuery(t)
			tq.SetField("body")
			qs = append(qs, tq)
		}
		res, err := ix.Search(bleve.NewSearchRequestOptions(bleve.NewDisjunctionQuery(qs...), 10, 0, false))
		if err != nil {
			b.Fatal(err)
		}
		out := make([]int, len(res.Hits))
		for i, h := range res.Hits {
			out[i], _ = strconv.Atoi(h.ID)
		}
		return out
	}
	qs := queryTerms()
	var sum float64
	top1 := 0
	for _, q := range qs {
		got, want := docs(ours.Search(q, 10, p)), search(q)
		sum += overlap(got, want)
		if len(got) > 0 && len(want) > 0 && got[0] == want[0] {
			top1++
		}
	}
	b.ResetTimer()
	var oursT, bleveT float64
	for b.Loop() {
		t := testingNow()
		for _, q := range qs {
			ours.Search(q, 10, p)
		}
		oursT += testingSince(t)
		t = testingNow()
		for _, q := range qs {
			search(q)
		}
		bleveT += testingSince(t)
	}
	n := float64(b.N * len(qs))
	b.ReportMetric(sum/float64(len(qs)), "overlap@10")
	b.ReportMetric(float64(top1)/float64(len(qs)), "top1-agree")
	b.ReportMetric(oursT/n, "ours-ns/query")
	b.ReportMetric(bleveT/n, "bleve-ns/query")
	b.ReportMetric(float64(len(data))/float64(c.bytes), "ours-size/source")
	b.ReportMetric(float64(size)/float64(c.bytes), "bleve-size/source")
}

func testingNow() int64 { return nowNanos() }

func testingSince(t int64) float64 { return float64(nowNanos() - t) }
