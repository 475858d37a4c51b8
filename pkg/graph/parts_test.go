package graph

import (
	"bytes"
	"path"
	"slices"
	"testing"

	"codectx/pkg/codectx"
)

// TestPartsSameGraph builds graphs with the references resolved in one
// part and in several (resolveAll's split) and checks they encode to the
// same bytes and count the same.
func TestPartsSameGraph(t *testing.T) {
	defer func() { testParts = 0 }()
	inputs := map[string]Input{"synthetic 3k": synthetic(3000), "synthetic 40k": synthetic(40000)}
	for _, fx := range allFixtures() {
		inputs["fixture "+fx.name] = fx.in
	}
	for name, in := range inputs {
		testParts = 1
		one := Build(in)
		want, err := one.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{2, 3, 4, 7} {
			testParts = n
			g := Build(in)
			got, err := g.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || g.Stats() != one.Stats() {
				t.Errorf("%s: %d parts: stats %+v, want %+v (bytes equal %v)", name, n, g.Stats(), one.Stats(), bytes.Equal(got, want))
			}
		}
	}
}

// TestGroupIndexEqualsMates checks the joined index of each package group
// against the files it stands for: for every file and name, the group's
// candidates less the file's own are the other files' candidates, in file
// order (what the package tier of lookupTiers walked file by file).
func TestGroupIndexEqualsMates(t *testing.T) {
	// Build-tag variants: one name declared in several files of a package.
	variants := Input{GoModule: "example.com/v"}
	for i, p := range []string{"os/file_unix.go", "os/file_windows.go", "os/file.go", "os/path_plan9.go"} {
		variants.Files = append(variants.Files, FileInput{Path: p, Language: codectx.Go, Package: "os", Symbols: []SymbolInput{
			{ID: 10 - 2*i, Name: "open", Kind: codectx.KindFunction, Calls: []string{"open", "File"}},
			{ID: 11 - 2*i, Name: "File", Kind: codectx.KindStruct},
		}})
	}
	inputs := map[string]Input{"synthetic 3k": synthetic(3000), "variants": variants}
	for _, fx := range allFixtures() {
		inputs["fixture "+fx.name] = fx.in
	}
	for name, in := range inputs {
		b := &builder{
			byPath: map[string]int32{}, goPkg: map[string][]int32{}, groups: map[string][]int32{},
			javaCls: map[string][]int32{}, javaPkg: map[string][]int32{}, pyInit: map[string]bool{},
			methods: map[ownerKey][]int32{}, topAll: map[string][]int32{}, typesAll: map[string][]int32{},
			methAll: map[string][]int32{}, fedges: map[rawEdge]struct{}{},
		}
		b.index(in)
		b.goIndexNames()()
		checked := 0
		for _, f := range b.files {
			if (len(b.groups[f.group]) < 2) != (f.gidx < 0) {
				t.Fatalf("%s: %s: group %q of %d files, gidx %d", name, f.Path, f.group, len(b.groups[f.group]), f.gidx)
			}
			if f.gidx < 0 {
				continue
			}
			for _, idx := range []struct {
				perFile, perGroup []map[string][]int32
			}{{b.topBy, b.topGroup}, {b.typesBy, b.typesGroup}} {
				names := map[string]bool{}
				for _, m := range b.groups[f.group] {
					for n := range idx.perFile[m] {
						names[n] = true
					}
				}
				for n := range names {
					var want, got []int32
					for _, m := range b.groups[f.group] {
						if m != f.idx {
							want = append(want, idx.perFile[m][n]...)
						}
					}
					own := map[int32]bool{}
					for _, c := range idx.perFile[f.idx][n] {
						own[c] = true
					}
					for _, c := range idx.perGroup[f.gidx][n] {
						if !own[c] {
							got = append(got, c)
						}
					}
					if !slices.Equal(got, want) {
						t.Errorf("%s: %s: %q: group gives %v, the other files %v", name, f.Path, n, got, want)
					}
					checked++
				}
			}
		}
		if checked == 0 && (name == "synthetic 3k" || name == "variants") {
			t.Errorf("%s: nothing checked", name)
		}
	}
}

// TestFileIndexScanEqualsMaps checks fileIndex without maps (a Memo
// build's scan of the files' symbols) against its maps: for every file,
// every group and every name declared anywhere (and one declared nowhere),
// the same candidates in the same order, for top-level symbols and types.
func TestFileIndexScanEqualsMaps(t *testing.T) {
	inputs := map[string]Input{"synthetic 3k": synthetic(3000)}
	for _, fx := range allFixtures() {
		inputs["fixture "+fx.name] = fx.in
	}
	// Methods and types sharing names with top-level functions.
	mixed := Input{}
	for i, p := range []string{"a/a.go", "a/b.go", "b/c.go"} {
		mixed.Files = append(mixed.Files, FileInput{Path: p, Language: codectx.Go, Package: path.Base(path.Dir(p)), Symbols: []SymbolInput{
			{ID: 10*i + 1, Name: "Open", Kind: codectx.KindFunction},
			{ID: 10*i + 2, Name: "File.Open", Kind: codectx.KindMethod},
			{ID: 10*i + 3, Name: "File", Kind: codectx.KindStruct},
			{ID: 10*i + 4, Name: "Open", Kind: codectx.KindType},
			{ID: 10*i + 5, Name: "", Kind: codectx.KindFunction},
		}})
	}
	inputs["mixed"] = mixed
	groups := 0
	for name, in := range inputs {
		b := newBuilder()
		b.index(in)
		b.goIndexNames()()
		b.fileSyms = symsByFile(b.syms, len(b.files))
		names := []string{"", "noSuchNameAnywhere"}
		for _, s := range b.syms {
			names = append(names, s.short)
		}
		slices.Sort(names)
		names = slices.Compact(names)
		checked := 0
		for _, ix := range []fileIndex{b.topIndex(), b.typesIndex()} {
			scan := ix
			scan.byFile, scan.byGroup = nil, nil
			for _, f := range b.files {
				for _, n := range names {
					if got, want := scan.file(f.idx, n), ix.file(f.idx, n); !slices.Equal(got, want) {
						t.Fatalf("%s: %s: %q (types %v): scan gives %v, the map %v", name, f.Path, n, ix.types, got, want)
					}
					if f.gidx < 0 {
						continue
					}
					if got, want := scan.group(f, n), ix.group(f, n); !slices.Equal(got, want) {
						t.Fatalf("%s: group of %s: %q (types %v): scan gives %v, the map %v", name, f.Path, n, ix.types, got, want)
					}
					groups++
				}
				checked++
			}
		}
		if checked == 0 {
			t.Errorf("%s: nothing checked", name)
		}
	}
	if groups == 0 {
		t.Error("no group lookup checked")
	}
}
