package graph

import (
	"bytes"
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
		b.indexNames()
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
