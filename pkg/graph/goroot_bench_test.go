package graph_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"codectx/pkg/chunk"
	"codectx/pkg/codectx"
	"codectx/pkg/graph"
)

// BenchmarkBuildGOROOT times graph.Build over the code files of
// $GOROOT/src, chunked as the index chunks them (go.mod files give the
// modules). It runs when CODECTX_BENCH_GRAPH_GOROOT=1 and logs the
// encoded graph's SHA-256, so two builds can be compared byte for byte.
func BenchmarkBuildGOROOT(b *testing.B) {
	in := gorootInput(b)
	data, err := graph.Build(in).MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d files, graph %d bytes, sha256 %x", len(in.Files), len(data), sha256.Sum256(data))
	b.ResetTimer()
	for range b.N {
		graph.Build(in)
	}
}

// BenchmarkMemoGOROOT times graph.Memo's Build of $GOROOT/src after a
// one-file change (a call added to, then removed from, the first symbol
// of net/http/server.go, ids after it shifted), as a push rebuilds it,
// and checks each graph against graph.Build's byte for byte.
func BenchmarkMemoGOROOT(b *testing.B) {
	in := gorootInput(b)
	edited := in
	edited.Files = slices.Clone(in.Files)
	i := slices.IndexFunc(edited.Files, func(f graph.FileInput) bool { return f.Path == "net/http/server.go" })
	if i < 0 {
		b.Fatal("no net/http/server.go")
	}
	f := &edited.Files[i]
	f.Symbols = slices.Clone(f.Symbols)
	f.Symbols[0].Calls = append(slices.Clone(f.Symbols[0].Calls), "ListenAndServe", "strings.Cut")
	f.Symbols = append(f.Symbols, graph.SymbolInput{ID: f.Symbols[len(f.Symbols)-1].ID + 1, Name: "extraHelper", Kind: codectx.KindFunction, Calls: []string{"Error"}})
	ins := []graph.Input{in, edited}
	var memo graph.Memo
	for k, x := range ins {
		want, err := graph.Build(x).MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		memo.Build(ins[1-k])
		got, err := memo.Build(x).MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			b.Fatalf("input %d: memo graph differs from Build's", k)
		}
	}
	b.ResetTimer()
	for n := range b.N {
		memo.Build(ins[n%2])
	}
}

// gorootInput is the graph input of $GOROOT/src's code files.
func gorootInput(b *testing.B) graph.Input {
	if os.Getenv("CODECTX_BENCH_GRAPH_GOROOT") != "1" {
		b.Skip("set CODECTX_BENCH_GRAPH_GOROOT=1")
	}
	root := filepath.Join(runtime.GOROOT(), "src")
	var paths []string
	in := graph.Input{GoModules: map[string]string{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if path.Base(rel) == "go.mod" {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, line := range strings.Split(string(data), "\n") {
				if mod, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
					if dir := path.Dir(rel); dir == "." {
						in.GoModule = strings.TrimSpace(mod)
					} else {
						in.GoModules[dir] = strings.TrimSpace(mod)
					}
				}
			}
		}
		paths = append(paths, rel)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	files := make([]*graph.FileInput, len(paths))
	var wg sync.WaitGroup
	n := runtime.GOMAXPROCS(0)
	for w := range n {
		wg.Go(func() {
			for i := w; i < len(paths); i += n {
				data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(paths[i])))
				if err != nil || len(data) > 1<<20 {
					continue
				}
				r := chunk.Parse(context.Background(), paths[i], data, chunk.Options{})
				switch r.Language {
				case codectx.Go, codectx.Python, codectx.TypeScript, codectx.TSX, codectx.JavaScript, codectx.Java, codectx.Rust:
				default:
					continue
				}
				if r.Skip != "" {
					continue
				}
				fin := &graph.FileInput{Path: paths[i], Language: r.Language, Package: r.Package, Imports: r.Imports}
				for id, c := range r.Chunks {
					if c.Kind != codectx.KindWindow {
						fin.Symbols = append(fin.Symbols, graph.SymbolInput{ID: i<<16 | id, Name: c.Name, Kind: c.Kind, Calls: c.Calls, Types: c.Types})
					}
				}
				files[i] = fin
			}
		})
	}
	wg.Wait()
	for _, f := range files {
		if f != nil {
			in.Files = append(in.Files, *f)
		}
	}
	return in
}
