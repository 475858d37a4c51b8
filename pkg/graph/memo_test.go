package graph

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"codectx/pkg/codectx"
)

// cloneInput copies in deeply enough that edits of the copy leave in as
// it is.
func cloneInput(in Input) Input {
	out := in
	out.Files = make([]FileInput, len(in.Files))
	for i, f := range in.Files {
		f.Imports = slices.Clone(f.Imports)
		f.Symbols = slices.Clone(f.Symbols)
		for j := range f.Symbols {
			f.Symbols[j].Calls = slices.Clone(f.Symbols[j].Calls)
			f.Symbols[j].Types = slices.Clone(f.Symbols[j].Types)
		}
		out.Files[i] = f
	}
	return out
}

// allNames lists the short names and callee spellings of in, the
// vocabulary edits draw from (so that they collide with declarations).
func allNames(in Input) (decls, calls, types []string) {
	for _, f := range in.Files {
		for _, s := range f.Symbols {
			decls = append(decls, s.Name)
			calls = append(calls, s.Calls...)
			types = append(types, s.Types...)
		}
	}
	return
}

// edit changes in the way one commit could; it returns what it did.
func edit(rng *rand.Rand, in *Input, decls, calls, types []string) string {
	if len(in.Files) == 0 {
		return "none"
	}
	fi := rng.Intn(len(in.Files))
	f := &in.Files[fi]
	pickS := func(s []string) string {
		if len(s) == 0 {
			return "x"
		}
		return s[rng.Intn(len(s))]
	}
	maxID := 0
	for _, g := range in.Files {
		for _, s := range g.Symbols {
			maxID = max(maxID, s.ID)
		}
	}
	// shift moves the ids of the symbols after file fi, the way a chunk
	// more or less in a shard moves the later shards' ids.
	shift := func(d int) {
		for i := range in.Files {
			if i <= fi {
				continue
			}
			for j := range in.Files[i].Symbols {
				in.Files[i].Symbols[j].ID += d
			}
		}
	}
	switch k := rng.Intn(12); {
	case k == 0 && len(f.Symbols) > 0: // rename a declaration to another's name
		j := rng.Intn(len(f.Symbols))
		f.Symbols[j].Name = pickS(decls)
		return fmt.Sprintf("rename a symbol of %s", f.Path)
	case k == 1 && len(f.Symbols) > 0: // rename to a new name
		j := rng.Intn(len(f.Symbols))
		f.Symbols[j].Name += "X"
		return fmt.Sprintf("new name in %s", f.Path)
	case k == 2: // add a declaration, ids of later files shift
		shift(1000)
		s := SymbolInput{ID: maxID + 1, Name: pickS(decls), Kind: codectx.KindFunction, Calls: []string{pickS(calls)}, Types: []string{pickS(types)}}
		if len(f.Symbols) > 0 {
			s.ID = f.Symbols[len(f.Symbols)-1].ID + 1
		}
		f.Symbols = append(f.Symbols, s)
		return fmt.Sprintf("add a symbol to %s", f.Path)
	case k == 3 && len(f.Symbols) > 0: // delete one
		j := rng.Intn(len(f.Symbols))
		f.Symbols = slices.Delete(f.Symbols, j, j+1)
		shift(-1)
		return fmt.Sprintf("delete a symbol of %s", f.Path)
	case k == 4 && len(f.Symbols) > 0: // change a body's calls
		j := rng.Intn(len(f.Symbols))
		f.Symbols[j].Calls = append(f.Symbols[j].Calls, pickS(calls), pickS(decls))
		return fmt.Sprintf("calls in %s", f.Path)
	case k == 5 && len(f.Symbols) > 0: // change a body's types
		j := rng.Intn(len(f.Symbols))
		f.Symbols[j].Types = []string{pickS(types), pickS(decls)}
		return fmt.Sprintf("types in %s", f.Path)
	case k == 6: // change imports
		switch rng.Intn(3) {
		case 0:
			f.Imports = nil
		case 1:
			if len(f.Imports) > 0 {
				f.Imports = f.Imports[:len(f.Imports)-1]
			}
		default:
			g := in.Files[rng.Intn(len(in.Files))]
			f.Imports = append(f.Imports, g.Imports...)
		}
		return fmt.Sprintf("imports of %s", f.Path)
	case k == 7: // change the kind of a declaration
		if len(f.Symbols) == 0 {
			return "none"
		}
		j := rng.Intn(len(f.Symbols))
		f.Symbols[j].Kind = []codectx.Kind{codectx.KindFunction, codectx.KindType, codectx.KindStruct, codectx.KindMethod, codectx.KindClass}[rng.Intn(5)]
		return fmt.Sprintf("kind in %s", f.Path)
	case k == 8: // add a file
		in.Files = append(in.Files, FileInput{Path: fmt.Sprintf("new%d/%s", rng.Intn(1000), f.Path), Language: f.Language, Package: f.Package, Imports: slices.Clone(f.Imports),
			Symbols: []SymbolInput{{ID: maxID + 1, Name: pickS(decls), Kind: codectx.KindFunction, Calls: []string{pickS(calls)}}}})
		return "add a file"
	case k == 9: // delete a file
		in.Files = slices.Delete(in.Files, fi, fi+1)
		return "delete a file"
	case k == 10: // change the package
		f.Package += "x"
		return fmt.Sprintf("package of %s", f.Path)
	default: // every id moves, nothing else
		for i := range in.Files {
			for j := range in.Files[i].Symbols {
				in.Files[i].Symbols[j].ID += 7
			}
		}
		return "ids shifted"
	}
}

// TestMemoEqualsBuild builds chains of commits (one or a few edits each:
// declarations renamed, added, deleted, calls, types, imports, kinds and
// packages changed, files added and deleted, ids shifted, back to an
// earlier tree) with one Memo and checks each graph against Build's, byte
// for byte and in its counts; and that the memo took some symbols'
// references as they were.
func TestMemoEqualsBuild(t *testing.T) {
	inputs := map[string]Input{"synthetic 3k": synthetic(3000)}
	for _, fx := range allFixtures() {
		inputs["fixture "+fx.name] = fx.in
	}
	for name, base := range inputs {
		rng := rand.New(rand.NewSource(int64(len(name))))
		decls, calls, types := allNames(base)
		var memo Memo
		cur := cloneInput(base)
		var reused int
		for step := range 60 {
			var did []string
			switch {
			case step == 0:
				did = []string{"first"}
			case step%15 == 0:
				cur = cloneInput(base)
				did = []string{"back to the start"}
			default:
				for range 1 + rng.Intn(2) {
					did = append(did, edit(rng, &cur, decls, calls, types))
				}
			}
			want := Build(cur)
			got := memo.Build(cur)
			reused += memo.lastReused()
			wb, err := want.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			gb, err := got.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(gb, wb) || got.Stats() != want.Stats() {
				t.Fatalf("%s step %d (%v): memo graph differs: stats %+v, want %+v (bytes equal %v)", name, step, did, got.Stats(), want.Stats(), bytes.Equal(gb, wb))
			}
		}
		if reused == 0 {
			t.Errorf("%s: the memo never reused a symbol's references", name)
		}
	}
}
