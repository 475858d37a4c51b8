package bm25

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"codectx/pkg/tokenize"
)

func doc(name, sig, docText, body, path string) Doc {
	return Doc{Fields: [NumFields]string{name, sig, docText, body, path}}
}

func build(docs ...Doc) *Index {
	b := NewBuilder()
	for _, d := range docs {
		b.Add(d)
	}
	return b.Build()
}

func docs(hits []Hit) []int {
	out := make([]int, len(hits))
	for i, h := range hits {
		out[i] = h.Doc
	}
	return out
}

func TestRanking(t *testing.T) {
	filler := doc("helper", "func helper()", "", "return nil", "util/helper.go")
	tests := []struct {
		name  string
		docs  []Doc
		query string
		p     func(*Params)
		want  []int
	}{
		{
			name: "exact identifier beats partial",
			docs: []Doc{
				doc("loadFile", "func loadFile()", "", "config := read()", "a.go"),
				doc("load_config", "def load_config()", "", "pass", "b.py"),
				doc("configure", "func configure()", "", "load()", "c.go"),
				filler,
			},
			query: "load_config",
			want:  []int{1, 0, 2},
		},
		{
			name: "split query reaches snake and camel case",
			docs: []Doc{
				filler,
				doc("ConfigLoader", "class ConfigLoader", "", "", "x.py"),
				doc("load_config", "def load_config()", "", "", "y.py"),
			},
			query: "load config",
			want:  []int{2, 1}, // both reached; "loader" is not "load"
		},
		{
			name: "name field outweighs body",
			docs: []Doc{
				doc("render", "func render()", "", "parse the token stream here", "r.go"),
				doc("parse", "func parse()", "", "render the output here", "p.go"),
				filler,
			},
			query: "parse",
			want:  []int{1, 0},
		},
		{
			name: "weights flip the order",
			docs: []Doc{
				doc("render", "func render()", "", "parse the token stream here", "r.go"),
				doc("parse", "func parse()", "", "render the output here", "p.go"),
				filler,
			},
			query: "parse",
			p: func(p *Params) {
				p.Weights = [NumFields]float64{FieldBody: 1}
			},
			want: []int{0},
		},
		{
			name: "length normalisation prefers the short body",
			docs: []Doc{
				doc("a", "", "", "mutex lock unlock wait signal broadcast timer queue worker pool", ""),
				doc("b", "", "", "mutex queue", ""),
				filler,
			},
			query: "mutex",
			want:  []int{1, 0},
		},
		{
			name: "b=0 disables length normalisation",
			docs: []Doc{
				doc("a", "", "", "mutex lock unlock wait signal broadcast timer queue worker pool", ""),
				doc("b", "", "", "mutex queue", ""),
				filler,
			},
			query: "mutex",
			p:     func(p *Params) { p.B = 0 },
			want:  []int{0, 1}, // equal scores, ties by doc id
		},
		{
			name: "rare term outweighs common",
			docs: []Doc{
				doc("a", "", "", "http http http", ""),
				doc("b", "", "", "http header", ""),
				doc("c", "", "", "http", ""),
				doc("d", "", "", "http", ""),
			},
			query: "http header",
			want:  []int{1, 0, 2, 3},
		},
		{
			name:  "unknown term finds nothing",
			docs:  []Doc{filler},
			query: "zebra",
			want:  []int{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := build(tt.docs...)
			p := DefaultParams()
			if tt.p != nil {
				tt.p(&p)
			}
			got := docs(ix.Search(tokenize.QueryTokens(tt.query), 10, p))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Search(%q) = %v, want %v", tt.query, got, tt.want)
			}
		})
	}
}

func TestScoreFormula(t *testing.T) {
	// "foo" is in doc 0 only: name tf 2 (length 2), body tf 1 (length 3).
	b := NewBuilder()
	b.AddTokens([NumFields][]string{FieldName: {"foo", "foo"}, FieldBody: {"foo", "bar", "baz"}})
	b.AddTokens([NumFields][]string{FieldName: {"bar"}, FieldBody: {"baz"}})
	ix := b.Build()
	p := DefaultParams()
	got := ix.Search([]string{"foo"}, 10, p)
	if len(got) != 1 || got[0].Doc != 0 {
		t.Fatalf("hits = %v, want doc 0 only", got)
	}
	N, df := 2.0, 1.0
	idf := math.Log(1 + (N-df+0.5)/(df+0.5))
	avgName, avgBody := 1.5, 2.0
	tf := p.Weights[FieldName]*2/(1-p.B+p.B*2/avgName) + p.Weights[FieldBody]*1/(1-p.B+p.B*3/avgBody)
	want := idf * tf / (p.K1 + tf)
	if math.Abs(got[0].Score-want) > 1e-5 {
		t.Errorf("score = %v, want %v", got[0].Score, want)
	}
	if got, want := ix.DocFreq("baz"), 2; got != want {
		t.Errorf("DocFreq(baz) = %d, want %d", got, want)
	}
	if got, want := ix.DocFreq("nope"), 0; got != want {
		t.Errorf("DocFreq(nope) = %d, want %d", got, want)
	}
	if got, want := ix.NumDocs(), 2; got != want {
		t.Errorf("NumDocs = %d, want %d", got, want)
	}
}

func TestTopKAndFilter(t *testing.T) {
	b := NewBuilder()
	for i := 0; i < 50; i++ {
		// doc i has tf i%7+1 for "word" in a body of constant length
		toks := make([]string, 8)
		for j := range toks {
			toks[j] = "pad"
		}
		for j := 0; j <= i%7; j++ {
			toks[j] = "word"
		}
		b.AddTokens([NumFields][]string{FieldBody: toks})
	}
	ix := b.Build()
	p := DefaultParams()
	all := ix.Search([]string{"word"}, 100, p)
	if len(all) != 50 {
		t.Fatalf("len = %d, want 50", len(all))
	}
	for i := 1; i < len(all); i++ {
		if !better(all[i-1], all[i]) {
			t.Fatalf("hits %d,%d out of order: %v %v", i-1, i, all[i-1], all[i])
		}
	}
	top := ix.Search([]string{"word"}, 5, p)
	if !reflect.DeepEqual(top, all[:5]) {
		t.Errorf("top5 = %v, want %v", top, all[:5])
	}
	// Docs with tf 7: 6, 13, 20, 27, 34, 41, 48.
	if got, want := docs(top), []int{6, 13, 20, 27, 34}; !reflect.DeepEqual(got, want) {
		t.Errorf("top5 docs = %v, want %v", got, want)
	}
	odd := ix.SearchFilter([]string{"word"}, 3, p, func(d int) bool { return d%2 == 1 })
	if got, want := docs(odd), []int{13, 27, 41}; !reflect.DeepEqual(got, want) {
		t.Errorf("odd top3 = %v, want %v", got, want)
	}
	if got := ix.Search([]string{"word"}, 0, p); got != nil {
		t.Errorf("k=0: %v, want nil", got)
	}
	// Repeated searches reuse pooled scratch; results must not drift.
	for i := 0; i < 3; i++ {
		if got := ix.Search([]string{"word"}, 5, p); !reflect.DeepEqual(got, top) {
			t.Fatalf("repeat %d: %v, want %v", i, got, top)
		}
	}
}

func TestEmptyIndex(t *testing.T) {
	ix := NewBuilder().Build()
	if got := ix.Search([]string{"x"}, 10, DefaultParams()); len(got) != 0 {
		t.Errorf("hits = %v, want none", got)
	}
	data, err := ix.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	ix2, err := Load(data)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if ix2.NumDocs() != 0 {
		t.Errorf("NumDocs = %d, want 0", ix2.NumDocs())
	}
}

var vocab = []string{"parse", "http", "request", "header", "read", "file", "mutex", "lock",
	"unlock", "json", "unmarshal", "struct", "config", "load", "server", "client", "error",
	"buffer", "write", "close", "open", "path", "join", "split", "token"}

func randomIndex(r *rand.Rand, n int) *Index {
	b := NewBuilder()
	for i := 0; i < n; i++ {
		var f [NumFields][]string
		for fi := range f {
			m := r.IntN(12)
			for j := 0; j < m; j++ {
				// Zipf-ish: low indexes are common.
				f[fi] = append(f[fi], vocab[r.IntN(1+r.IntN(len(vocab)))])
			}
		}
		b.AddTokens(f)
	}
	return b.Build()
}

func TestMarshalRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 20; trial++ {
		ix := randomIndex(r, 1+r.IntN(300))
		data, err := ix.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		ix2, err := Load(data)
		if err != nil {
			t.Fatalf("trial %d: Load: %v", trial, err)
		}
		if ix2.NumDocs() != ix.NumDocs() || ix2.NumTerms() != ix.NumTerms() {
			t.Fatalf("trial %d: docs/terms %d/%d, want %d/%d", trial, ix2.NumDocs(), ix2.NumTerms(), ix.NumDocs(), ix.NumTerms())
		}
		data2, _ := ix2.MarshalBinary()
		if string(data2) != string(data) {
			t.Fatalf("trial %d: re-marshal differs", trial)
		}
		p := DefaultParams()
		p.B = r.Float64()
		p.K1 = 0.5 + r.Float64()
		for q := 0; q < 20; q++ {
			var query []string
			for j := r.IntN(4); j >= 0; j-- {
				query = append(query, vocab[r.IntN(len(vocab))])
			}
			k := 1 + r.IntN(20)
			want := ix.Search(query, k, p)
			got := ix2.Search(query, k, p)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("trial %d query %v: loaded %v, built %v", trial, query, got, want)
			}
			for _, w := range query {
				if ix2.DocFreq(w) != ix.DocFreq(w) {
					t.Fatalf("DocFreq(%s) = %d, want %d", w, ix2.DocFreq(w), ix.DocFreq(w))
				}
			}
		}
	}
}

func TestLoadCorrupt(t *testing.T) {
	ix := randomIndex(rand.New(rand.NewPCG(3, 4)), 40)
	good, err := ix.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(good); err != nil {
		t.Fatalf("good segment: %v", err)
	}
	flip := func(i int) []byte {
		b := append([]byte(nil), good...)
		b[i] ^= 0x40
		return b
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"nil", nil},
		{"magic only", []byte(magic)},
		{"bad magic", flip(0)},
		{"bad version", flip(len(magic))},
		{"flipped body byte", flip(len(good) / 2)},
		{"flipped checksum", flip(len(good) - 1)},
		{"truncated by one", good[:len(good)-1]},
		{"truncated to half", good[:len(good)/2]},
		{"trailing byte", append(append([]byte(nil), good...), 0)},
		{"valid checksum, bad body", withCRC(append([]byte(magic+"\x01"), 0xff, 0xff, 0xff))},
		{"valid checksum, huge doc count", withCRC(append([]byte(magic+"\x01"), 0xff, 0xff, 0xff, 0xff, 0x0f, 5))},
		{"valid checksum, wrong field count", withCRC([]byte(magic + "\x01\x00\x04\x00\x00"))},
		{"valid checksum, missing postings", withCRC([]byte(magic + "\x01\x00\x05\x00\x03"))},
	}
	for _, tt := range tests {
		_, err := Load(tt.data)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", tt.name, err)
		}
	}
	// Every truncation fails.
	for n := 0; n < len(good); n++ {
		if _, err := Load(good[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(good))
		}
	}
}

// withCRC returns a copy of body with a valid checksum appended.
func withCRC(body []byte) []byte {
	return appendCRC(append([]byte(nil), body...))
}

func TestConcurrentSearch(t *testing.T) {
	ix := randomIndex(rand.New(rand.NewPCG(5, 6)), 500)
	p := DefaultParams()
	queries := [][]string{{"parse", "http"}, {"mutex"}, {"json", "struct", "config"}, {"token", "path"}}
	want := make([][]Hit, len(queries))
	for i, q := range queries {
		want[i] = ix.Search(q, 10, p)
	}
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func(g int) {
			for i := 0; i < 50; i++ {
				qi := (g + i) % len(queries)
				if got := ix.Search(queries[qi], 10, p); !reflect.DeepEqual(got, want[qi]) {
					errs <- fmt.Errorf("goroutine %d: query %v = %v, want %v", g, queries[qi], got, want[qi])
					return
				}
			}
			errs <- nil
		}(g)
	}
	for g := 0; g < 8; g++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestPrefixed(t *testing.T) {
	ix := build(doc("", "", "", "serialize serializer serial", ""), doc("", "", "", "serialize series", ""))
	type hit struct {
		term string
		df   int
	}
	var got []hit
	ix.Prefixed("serial", func(term string, df int) bool {
		got = append(got, hit{term, df})
		return true
	})
	want := []hit{{"serial", 1}, {"serialize", 2}, {"serializer", 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Prefixed(serial) = %v, want %v", got, want)
	}
	n := 0
	ix.Prefixed("ser", func(string, int) bool { n++; return false })
	if n != 1 {
		t.Errorf("Prefixed did not stop when f returned false: %d calls", n)
	}
	ix.Prefixed("zzz", func(string, int) bool { t.Error("no term starts with zzz"); return true })
}

func TestSearchWeighted(t *testing.T) {
	ix := build(doc("", "", "", "alpha alpha", ""), doc("", "", "", "beta beta", ""), doc("", "", "", "gamma", ""))
	q := []string{"alpha", "beta"}
	plain := ix.Search(q, 3, DefaultParams())
	same := ix.SearchWeighted(q, []float64{1, 1}, 3, DefaultParams(), nil)
	if !reflect.DeepEqual(plain, same) {
		t.Errorf("weights of 1 = %v, want Search's %v", same, plain)
	}
	got := ix.SearchWeighted(q, []float64{0.25, 1}, 3, DefaultParams(), nil)
	if len(got) != 2 || got[0].Doc != 1 || got[1].Doc != 0 {
		t.Fatalf("alpha weighed 0.25: %v, want beta's doc first", got)
	}
	for _, h := range plain {
		if h.Doc == 0 && math.Abs(float64(got[1].Score)-0.25*float64(h.Score)) > 1e-5 {
			t.Errorf("alpha's doc scored %v at weight 0.25, want a quarter of %v", got[1].Score, h.Score)
		}
	}
	if got := ix.SearchWeighted(q, []float64{0, 0}, 3, DefaultParams(), nil); len(got) != 0 {
		t.Errorf("zero weights matched %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("mismatched weights did not panic")
		}
	}()
	ix.SearchWeighted(q, []float64{1}, 3, DefaultParams(), nil)
}

func TestDocs(t *testing.T) {
	b := NewBuilder()
	for i := 0; i < 300; i++ {
		toks := []string{"pad"}
		name := []string{"pad"}
		if i%2 == 0 {
			name = []string{"word"} // a second field with the term
		}
		if i%3 == 0 {
			// Large term frequencies take multi-byte varints.
			for j := 0; j < 200+i; j++ {
				toks = append(toks, "word")
			}
		}
		if i%3 != 0 {
			name = []string{"pad"}
		}
		b.AddTokens([NumFields][]string{FieldBody: toks, FieldName: name})
	}
	ix := b.Build()
	var got []int
	idf := ix.Docs("word", func(d int) { got = append(got, d) })
	if len(got) != 100 {
		t.Fatalf("Docs(word) = %d docs, want 100", len(got))
	}
	for i, d := range got {
		if d != 3*i {
			t.Fatalf("doc %d = %d, want %d", i, d, 3*i)
		}
	}
	if want := math.Log(1 + (300-100+0.5)/(100+0.5)); math.Abs(idf-want) > 1e-12 {
		t.Errorf("idf = %v, want %v", idf, want)
	}
	n := 0
	if idf := ix.Docs("pad", func(int) { n++ }); n != 300 || idf <= 0 {
		t.Errorf("Docs(pad) = %d docs, idf %v", n, idf)
	}
	if idf := ix.Docs("absent", func(int) { t.Error("called for an absent term") }); idf != 0 {
		t.Errorf("absent idf = %v", idf)
	}
}
