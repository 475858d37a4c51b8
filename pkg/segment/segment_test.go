package segment_test

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"codectx/pkg/bm25"
	"codectx/pkg/codectx"
	"codectx/pkg/graph"
	"codectx/pkg/segment"
)

func sample() *segment.Segment {
	chunks := []codectx.Chunk{
		{Path: "mux.go", Language: codectx.Go, Kind: codectx.KindModule, Name: "mux", Body: "package mux", StartLine: 1, EndLine: 1},
		{Path: "mux.go", Language: codectx.Go, Kind: codectx.KindMethod, Name: "(*Router).Mount", Body: "func (r *Router) Mount() {}", StartLine: 3, EndLine: 3},
		{Path: "route.go", Language: codectx.Go, Kind: codectx.KindStruct, Name: "Route", Body: "type Route struct{}", StartLine: 1, EndLine: 1},
		{Path: "README.md", Language: codectx.Markdown, Kind: codectx.KindWindow, Name: "README.md#L1", Body: "# mux", StartLine: 1, EndLine: 1},
	}
	files := []segment.File{
		{Path: "mux.go", Language: codectx.Go, Chunks: []int{0, 1}},
		{Path: "route.go", Language: codectx.Go, Chunks: []int{2}},
		{Path: "README.md", Language: codectx.Markdown, Chunks: []int{3}},
	}
	b, fb := bm25.NewBuilder(), bm25.NewBuilder()
	for _, c := range chunks {
		var d bm25.Doc
		d.Fields[bm25.FieldName], d.Fields[bm25.FieldBody] = c.Name, c.Body
		b.Add(d)
	}
	for _, f := range files {
		var d bm25.Doc
		d.Fields[bm25.FieldPath] = f.Path
		fb.Add(d)
	}
	g := graph.Build(graph.Input{})
	return segment.New(segment.Meta{Tenant: "t", Repo: "gorilla/mux", Commit: "abc"}, files, chunks, b.Build(), fb.Build(), g,
		[]segment.Commit{{Hash: "abc", Message: "add Mount", Files: []string{"mux.go"}}})
}

func TestRoundTrip(t *testing.T) {
	s := sample()
	data, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := segment.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Meta.Repo != s.Meta.Repo || got.Meta.Commit != s.Meta.Commit || got.Meta.Tenant != s.Meta.Tenant {
		t.Errorf("meta = %+v, want %+v", got.Meta, s.Meta)
	}
	if len(got.Chunks) != len(s.Chunks) || got.Chunks[1].Name != "(*Router).Mount" {
		t.Errorf("chunks = %+v", got.Chunks)
	}
	if len(got.History) != 1 || got.History[0].Message != "add Mount" {
		t.Errorf("history = %+v", got.History)
	}
	if hits := got.BM25.Search([]string{"mount"}, 5, bm25.DefaultParams()); len(hits) != 1 || hits[0].Doc != 1 {
		t.Errorf("bm25 after load: %+v", hits)
	}
	if f, ok := got.File("route.go"); !ok || !slices.Equal(f.Chunks, []int{2}) {
		t.Errorf("File(route.go) = %+v, %v", f, ok)
	}
	again, err := got.MarshalBinary()
	if err != nil || string(again) != string(data) {
		t.Errorf("re-encoding differs (err %v)", err)
	}
}

func TestLookup(t *testing.T) {
	s := sample()
	tests := []struct {
		name string
		want []int
	}{
		{"(*Router).Mount", []int{1}},
		{"Router.Mount", []int{1}},
		{"router.mount", []int{1}},
		{"Mount", []int{1}},
		{"mount", []int{1}},
		{"Route", []int{2}},
		{"README.md#L1", nil}, // windows are not symbols
		{"Missing", nil},
	}
	for _, tt := range tests {
		if got := s.Lookup(tt.name); !slices.Equal(got, tt.want) {
			t.Errorf("Lookup(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	if !s.HasSymbol("Route") || s.HasSymbol("Nope") {
		t.Error("HasSymbol disagrees with Lookup")
	}
	if got := s.LookupPrefix("rout", 5); !slices.Contains(got, 1) || !slices.Contains(got, 2) {
		t.Errorf("LookupPrefix(rout) = %v, want 1 and 2", got)
	}
}

func TestNames(t *testing.T) {
	tests := []struct{ in, short, norm string }{
		{"(*Router).Mount", "Mount", "router.mount"},
		{"(Router).Name", "Name", "router.name"},
		{"Flask.add_url_rule", "add_url_rule", "flask.add_url_rule"},
		{"Deserializer::deserialize_any", "deserialize_any", "deserializer.deserialize_any"},
		{"parse_url", "parse_url", "parse_url"},
	}
	for _, tt := range tests {
		if got := segment.ShortName(tt.in); got != tt.short {
			t.Errorf("ShortName(%q) = %q, want %q", tt.in, got, tt.short)
		}
		if got := segment.NormalizeName(tt.in); got != tt.norm {
			t.Errorf("NormalizeName(%q) = %q, want %q", tt.in, got, tt.norm)
		}
	}
}

func TestCorrupt(t *testing.T) {
	data, err := sample().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("XXXXXXXX"), data[8:]...),
		"truncated": data[:len(data)/2],
		"flipped":   flip(data, len(data)/3),
	}
	for name, d := range cases {
		if _, err := segment.Load(d); !errors.Is(err, segment.ErrCorrupt) {
			t.Errorf("%s: Load error = %v, want ErrCorrupt", name, err)
		}
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0xff
	return c
}

func FuzzLoad(f *testing.F) {
	data, _ := sample().MarshalBinary()
	f.Add(data)
	f.Add(data[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := segment.Load(b)
		if err != nil {
			return
		}
		s.Lookup("x")
		// Whatever loads re-encodes to bytes that load to the same
		// segment: encoding what was decoded is a fixed point.
		once, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("MarshalBinary of a loaded segment: %v", err)
		}
		s2, err := segment.Load(once)
		if err != nil {
			t.Fatalf("a re-encoded segment does not load: %v", err)
		}
		twice, err := s2.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(once, twice) {
			t.Fatalf("re-encoding a loaded segment is not stable: %d vs %d bytes", len(once), len(twice))
		}
		if len(s2.Files) != len(s.Files) || len(s2.Chunks) != len(s.Chunks) {
			t.Fatalf("round trip changed the segment: %d/%d files, %d/%d chunks", len(s2.Files), len(s.Files), len(s2.Chunks), len(s.Chunks))
		}
	})
}

func TestMemoBuildsOnce(t *testing.T) {
	s := segment.New(segment.Meta{Repo: "r"}, nil, nil, nil, nil, nil, nil)
	var builds atomic.Int32
	var wg sync.WaitGroup
	got := make([]any, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = s.Memo("k", func() any { builds.Add(1); return new(int) })
		}()
	}
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Errorf("built %d times, want 1", n)
	}
	for _, v := range got {
		if v != got[0] {
			t.Fatalf("callers got different values")
		}
	}
	if other := s.Memo("other", func() any { return 2 }); other != 2 {
		t.Errorf("Memo(other) = %v, want 2", other)
	}
}
