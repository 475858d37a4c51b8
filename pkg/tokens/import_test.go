package tokens

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyTokensImportsTheLibrary guards the vocabulary's hand-over: load
// sets the library's o200k map to nil once it is copied, so a codec the
// library made after that would count with an empty vocabulary, silently.
// No package of the module but this one may import the library.
func TestOnlyTokensImportsTheLibrary(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	const lib = "github.com/tiktoken-go/tokenizer"
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if (p == lib || strings.HasPrefix(p, lib+"/")) && filepath.Dir(rel) != filepath.Join("pkg", "tokens") {
				t.Errorf("%s imports %s: only pkg/tokens may (it empties the library's vocabulary)", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files from %s: not the module", files, root)
	}
}
