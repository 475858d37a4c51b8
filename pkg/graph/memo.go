package graph

import (
	"maps"
	"slices"
	"sync"
)

// Memo remembers what its last Build resolved, so that the next Build of
// an input that differs in a few files (a one-file push) resolves the
// references of only the symbols whose resolution could differ; the
// others take their edges from the last build. The graph is Build's, byte
// for byte (TestMemoEqualsBuild).
//
// A symbol's references are taken as they were when its file is unchanged
// (same symbols, in the same order), the file's imports resolved to the
// same files and qualifiers, and none of the names it looked up (a bare
// name, or a qualified name's last segment and its qualifier's last
// segment) is dirty: the short name of a symbol of a changed file, before
// or after the change, outside the prefix and suffix of the file's
// symbols that declare the same kinds and names as before. Every lookup
// of resolveCall and resolveType is keyed by one of those names or by the
// file's imports, so its candidates, their order and their ranks (kind,
// owner, name, file) are what they were. Any other difference (a file
// added, removed or renamed, a package or language changed, kept symbols
// reordered) makes a full resolution.
//
// A Memo's Build calls may run concurrently; each then starts from the
// last one that finished.
type Memo struct {
	mu   sync.Mutex
	last *memoState
}

// memoState is what one build resolved.
type memoState struct {
	files  []*fileInfo
	syms   []*symInfo
	res    []symResult // by symbol index
	reused int         // symbols whose references were taken from the build before
	// What import resolution read besides the files (sameFiles).
	modules      []goModule
	goDirImports bool
	sizes        nameSizes // of the repository-wide name indexes
}

// symResult is what resolving one symbol's references gave.
type symResult struct {
	edges     []rawEdge // from the symbol, targets by that build's symbol index
	keys      []string  // the names looked up (cleaned callees, then type names)
	seps      []int32   // sepOf each key
	amb, ambT int32
}

// Build is graph.Build of in, resolving again only what may have changed
// since the memo's last build.
func (m *Memo) Build(in Input) *Graph {
	m.mu.Lock()
	prev := m.last
	m.mu.Unlock()
	b := newBuilder()
	b.index(in)
	if prev != nil {
		b.sizes = prev.sizes
	}
	same := prev != nil && b.sameFiles(prev)
	// With the same files, a one-file change resolves few symbols again:
	// the per-file and per-group name indexes are made only if reusable
	// finds that many must be (see fileIndex).
	var wg sync.WaitGroup
	wg.Go(b.indexRepoNames)
	if !same {
		wg.Go(b.indexFileNames)
	}
	for i, f := range b.files {
		if same && slices.Equal(f.Imports, prev.files[i].Imports) {
			b.takeImports(f, prev.files[i])
		} else {
			b.resolveImports(f)
		}
	}
	b.memo = true
	if prev != nil {
		b.reuse = b.reusable(prev)
		b.prev = prev
	}
	wg.Wait()
	if same && b.toResolve() > len(b.syms)/scanShare {
		b.indexFileNames()
	}
	b.resolveAll()
	g := b.graph()
	st := &memoState{files: b.files, syms: b.syms, res: b.res, modules: b.modules, goDirImports: b.goDirImports, sizes: b.nameSizes()}
	for _, o := range b.reuse {
		if o >= 0 {
			st.reused++
		}
	}
	m.mu.Lock()
	m.last = st
	m.mu.Unlock()
	return g
}

// reusable maps each symbol to its index in p whose references can be
// taken as they were, or -1 for one to resolve; nil when none can.
func (b *builder) reusable(p *memoState) []int32 {
	if len(p.files) != len(b.files) {
		return nil
	}
	oldBy := symsByFile(p.syms, len(p.files))
	newBy := symsByFile(b.syms, len(b.files))
	b.fileSyms = newBy
	toNew := make([]int32, len(p.syms))
	for i := range toNew {
		toNew[i] = -1
	}
	var dirty nameSet
	again := make([]bool, len(b.files)) // symbols of the file resolved again
	for i, f := range b.files {
		o := p.files[i]
		if f.Path != o.Path || f.Language != o.Language || f.Package != o.Package || f.group != o.group || f.gidx != o.gidx {
			return nil
		}
		os, ns := oldBy[i], newBy[i]
		same := len(os) == len(ns)
		for k := 0; same && k < len(ns); k++ {
			same = sameSym(p.syms[os[k]], b.syms[ns[k]])
		}
		if !same {
			// The file's symbols are resolved again. Those of a common
			// prefix and suffix that declare the same names stay the
			// same targets; the names of the others are dirty.
			again[i] = true
			pre := 0
			for pre < len(os) && pre < len(ns) && sameTarget(p.syms[os[pre]], b.syms[ns[pre]]) {
				toNew[os[pre]] = ns[pre]
				pre++
			}
			suf := 0
			for suf < len(os)-pre && suf < len(ns)-pre && sameTarget(p.syms[os[len(os)-1-suf]], b.syms[ns[len(ns)-1-suf]]) {
				toNew[os[len(os)-1-suf]] = ns[len(ns)-1-suf]
				suf++
			}
			for _, s := range os[pre : len(os)-suf] {
				dirty.add(p.syms[s].short)
			}
			for _, s := range ns[pre : len(ns)-suf] {
				dirty.add(b.syms[s].short)
			}
			continue
		}
		for k := range ns {
			toNew[os[k]] = ns[k]
		}
		if !slices.Equal(f.imports, o.imports) || !maps.EqualFunc(f.quals, o.quals, slices.Equal[[]int32]) || !maps.Equal(f.ext, o.ext) {
			again[i] = true
		}
	}
	// Candidates are taken in index order and the lowest index of
	// overloads wins: the kept symbols must keep their order.
	last := int32(-1)
	for _, n := range toNew {
		if n < 0 {
			continue
		}
		if n <= last {
			return nil
		}
		last = n
	}
	toOld := make([]int32, len(b.syms))
	for i := range toOld {
		toOld[i] = -1
	}
	for o, n := range toNew {
		if n >= 0 && !again[b.syms[n].file] {
			toOld[n] = int32(o)
		}
	}
	for n, o := range toOld {
		if o < 0 {
			continue
		}
		r := &p.res[o]
		ok := true
		for j, k := range r.keys {
			if dirty.lookedUp(k, r.seps[j]) {
				ok = false
				break
			}
		}
		for _, e := range r.edges {
			if !ok {
				break
			}
			ok = toNew[e.to] >= 0
		}
		if !ok {
			toOld[n] = -1
		}
	}
	b.toNew = toNew
	return toOld
}

// nameSet is a set of short names that tells most names outside it by
// their length alone.
type nameSet struct {
	m    map[string]bool
	lens uint64 // bit min(len, 63) of each name
}

func (d *nameSet) add(name string) {
	if d.m == nil {
		d.m = map[string]bool{}
	}
	d.m[name] = true
	d.lens |= 1 << min(len(name), 63)
}

func (d *nameSet) has(name string) bool {
	return d.lens&(1<<min(len(name), 63)) != 0 && d.m[name]
}

// sepOf encodes where name's last separator is (lastSep) for lookedUp:
// -1 for none, else its index times two plus its width less one.
func sepOf(name string) int32 {
	i, w := lastSep(name)
	if i < 0 {
		return -1
	}
	return int32(2*i + w - 1)
}

// lookedUp reports whether a lookup of name (its separator sep, sepOf)
// may read an entry of a name in d: the name itself when it has no
// separator, else its last segment and its qualifier's last segment
// (resolveCall, resolveType).
func (d *nameSet) lookedUp(name string, sep int32) bool {
	if len(d.m) == 0 {
		return false
	}
	if sep < 0 {
		return d.has(name)
	}
	i, w := int(sep/2), int(sep%2)+1
	return d.has(name[i+w:]) || d.has(lastSegment(name[:i]))
}

// scanShare: a Memo build that resolves more than one symbol in
// scanShare again makes the per-file name indexes rather than scanning.
const scanShare = 16

// toResolve is how many symbols the build resolves again (all without
// reuse).
func (b *builder) toResolve() int {
	if b.reuse == nil {
		return len(b.syms)
	}
	n := 0
	for _, o := range b.reuse {
		if o < 0 {
			n++
		}
	}
	return n
}

func symsByFile(syms []*symInfo, nfiles int) [][]int32 {
	by := make([][]int32, nfiles)
	for _, s := range syms {
		by[s.file] = append(by[s.file], s.idx)
	}
	return by
}

// sameTarget reports whether two symbols are the same target: what a
// lookup reads of a candidate.
func sameTarget(x, y *symInfo) bool {
	return x.kind == y.kind && x.owner == y.owner && x.short == y.short
}

// sameSym reports whether two symbols resolve alike wherever they are.
func sameSym(x, y *symInfo) bool {
	return sameTarget(x, y) && slices.Equal(x.calls, y.calls) && slices.Equal(x.types, y.types)
}

// lastReused is how many symbols the last build took as they were (tests).
func (m *Memo) lastReused() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		return 0
	}
	return m.last.reused
}
