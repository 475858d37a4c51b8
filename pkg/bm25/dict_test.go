package bm25

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"codectx/pkg/tokenize"
)

func TestDictAppendTerms(t *testing.T) {
	d := NewDict()
	long := strings.Repeat("abcDef", 40) // longer than maxCachedWord
	for _, text := range []string{
		"", "   ", "parseHTTPRequest2 load_config",
		"func (s *Server) ServeHTTP(w http.ResponseWriter) { s.ServeHTTP(w) }",
		"URLs IDsFor utf8 the of a classes statuses",
		"naïve Ünïcode 名前 x\xffy",
		long + " " + long,
		"parseHTTPRequest2 load_config", // cached words again
	} {
		got := d.AppendTerms(nil, text)
		var terms []string
		for _, id := range got {
			terms = append(terms, d.terms[id])
		}
		if want := tokenize.Tokens(text); !slices.Equal(terms, want) {
			t.Errorf("AppendTerms(%q) = %q, want %q", text, terms, want)
		}
	}
}

// A builder sharing its dictionary with another builds the index a
// builder of its own documents alone builds, byte for byte.
func TestSharedDictBuild(t *testing.T) {
	docs := []Doc{
		{Fields: [NumFields]string{"LoadConfig", "func LoadConfig(path string) (*Config, error)", "LoadConfig reads the file", "data, err := os.ReadFile(path)", "config/load.go"}},
		{Fields: [NumFields]string{"", "", "", "", ""}},
		{Fields: [NumFields]string{"ServeHTTP", "", "", "w.WriteHeader(200) w.WriteHeader(404)", "server/http.go"}},
	}
	other := []Doc{
		{Fields: [NumFields]string{"zzz", "", "", "only here", "elsewhere.txt"}},
	}
	d := NewDict()
	shared, sibling := NewBuilderDict(d), NewBuilderDict(d)
	own := NewBuilder()
	for i, doc := range docs {
		if i == 1 {
			for _, o := range other {
				sibling.add(d, o)
			}
		}
		shared.add(d, doc)
		own.Add(doc)
	}
	for _, o := range other {
		sibling.add(d, o)
	}
	a, err := shared.Build().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b, err := own.Build().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("shared-dictionary index differs from the builder's own")
	}
	if n := sibling.Build().NumTerms(); n != len(tokenize.Tokens(strings.Join(other[0].Fields[:], " "))) {
		t.Errorf("sibling index has %d terms", n)
	}
}

// add adds doc through the dictionary's term ids.
func (b *Builder) add(d *Dict, doc Doc) {
	var ids [NumFields][]uint32
	for f, s := range doc.Fields {
		ids[f] = d.AppendTerms(nil, s)
	}
	b.AddIDs(&ids)
}
