package graph

import (
	"fmt"
	"math/rand"
	"testing"

	"codectx/pkg/codectx"
)

// synthetic builds a deterministic Go + Python repository with about
// nsym symbols: packages of 10 files with 10 symbols each, every file
// importing 3 other packages and every symbol making 4 calls (same
// package, imported package, method on a receiver, external) and 2 type
// references.
func synthetic(nsym int) Input {
	rng := rand.New(rand.NewSource(1))
	const filesPer, symsPer = 10, 10
	npkg := nsym / (filesPer * symsPer)
	in := Input{GoModule: "example.com/big"}
	id := 0
	for p := 0; p < npkg; p++ {
		lang, ext := codectx.Go, ".go"
		if p%2 == 1 {
			lang, ext = codectx.Python, ".py"
		}
		for f := 0; f < filesPer; f++ {
			fi := FileInput{
				Path:     fmt.Sprintf("pkg%d/file%d%s", p, f, ext),
				Language: lang,
				Package:  fmt.Sprintf("pkg%d", p),
			}
			var deps []int
			for i := 0; i < 3; i++ {
				q := (p + 2*(1+rng.Intn(npkg/2))) % npkg // same language parity
				if q%2 != p%2 {
					q = (q + 1) % npkg
				}
				deps = append(deps, q)
				if lang == codectx.Go {
					fi.Imports = append(fi.Imports, fmt.Sprintf("example.com/big/pkg%d", q))
				} else {
					fi.Imports = append(fi.Imports, fmt.Sprintf("pkg%d.file%d", q, rng.Intn(filesPer)))
				}
			}
			fi.Imports = append(fi.Imports, "fmt")
			for s := 0; s < symsPer; s++ {
				name := fmt.Sprintf("Func%d_%d", f, s)
				kind := codectx.KindFunction
				if s%5 == 0 {
					name, kind = fmt.Sprintf("Type%d_%d", f, s), codectx.KindStruct
				} else if s%5 == 1 {
					name, kind = fmt.Sprintf("(*Type%d_%d).Method%d", f, s-1, s), codectx.KindMethod
				}
				dep := deps[rng.Intn(len(deps))]
				fi.Symbols = append(fi.Symbols, SymbolInput{
					ID: id, Name: name, Kind: kind,
					Calls: []string{
						fmt.Sprintf("Func%d_%d", rng.Intn(filesPer), 2+rng.Intn(3)),
						fmt.Sprintf("pkg%d.Func%d_%d", dep, rng.Intn(filesPer), 2+rng.Intn(3)),
						fmt.Sprintf("x.Method%d", 1+5*rng.Intn(2)),
						"fmt.Println",
					},
					Types: []string{fmt.Sprintf("Type%d_0", rng.Intn(filesPer)), "error"},
				})
				id++
			}
			in.Files = append(in.Files, fi)
		}
	}
	return in
}

func TestSyntheticSanity(t *testing.T) {
	in := synthetic(2000)
	st := Build(in).Stats()
	if st.Symbols != 2000 || st.Files != 200 {
		t.Fatalf("synthetic: %d symbols, %d files; want 2000, 200", st.Symbols, st.Files)
	}
	if st.ImportEdges == 0 || st.CallEdges == 0 || st.TypeEdges == 0 {
		t.Errorf("synthetic graph lacks edges: %+v", st)
	}
}

func BenchmarkBuild10k(b *testing.B) {
	in := synthetic(10000)
	b.ReportAllocs()
	var st Stats
	for b.Loop() {
		st = Build(in).Stats()
	}
	b.ReportMetric(float64(st.SymbolEdges), "symedges")
	b.ReportMetric(float64(st.FileEdges), "fileedges")
}

func BenchmarkExpandFiles(b *testing.B) {
	g := Build(synthetic(10000))
	files := g.Files()
	seeds := map[string]float64{}
	for i := 0; i < 20; i++ {
		seeds[files[i*37%len(files)]] = 1 / float64(1+i)
	}
	for b.Loop() {
		g.ExpandFiles(seeds, 0)
	}
}

func BenchmarkPageRank(b *testing.B) {
	g := Build(synthetic(10000))
	files := g.Files()
	seeds := map[string]float64{files[0]: 1, files[len(files)/2]: 0.5}
	for b.Loop() {
		g.PageRank(seeds, 0.85, 30)
	}
}

func BenchmarkMarshalLoad(b *testing.B) {
	g := Build(synthetic(10000))
	data, _ := g.MarshalBinary()
	for b.Loop() {
		if _, err := Load(data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(data)), "bytes")
}
