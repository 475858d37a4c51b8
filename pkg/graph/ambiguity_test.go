package graph

import (
	"slices"
	"testing"

	"codectx/pkg/codectx"
)

func pyFile(path string, imports []string, syms ...SymbolInput) FileInput {
	return FileInput{Path: path, Language: codectx.Python, Imports: imports, Symbols: syms}
}

func TestConservativeResolution(t *testing.T) {
	tests := []struct {
		name          string
		in            Input
		want          []string // symbol edges
		ambiguous     int
		ambiguousType int
	}{
		{
			name: "two parse functions, no import: no edge",
			in: Input{Files: []FileInput{
				pyFile("a.py", nil, sym(1, "parse", fn, nil, nil)),
				pyFile("b.py", nil, sym(2, "parse", fn, nil, nil)),
				pyFile("c.py", nil, sym(3, "run_all", fn, []string{"parse"}, nil)),
			}},
			want:      nil,
			ambiguous: 1,
		},
		{
			name: "two parse functions, import picks one",
			in: Input{Files: []FileInput{
				pyFile("a.py", nil, sym(1, "parse", fn, nil, nil)),
				pyFile("b.py", nil, sym(2, "parse", fn, nil, nil)),
				pyFile("c.py", []string{"a", "a.parse"}, sym(3, "run_all", fn, []string{"parse"}, nil)),
			}},
			want: []string{"call run_all -> parse"},
		},
		{
			name: "same-file definition shadows the rest of the repo",
			in: Input{Files: []FileInput{
				pyFile("a.py", nil, sym(1, "parse", fn, nil, nil), sym(2, "main", fn, []string{"parse"}, nil)),
				pyFile("b.py", nil, sym(3, "parse", fn, nil, nil)),
			}},
			want: []string{"call main -> parse"},
		},
		{
			name: "repo-wide unique name resolves without import",
			in: Input{Files: []FileInput{
				pyFile("a.py", nil, sym(1, "tokenize_words", fn, nil, nil)),
				pyFile("b.py", nil, sym(2, "main", fn, []string{"tokenize_words"}, nil)),
			}},
			want: []string{"call main -> tokenize_words"},
		},
		{
			name: "repo-wide unique but common name: no edge",
			in: Input{Files: []FileInput{
				pyFile("a.py", nil, sym(1, "get", fn, nil, nil), sym(2, "Thing.close", method, nil, nil)),
				pyFile("b.py", nil, sym(3, "main", fn, []string{"get", "f.close"}, nil)),
			}},
			want: nil,
		},
		{
			name: "unique method name on unknown receiver resolves, duplicated does not",
			in: Input{Files: []FileInput{
				pyFile("a.py", nil, sym(1, "Lexer.feed_chars", method, nil, nil),
					sym(2, "Lexer.reset_state", method, nil, nil)),
				pyFile("b.py", nil, sym(3, "Parser.reset_state", method, nil, nil)),
				pyFile("c.py", nil, sym(4, "main", fn, []string{"lx.feed_chars", "p.reset_state"}, nil)),
			}},
			want:      []string{"call main -> Lexer.feed_chars"},
			ambiguous: 1,
		},
		{
			// bytes.decode(), str.split(), list.extend(): a built-in
			// type's method on a receiver of unknown type is not the
			// repository's only method of that name (every .decode()
			// call was JSONDecoder.decode's); through self it still is.
			name: "built-in type's method name on unknown receiver: no edge",
			in: Input{Files: []FileInput{
				pyFile("a.py", nil, sym(1, "JSONDecoder.decode", method, nil, nil),
					sym(2, "JSONDecoder.raw", method, []string{"self.decode"}, nil)),
				pyFile("b.py", nil, sym(3, "main", fn, []string{"data.decode", "line.split"}, nil),
					sym(4, "Words.split", method, nil, nil)),
			}},
			want: []string{"call JSONDecoder.raw -> JSONDecoder.decode"},
		},
		{
			name: "self call to a method the class lacks: no edge",
			in: Input{Files: []FileInput{
				pyFile("a.py", nil, sym(1, "A", class, nil, nil), sym(2, "A.go", method, []string{"self.missing", "self.go"}, nil),
					sym(3, "B.missing", method, nil, nil)),
			}},
			want: nil, // self.go is recursion: no self edge either
		},
		{
			name: "Go qualifier picks the imported package's Parse",
			in: Input{GoModule: "m", Files: []FileInput{
				{Path: "x/x.go", Language: codectx.Go, Package: "x", Symbols: []SymbolInput{sym(1, "Parse", fn, nil, nil)}},
				{Path: "y/y.go", Language: codectx.Go, Package: "y", Symbols: []SymbolInput{sym(2, "Parse", fn, nil, nil)}},
				{Path: "z/z.go", Language: codectx.Go, Package: "z", Imports: []string{"m/y"},
					Symbols: []SymbolInput{sym(3, "Run", fn, []string{"y.Parse", "x.Parse", "Parse"}, nil)}},
			}},
			// y.Parse and bare Parse (through z's imports) both reach y's
			// Parse; x is not imported, so x.Parse stays unresolved.
			want: []string{"call Run -> Parse"},
		},
		{
			name: "Go build-tag variants of one function count as one target",
			in: Input{GoModule: "m", Files: []FileInput{
				{Path: "fs/open_unix.go", Language: codectx.Go, Package: "fs", Symbols: []SymbolInput{sym(1, "openFile", fn, nil, nil)}},
				{Path: "fs/open_windows.go", Language: codectx.Go, Package: "fs", Symbols: []SymbolInput{sym(2, "openFile", fn, nil, nil)}},
				{Path: "fs/fs.go", Language: codectx.Go, Package: "fs", Symbols: []SymbolInput{sym(3, "Open", fn, []string{"openFile"}, nil)}},
				{Path: "other/o.go", Language: codectx.Go, Package: "other", Symbols: []SymbolInput{sym(4, "openFile", fn, nil, nil)}},
			}},
			want: []string{"call Open -> openFile"},
		},
		{
			name: "two Config classes, no import: no type edge",
			in: Input{Files: []FileInput{
				pyFile("a.py", nil, sym(1, "Config", class, nil, nil)),
				pyFile("b.py", nil, sym(2, "Config", class, nil, nil)),
				pyFile("c.py", nil, sym(3, "load_it", fn, nil, []string{"Config"})),
			}},
			ambiguousType: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := Build(tt.in)
			_, _, got := edgeSets(tt.in, g)
			if !slices.Equal(got, sorted(tt.want)) {
				t.Errorf("symbol edges = %q, want %q", got, sorted(tt.want))
			}
			st := g.Stats()
			if st.Ambiguous != tt.ambiguous || st.AmbiguousTypes != tt.ambiguousType {
				t.Errorf("Ambiguous, AmbiguousTypes = %d, %d; want %d, %d",
					st.Ambiguous, st.AmbiguousTypes, tt.ambiguous, tt.ambiguousType)
			}
		})
	}
}

// The Go qualifier case above resolves "y.Parse" and the bare "Parse"
// (through z's imports) to the same symbol; make sure x's Parse is never
// linked.
func TestGoQualifierTarget(t *testing.T) {
	in := Input{GoModule: "m", Files: []FileInput{
		{Path: "x/x.go", Language: codectx.Go, Package: "x", Symbols: []SymbolInput{sym(1, "Parse", fn, nil, nil)}},
		{Path: "y/y.go", Language: codectx.Go, Package: "y", Symbols: []SymbolInput{sym(2, "Parse", fn, nil, nil)}},
		{Path: "z/z.go", Language: codectx.Go, Package: "z", Imports: []string{"m/y", "net/http"},
			Symbols: []SymbolInput{sym(3, "Run", fn, []string{"y.Parse", "x.Parse", "http.Get"}, nil)}},
	}}
	g := Build(in)
	var got []int
	for _, n := range g.SymbolNeighbors(3) {
		got = append(got, n.ID)
	}
	if want := []int{2}; !slices.Equal(got, want) {
		t.Errorf("SymbolNeighbors(3) ids = %v, want %v", got, want)
	}
}

func TestNoModuleNoGoEdges(t *testing.T) {
	// Without a go.mod, one import of "net/http" is no evidence that import
	// paths are directory paths: it must not bind to a directory that
	// happens to be called net/http.
	in := Input{Files: []FileInput{
		{Path: "net/http/server.go", Language: codectx.Go, Package: "http"},
		{Path: "main.go", Language: codectx.Go, Package: "main", Imports: []string{"net/http"}},
	}}
	g := Build(in)
	if e := g.Edges(); len(e) != 0 {
		t.Errorf("Edges() = %v, want none", e)
	}
	if got := g.Stats().Unresolved; got != 1 {
		t.Errorf("Unresolved = %d, want 1", got)
	}
}

func TestInferredGoRoot(t *testing.T) {
	goFile := func(p, pkg string, imports ...string) FileInput {
		return FileInput{Path: p, Language: codectx.Go, Package: pkg, Imports: imports}
	}
	tests := []struct {
		name  string
		files []FileInput
		want  []string // "from -> to" file import edges
	}{
		{
			name: "GOPATH-era repository: the prefix of two local directories",
			files: []FileInput{
				goFile("mux.go", "mux", `"github.com/o/mux/internal/re"`, `"github.com/o/mux/util"`, `"net/http"`),
				goFile("internal/re/re.go", "re"),
				goFile("util/util.go", "util"),
				goFile("net/http/fake.go", "http"), // not what "net/http" means here
			},
			want: []string{"mux.go -> internal/re/re.go", "mux.go -> util/util.go"},
		},
		{
			name: "GOROOT-style tree: import paths are directories",
			files: []FileInput{
				goFile("net/http/server.go", "http", `"net/url"`, `"io"`),
				goFile("net/url/url.go", "url", `"strings"`),
				goFile("io/io.go", "io"),
			},
			want: []string{"net/http/server.go -> io/io.go", "net/http/server.go -> net/url/url.go"},
		},
		{
			name: "a root go.mod wins over inference",
			files: []FileInput{
				goFile("a/a.go", "a", `"other.com/x/b"`, `"other.com/x/c"`),
				goFile("b/b.go", "b"),
				goFile("c/c.go", "c"),
			},
			want: nil,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Files: tt.files}
			if i == 2 {
				in.GoModule = "example.com/m"
			}
			var got []string
			for _, e := range Build(in).Edges() {
				if e.Kind == EdgeImport {
					got = append(got, e.From+" -> "+e.To)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("import edges = %v, want %v", got, tt.want)
			}
		})
	}
}
