package graph

import (
	"path"
	"slices"
	"strings"

	"codectx/pkg/codectx"
)

// resolveImports turns f's raw import spellings into import edges and
// records the qualifiers calls may use to reach the imported files.
func (b *builder) resolveImports(f *fileInfo) {
	seen := map[string]bool{}
	have := map[int32]bool{}
	for _, raw := range f.Imports {
		spec := strings.TrimSpace(raw)
		if spec == "" || seen[spec] {
			continue
		}
		seen[spec] = true
		f.nImports++
		var targets []int32
		var quals []string
		switch f.Language {
		case codectx.Go:
			targets, quals = b.goImport(spec)
		case codectx.Python:
			targets, quals = b.pyImport(f, spec)
		case codectx.TypeScript, codectx.TSX, codectx.JavaScript:
			targets, quals = b.jsImport(f, spec)
		case codectx.Java:
			targets = b.javaImport(spec)
		case codectx.Rust:
			targets, quals = b.rustImport(f, spec)
		}
		resolved := false
		for _, t := range targets {
			if t == f.idx {
				resolved = true // self import: resolved, but no edge
				continue
			}
			resolved = true
			b.addFileEdge(f.idx, t, EdgeImport)
			if !have[t] {
				have[t] = true
				f.imports = append(f.imports, t)
			}
		}
		if !resolved {
			f.nUnresolved++
			for _, q := range externalQuals(f.Language, spec) {
				if f.ext == nil {
					f.ext = map[string]bool{}
				}
				f.ext[q] = true
			}
			continue
		}
		for _, q := range quals {
			if q == "" {
				continue
			}
			if f.quals == nil {
				f.quals = map[string][]int32{}
			}
			for _, t := range targets {
				if !containsIdx(f.quals[q], t) {
					f.quals[q] = append(f.quals[q], t)
				}
			}
		}
	}
	b.stats.Imports += int(f.nImports)
	b.stats.Unresolved += int(f.nUnresolved)
}

// sameFiles reports whether the builder's files are p's in everything
// import resolution reads of the repository (paths, languages, packages,
// Go modules and whether Go import paths are directories): a file whose
// imports are the same then resolves them to the same files, qualifiers
// and counts.
func (b *builder) sameFiles(p *memoState) bool {
	if len(b.files) != len(p.files) || b.goDirImports != p.goDirImports || !slices.Equal(b.modules, p.modules) {
		return false
	}
	for i, f := range b.files {
		o := p.files[i]
		if f.Path != o.Path || f.Language != o.Language || f.Package != o.Package {
			return false
		}
	}
	return true
}

// takeImports gives f the imports o (the same file of an earlier build,
// sameFiles, with the same import specs) resolved: its imported files,
// qualifiers and counts (shared: neither is written after its build) and
// its import edges, as resolveImports would find them.
func (b *builder) takeImports(f, o *fileInfo) {
	f.imports, f.quals, f.ext = o.imports, o.quals, o.ext
	f.nImports, f.nUnresolved = o.nImports, o.nUnresolved
	b.stats.Imports += int(f.nImports)
	b.stats.Unresolved += int(f.nUnresolved)
	for _, t := range f.imports {
		b.addFileEdge(f.idx, t, EdgeImport)
	}
}

// externalQuals guesses the names an unresolved (external) import binds,
// so calls through them are not mistaken for calls into the repository.
func externalQuals(lang codectx.Language, spec string) []string {
	spec = strings.Trim(spec, `"' ;`)
	var parts []string
	switch lang {
	case codectx.Go:
		parts = strings.Split(spec, "/")
		if n := len(parts); n > 1 && isMajorVersion(parts[n-1]) {
			return []string{parts[n-1], parts[n-2]}
		}
	case codectx.Python:
		parts = strings.Split(strings.TrimLeft(spec, "."), ".")
		return []string{spec, parts[0], parts[len(parts)-1]}
	case codectx.TypeScript, codectx.TSX, codectx.JavaScript:
		spec = strings.TrimPrefix(spec, "node:")
		parts = strings.Split(spec, "/")
	case codectx.Rust:
		parts = strings.Split(strings.TrimPrefix(spec, "mod:"), "::")
		return []string{parts[0], parts[len(parts)-1]}
	default:
		return nil
	}
	return []string{parts[len(parts)-1]}
}

func containsIdx(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func (b *builder) file(p string) (int32, bool) {
	i, ok := b.byPath[p]
	return i, ok
}

// --- Go ---

// goImport maps an import path inside one of the repository's modules to
// the non-test .go files of that directory. Qualifiers are the last path
// element (skipping a /vN suffix) and the package names of the targets.
func (b *builder) goImport(spec string) ([]int32, []string) {
	spec = goSpec(spec)
	dir, ok := b.goDir(spec)
	if !ok {
		return nil, nil
	}
	targets := b.goPkg[dir]
	if len(targets) == 0 {
		return nil, nil
	}
	elems := strings.Split(spec, "/")
	last := elems[len(elems)-1]
	quals := []string{last}
	if isMajorVersion(last) && len(elems) > 1 {
		quals = append(quals, elems[len(elems)-2])
	}
	for _, t := range targets {
		if p := b.files[t].Package; p != "" && !containsStr(quals, p) {
			quals = append(quals, p)
		}
	}
	return targets, quals
}

func (b *builder) goDir(spec string) (string, bool) {
	for _, m := range b.modules {
		if spec == m.path {
			return m.dir, true
		}
		if strings.HasPrefix(spec, m.path+"/") {
			return cleanPath(join(m.dir, spec[len(m.path)+1:])), true
		}
	}
	if b.goDirImports {
		if _, ok := b.goPkg[spec]; ok {
			return spec, true
		}
	}
	return "", false
}

// goSpec is the import path of a raw Go import spelling.
func goSpec(raw string) string {
	spec := strings.Trim(raw, `"`)
	if i := strings.IndexByte(spec, ' '); i >= 0 { // `alias "path"`
		spec = strings.Trim(spec[i+1:], `" `)
	}
	return spec
}

// inferGoRoot gives a repository without a root go.mod an import prefix,
// as GOPATH-era code and GOROOT's src have none. Each import path that
// ends in a package directory of the repository votes for the prefix in
// front of it ("github.com/o/r/sub" with a directory "sub" votes for
// "github.com/o/r"); the prefix with the most distinct directories wins
// if at least two voted. An empty prefix winning means import paths are
// directory paths ("net/http" in $GOROOT/src).
func (b *builder) inferGoRoot() {
	if len(b.goPkg) == 0 {
		return
	}
	for _, m := range b.modules {
		if m.dir == "" {
			return
		}
	}
	votes := map[string]map[string]bool{}
	for _, f := range b.files {
		if f.Language != codectx.Go {
			continue
		}
		for _, raw := range f.Imports {
			spec := goSpec(raw)
			if _, ok := b.goDir(spec); ok {
				continue // a nested module has it
			}
			elems := strings.Split(spec, "/")
			for k := range elems {
				dir := strings.Join(elems[k:], "/")
				if _, ok := b.goPkg[dir]; !ok {
					continue
				}
				prefix := strings.Join(elems[:k], "/")
				if votes[prefix] == nil {
					votes[prefix] = map[string]bool{}
				}
				votes[prefix][dir] = true
				break // the longest directory only
			}
		}
	}
	best, n := "", 0
	for p, dirs := range votes {
		if len(dirs) > n || len(dirs) == n && p < best {
			best, n = p, len(dirs)
		}
	}
	if n < 2 {
		return
	}
	if best == "" {
		b.goDirImports = true
		return
	}
	b.modules = append(b.modules, goModule{dir: "", path: best})
}

func isMajorVersion(s string) bool {
	if len(s) < 2 || s[0] != 'v' {
		return false
	}
	for _, r := range s[1:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func containsStr(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// --- Python ---

// pyImport resolves absolute ("a.b.c") and relative (".x", "..x", ".")
// module names. A dotted name that is not a module falls back to its parent
// ("a.b.c" -> "a.b"), since `from a.b import c` may name a function.
func (b *builder) pyImport(f *fileInfo, spec string) ([]int32, []string) {
	if strings.HasPrefix(spec, ".") {
		n := len(spec) - len(strings.TrimLeft(spec, "."))
		rest := spec[n:]
		base := f.dir
		for i := 1; i < n; i++ {
			if base == "" {
				return nil, nil // above the repository root
			}
			base = dirOf(base)
		}
		for {
			if t, ok := b.pyModule(base, rest); ok {
				return []int32{t}, pyQuals(rest)
			}
			if rest == "" {
				return nil, nil
			}
			rest = parentModule(rest)
		}
	}
	mod := spec
	for try := 0; try < 2 && mod != ""; try++ {
		for _, root := range b.pyRoots(f) {
			if t, ok := b.pyModule(root, mod); ok {
				return []int32{t}, pyQuals(mod)
			}
		}
		mod = parentModule(mod)
	}
	return nil, nil
}

func parentModule(m string) string {
	if i := strings.LastIndexByte(m, '.'); i >= 0 {
		return m[:i]
	}
	return ""
}

func pyQuals(mod string) []string {
	if mod == "" {
		return nil
	}
	q := []string{mod}
	if i := strings.LastIndexByte(mod, '.'); i >= 0 {
		q = append(q, mod[i+1:])
	}
	return q
}

// pyModule finds module mod ("" for the package itself) under dir.
func (b *builder) pyModule(dir, mod string) (int32, bool) {
	p := join(dir, strings.ReplaceAll(mod, ".", "/"))
	if mod != "" {
		if t, ok := b.file(p + ".py"); ok {
			return t, true
		}
		if t, ok := b.file(p + ".pyi"); ok {
			return t, true
		}
	}
	return b.file(join(p, "__init__.py"))
}

// pyRoots lists the directories absolute imports are tried under: the
// repository root, src/, and every ancestor of the importing file that is
// not itself a package (a directory without __init__.py can be a sys.path
// entry; a package directory cannot).
func (b *builder) pyRoots(f *fileInfo) []string {
	roots := []string{"", "src"}
	var anc []string
	for d := f.dir; d != ""; d = dirOf(d) {
		anc = append(anc, d)
	}
	for i := len(anc) - 1; i >= 0; i-- { // shallowest first
		if d := anc[i]; d != "src" && !b.pyInit[d] {
			roots = append(roots, d)
		}
	}
	return roots
}

// --- JavaScript / TypeScript ---

var jsExts = []string{".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts"}

// jsImport resolves relative specifiers; bare package names stay
// unresolved. "./x.js" also finds x.ts (the TypeScript ESM convention).
func (b *builder) jsImport(f *fileInfo, spec string) ([]int32, []string) {
	if spec != "." && spec != ".." && !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "../") {
		return nil, nil
	}
	if i := strings.IndexAny(spec, "?#"); i >= 0 {
		spec = spec[:i]
	}
	base := path.Join(f.dir, spec)
	if base == ".." || strings.HasPrefix(base, "../") {
		return nil, nil
	}
	if base == "." {
		base = ""
	}
	var cands []string
	ext := path.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	switch ext {
	case ".js", ".jsx", ".mjs", ".cjs":
		cands = append(cands, base)
		swap := map[string][]string{".js": {".ts", ".tsx"}, ".jsx": {".tsx"}, ".mjs": {".mts"}, ".cjs": {".cts"}}[ext]
		for _, e := range swap {
			cands = append(cands, stem+e)
		}
	case ".ts", ".tsx", ".mts", ".cts", ".json":
		cands = append(cands, base)
	}
	if base != "" {
		for _, e := range jsExts {
			cands = append(cands, base+e)
		}
	}
	for _, e := range jsExts {
		cands = append(cands, join(base, "index"+e))
	}
	for _, c := range cands {
		if t, ok := b.file(c); ok {
			q := path.Base(c)
			q = strings.TrimSuffix(q, path.Ext(q))
			q = strings.TrimSuffix(q, ".d")
			if q == "index" {
				q = path.Base(dirOf(c))
			}
			return []int32{t}, []string{q}
		}
	}
	return nil, nil
}

// --- Java ---

// javaImport resolves "a.b.C" to the file declaring class C in package
// a.b, "a.b.*" to every file of a.b, and static or nested-class imports
// ("a.b.C.m", "a.b.C.Inner") to C's file.
func (b *builder) javaImport(spec string) []int32 {
	spec = strings.TrimSuffix(strings.TrimSpace(spec), ";")
	spec = strings.TrimSpace(strings.TrimPrefix(spec, "static "))
	if strings.HasSuffix(spec, ".*") {
		pkg := strings.TrimSuffix(spec, ".*")
		if fs := b.javaPkg[pkg]; len(fs) > 0 {
			return fs
		}
		return b.javaCls[pkg] // static wildcard: a.b.C.*
	}
	for try := 0; try < 3 && spec != ""; try++ {
		if fs := b.javaCls[spec]; len(fs) > 0 {
			return fs
		}
		spec = parentModule(spec)
	}
	return nil
}

// --- Rust ---

// rustImport resolves "mod:foo" declarations and use paths starting with
// crate::, self::, super:: or a child module of the importing file. The
// longest prefix naming a module file wins; a path naming an item of the
// crate root or parent module resolves to that module's file.
func (b *builder) rustImport(f *fileInfo, spec string) ([]int32, []string) {
	if name, ok := strings.CutPrefix(spec, "mod:"); ok {
		name = strings.TrimSpace(name)
		if t, ok := b.rustModFile(join(rustModDir(f.Path), name)); ok {
			return []int32{t}, []string{name}
		}
		return nil, nil
	}
	spec = strings.TrimSpace(strings.TrimSuffix(spec, ";"))
	spec = strings.TrimPrefix(spec, "pub ")
	spec = strings.TrimPrefix(spec, "use ")
	if i := strings.Index(spec, " as "); i >= 0 {
		spec = spec[:i]
	}
	if i := strings.Index(spec, "{"); i >= 0 {
		spec = spec[:i]
	}
	spec = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(spec), "*"), "::")
	t, q, ok := b.rustPath(f, spec)
	if !ok {
		return nil, nil
	}
	return []int32{t}, q
}

// rustPath resolves a module path ("crate::a::b::C") from file f.
func (b *builder) rustPath(f *fileInfo, p string) (int32, []string, bool) {
	segs := strings.Split(p, "::")
	if len(segs) == 0 || segs[0] == "" {
		return 0, nil, false
	}
	var base string
	var fallback int32 = -1
	switch segs[0] {
	case "crate":
		base = b.rustCrateDir(f.dir)
		if t, ok := b.rustRootFile(base); ok {
			fallback = t
		}
		segs = segs[1:]
	case "self":
		base = rustModDir(f.Path)
		fallback = f.idx
		segs = segs[1:]
	case "super":
		base = rustModDir(f.Path)
		for len(segs) > 0 && segs[0] == "super" {
			base = dirOf(base)
			segs = segs[1:]
		}
		if t, ok := b.rustModFile(base); ok {
			fallback = t
		} else if t, ok := b.rustRootFile(base); ok {
			fallback = t
		}
	default:
		base = rustModDir(f.Path)
		if _, ok := b.rustModFile(join(base, segs[0])); !ok {
			return 0, nil, false // external crate or std
		}
	}
	for n := len(segs); n >= 1; n-- {
		if t, ok := b.rustModFile(join(base, strings.Join(segs[:n], "/"))); ok {
			return t, []string{segs[n-1]}, true
		}
	}
	if fallback >= 0 {
		return fallback, nil, true
	}
	return 0, nil, false
}

// rustModDir is the directory holding the child modules of file p.
func rustModDir(p string) string {
	switch path.Base(p) {
	case "lib.rs", "main.rs", "mod.rs":
		return dirOf(p)
	}
	return strings.TrimSuffix(p, ".rs")
}

func (b *builder) rustModFile(p string) (int32, bool) {
	if p == "" {
		return 0, false
	}
	if t, ok := b.file(p + ".rs"); ok {
		return t, true
	}
	return b.file(p + "/mod.rs")
}

func (b *builder) rustRootFile(dir string) (int32, bool) {
	if t, ok := b.file(join(dir, "lib.rs")); ok {
		return t, true
	}
	return b.file(join(dir, "main.rs"))
}

// rustCrateDir is the nearest ancestor of dir holding lib.rs or main.rs.
func (b *builder) rustCrateDir(dir string) string {
	for d := dir; ; d = dirOf(d) {
		if _, ok := b.rustRootFile(d); ok {
			return d
		}
		if d == "" {
			return dir
		}
	}
}
