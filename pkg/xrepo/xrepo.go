// Package xrepo resolves imports across the repositories of one tenant.
// Each repository provides packages under the identities its manifests
// and sources declare (a Go module path from go.mod, an npm package name
// from package.json, a Python distribution and its top-level import
// packages from pyproject.toml, setup.cfg or setup.py, Maven coordinates
// with the Java packages and classes of their sources, a Cargo crate from
// Cargo.toml); an import that its own repository cannot resolve and that
// names what another repository provides becomes a Link from the
// importing file to the file of the other repository that it reaches (Go:
// the package directory's files; npm: the file exports, module, main or
// the subpath names, read back from build output to source; Python: the
// module or package file; Java: the class file, every file of a package
// for a wildcard; Rust: the module file of the crate path).
//
// The caller decides which repositories meet: Build sees only the
// repositories it is given, so a graph built from one tenant's
// repositories never links to another tenant's.
package xrepo

import (
	"path"
	"slices"
	"sort"
	"strings"

	"codectx/pkg/codectx"
)

// Ecosystems of an Identity.
const (
	Go     = "go"
	NPM    = "npm"
	Python = "python"
	Maven  = "maven"
	Cargo  = "cargo"
)

// File is one code file of a repository: its path, language, module name
// (the name its module chunk carries: the Java class "a.b.C", the Go
// package name) and its imports as written.
type File struct {
	Path     string
	Language codectx.Language
	Module   string
	Imports  []string
}

// Repo is one repository: its code files and the text of its manifests
// (path -> content, for the paths IsManifest accepts).
type Repo struct {
	Name      string
	Files     []File
	Manifests map[string][]byte
}

// ManifestBytes is the size of r's manifests' texts.
func (r Repo) ManifestBytes() int64 {
	var n int64
	for _, m := range r.Manifests {
		n += int64(len(m))
	}
	return n
}

// Identity is a package a repository provides.
type Identity struct {
	Ecosystem string `json:"ecosystem"` // go, npm, python, maven, cargo
	// Name is what dependents name it by: the Go module path, the npm
	// package name, the Python distribution, Maven groupId:artifactId,
	// the Cargo package name.
	Name string `json:"name"`
	Dir  string `json:"dir"` // directory of its manifest, "" for the root
	// Imports are the names code imports it by when they differ from
	// Name: Python's top-level packages, Java's packages, the crate's
	// identifier ("serde_json" for "serde-json").
	Imports []string `json:"imports,omitempty"`
}

// Ref is one file of one repository.
type Ref struct {
	Repo string
	Path string
}

// Link is an import of one repository's file resolved to a file of
// another repository.
type Link struct {
	From, To Ref
	Spec     string   // the import as written
	Via      Identity // what the target repository provides that matched
}

// Graph is the cross-repository import graph of a set of repositories.
// It is immutable and safe for concurrent reads.
type Graph struct {
	links    []link
	ids      []Identity // the Via of links, by index
	to, from map[Ref][]int32
	provides map[string][]Identity
	imports  int // imports that named another repository's identity
}

// link is a Link as the graph keeps it: its identity by index.
type link struct {
	from, to Ref
	spec     string
	via      int32
}

// Importers returns the links that end at file p of repo, sorted by
// importing repository and path.
func (g *Graph) Importers(repo, p string) []Link { return g.pick(g.to[Ref{repo, p}]) }

// Imports returns the links that start at file p of repo.
func (g *Graph) Imports(repo, p string) []Link { return g.pick(g.from[Ref{repo, p}]) }

// Provides returns the identities repo provides.
func (g *Graph) Provides(repo string) []Identity { return slices.Clone(g.provides[repo]) }

// Links returns every link, sorted by source then target.
func (g *Graph) Links() []Link {
	out := make([]Link, len(g.links))
	for i := range g.links {
		out[i] = g.link(int32(i))
	}
	return out
}

func (g *Graph) link(i int32) Link {
	l := &g.links[i]
	return Link{From: l.from, To: l.to, Spec: l.spec, Via: g.ids[l.via]}
}

// Len is the number of links.
func (g *Graph) Len() int { return len(g.links) }

func (g *Graph) pick(ix []int32) []Link {
	out := make([]Link, len(ix))
	for i, j := range ix {
		out[i] = g.link(j)
	}
	return out
}

// repoIndex holds one repository's tables.
type repoIndex struct {
	name    string
	files   map[string]bool
	goDirs  map[string][]string // dir -> non-test .go files
	goMods  []goMod
	npm     []*npmPkg
	pyInit  map[string]bool // dirs with an __init__.py
	pyTops  map[string][]string
	javaCls map[string][]string // "a.b.C" -> files
	javaPkg map[string][]string // "a.b" -> files
	crates  []crate
	ids     []Identity
}

type goMod struct{ dir, path string }

type npmPkg struct {
	name, dir string
	m         npmManifest
	exports   map[string][]string
}

type crate struct{ ident, dir, root string }

// provider is one repository providing an identity, with where.
type provider struct {
	repo int
	dir  string // Go: module dir; Python: import root
	path string // Go: module path
	npm  *npmPkg
	cr   crate
}

type builder struct {
	repos  []*repoIndex
	goMods []provider // every repository's modules, longest path first
	npm    map[string][]provider
	py     map[string][]provider
	cls    map[string][]Ref // Java class -> files, every repository
	pkg    map[string][]Ref // Java package -> files
	crates map[string][]provider
}

// Build resolves the imports of every repository against what the others
// provide.
func Build(repos []Repo) *Graph {
	b := &builder{npm: map[string][]provider{}, py: map[string][]provider{}, cls: map[string][]Ref{}, pkg: map[string][]Ref{}, crates: map[string][]provider{}}
	for i := range repos {
		b.repos = append(b.repos, indexRepo(&repos[i]))
	}
	for i, r := range b.repos {
		for _, m := range r.goMods {
			b.goMods = append(b.goMods, provider{repo: i, dir: m.dir, path: m.path})
		}
		for _, p := range r.npm {
			b.npm[p.name] = append(b.npm[p.name], provider{repo: i, npm: p})
		}
		for top, roots := range r.pyTops {
			for _, root := range roots {
				b.py[top] = append(b.py[top], provider{repo: i, dir: root})
			}
		}
		for c, fs := range r.javaCls {
			for _, f := range fs {
				if javaProvided(f) {
					b.cls[c] = append(b.cls[c], Ref{r.name, f})
				}
			}
		}
		for p, fs := range r.javaPkg {
			for _, f := range fs {
				if javaProvided(f) {
					b.pkg[p] = append(b.pkg[p], Ref{r.name, f})
				}
			}
		}
		for _, c := range r.crates {
			b.crates[c.ident] = append(b.crates[c.ident], provider{repo: i, cr: c})
		}
	}
	sort.SliceStable(b.goMods, func(i, j int) bool { return len(b.goMods[i].path) > len(b.goMods[j].path) })

	g := &Graph{to: map[Ref][]int32{}, from: map[Ref][]int32{}, provides: map[string][]Identity{}}
	idIdx := map[string]int32{}
	viaOf := func(id Identity) int32 {
		k := id.Ecosystem + "\x00" + id.Name + "\x00" + id.Dir
		if i, ok := idIdx[k]; ok {
			return i
		}
		idIdx[k] = int32(len(g.ids))
		g.ids = append(g.ids, id)
		return idIdx[k]
	}
	type memoKey struct {
		lang        codectx.Language
		scope, spec string
	}
	type resolved struct {
		tos []Ref
		via int32
	}
	// Repositories by name and files by path, each file's links by
	// target: the links come out sorted.
	order := make([]int, len(b.repos))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return strings.Compare(b.repos[x].name, b.repos[y].name) })
	var mine []link
	for _, ri := range order {
		r := b.repos[ri]
		g.provides[r.name] = r.ids
		files := slices.Clone(repos[ri].Files)
		slices.SortFunc(files, func(x, y File) int { return strings.Compare(x.Path, y.Path) })
		// Most imports are spelled the same in many files: resolve each
		// spelling once per repository (per file directory or file where
		// the answer depends on it).
		memo := map[memoKey]resolved{}
		for fi, f := range files {
			if fi > 0 && f.Path == files[fi-1].Path {
				continue
			}
			from := Ref{r.name, f.Path}
			mine = mine[:0]
			specs := map[string]bool{}
			for _, raw := range f.Imports {
				spec := strings.TrimSpace(raw)
				if spec == "" || specs[spec] {
					continue
				}
				specs[spec] = true
				mk := memoKey{lang: f.Language, spec: spec}
				switch f.Language {
				case codectx.Python:
					mk.scope = dirOf(f.Path)
				case codectx.Rust:
					mk.scope = f.Path
				case codectx.TSX, codectx.JavaScript:
					mk.lang = codectx.TypeScript
				}
				res, ok := memo[mk]
				if !ok {
					tos, via := b.resolve(ri, f, spec)
					res = resolved{tos: tos}
					if len(tos) > 0 {
						res.via = viaOf(via)
					}
					memo[mk] = res
				}
				if len(res.tos) > 0 {
					g.imports++
				}
				for _, to := range res.tos {
					if to.Repo != r.name {
						mine = append(mine, link{from: from, to: to, spec: spec, via: res.via})
					}
				}
			}
			slices.SortStableFunc(mine, func(x, y link) int { return refCmp(x.to, y.to) })
			for i, l := range mine {
				if i > 0 && l.to == mine[i-1].to {
					continue // first spelling wins
				}
				g.links = append(g.links, l)
			}
		}
	}
	for i, l := range g.links {
		g.from[l.from] = append(g.from[l.from], int32(i))
		g.to[l.to] = append(g.to[l.to], int32(i))
	}
	return g
}

func refCmp(a, b Ref) int {
	if c := strings.Compare(a.Repo, b.Repo); c != 0 {
		return c
	}
	return strings.Compare(a.Path, b.Path)
}

// resolve maps one import of file f of repository ri to the files of
// other repositories it names.
func (b *builder) resolve(ri int, f File, spec string) ([]Ref, Identity) {
	switch f.Language {
	case codectx.Go:
		return b.goImport(ri, spec)
	case codectx.TypeScript, codectx.TSX, codectx.JavaScript:
		return b.jsImport(ri, spec)
	case codectx.Python:
		return b.pyImport(ri, f, spec)
	case codectx.Java:
		return b.javaImport(ri, spec)
	case codectx.Rust:
		return b.rustImport(ri, f, spec)
	}
	return nil, Identity{}
}

// identity finds the identity of repository ri by ecosystem and dir.
func (b *builder) identity(ri int, eco, dir string) Identity {
	for _, id := range b.repos[ri].ids {
		if id.Ecosystem == eco && id.Dir == dir {
			return id
		}
	}
	return Identity{Ecosystem: eco, Dir: dir}
}

// --- indexing ---

func indexRepo(r *Repo) *repoIndex {
	x := &repoIndex{name: r.Name, files: map[string]bool{}, goDirs: map[string][]string{}, pyInit: map[string]bool{},
		pyTops: map[string][]string{}, javaCls: map[string][]string{}, javaPkg: map[string][]string{}}
	for _, f := range r.Files {
		x.files[f.Path] = true
		dir := dirOf(f.Path)
		switch f.Language {
		case codectx.Go:
			if !strings.HasSuffix(f.Path, "_test.go") {
				x.goDirs[dir] = append(x.goDirs[dir], f.Path)
			}
		case codectx.Python:
			if path.Base(f.Path) == "__init__.py" {
				x.pyInit[dir] = true
			}
		case codectx.Java:
			if f.Module != "" {
				x.javaCls[f.Module] = append(x.javaCls[f.Module], f.Path)
				if p := parentName(f.Module); p != "" {
					x.javaPkg[p] = append(x.javaPkg[p], f.Path)
				}
			}
		}
	}
	paths := make([]string, 0, len(r.Manifests))
	for p := range r.Manifests {
		if IsManifest(p) {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	pyDirs := map[string]string{} // manifest dir -> distribution
	for _, p := range paths {
		data, dir, base := r.Manifests[p], dirOf(p), path.Base(p)
		switch base {
		case "go.mod":
			if m := goModulePath(data); m != "" {
				x.goMods = append(x.goMods, goMod{dir, m})
				x.ids = append(x.ids, Identity{Ecosystem: Go, Name: m, Dir: dir})
			}
		case "package.json":
			var m npmManifest
			if jsonUnmarshal(data, &m) && validNPMName(m.Name) {
				x.npm = append(x.npm, &npmPkg{name: m.Name, dir: dir, m: m, exports: exportsMap(m.Exports)})
				x.ids = append(x.ids, Identity{Ecosystem: NPM, Name: m.Name, Dir: dir})
			}
		case "pyproject.toml", "setup.cfg", "setup.py":
			if cur, ok := pyDirs[dir]; !ok || cur == "" {
				pyDirs[dir] = pythonDistribution(base, data)
			}
		case "pom.xml":
			if c := pomCoordinates(data); c != "" {
				x.ids = append(x.ids, Identity{Ecosystem: Maven, Name: c, Dir: dir, Imports: x.javaPackagesUnder(dir)})
			}
		case "Cargo.toml":
			pkg, ident, root := cargoCrate(data)
			root = path.Clean(join(dir, root))
			if pkg != "" && x.files[root] {
				x.crates = append(x.crates, crate{ident: ident, dir: dir, root: root})
				id := Identity{Ecosystem: Cargo, Name: pkg, Dir: dir}
				if ident != pkg {
					id.Imports = []string{ident}
				}
				x.ids = append(x.ids, id)
			}
		}
	}
	dirs := make([]string, 0, len(pyDirs))
	for d := range pyDirs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		var tops []string
		for _, root := range []string{d, join(d, "src")} {
			for _, top := range x.pyTopLevel(root) {
				x.pyTops[top] = append(x.pyTops[top], root)
				tops = append(tops, top)
			}
		}
		if len(tops) == 0 {
			continue
		}
		name := pyDirs[d]
		if name == "" {
			name = tops[0]
		}
		x.ids = append(x.ids, Identity{Ecosystem: Python, Name: name, Dir: d, Imports: tops})
	}
	return x
}

// notProvided are top-level directory and module names that are a
// repository's own tooling, never what it publishes.
var notProvided = map[string]bool{
	"test": true, "tests": true, "testing": true, "docs": true, "doc": true, "examples": true, "example": true,
	"benchmarks": true, "bench": true, "scripts": true, "tools": true, "setup": true, "conftest": true,
	"noxfile": true, "fabfile": true, "manage": true, "tasks": true, "build": true, "dist": true,
}

// pyTopLevel lists the importable top-level packages and modules under
// root: directories holding .py files and .py files.
func (x *repoIndex) pyTopLevel(root string) []string {
	seen := map[string]bool{}
	var out []string
	for p := range x.files {
		rel, ok := strings.CutPrefix(p, root)
		if root != "" {
			if !ok || !strings.HasPrefix(rel, "/") {
				continue
			}
			rel = rel[1:]
		}
		var top string
		switch el := strings.Split(rel, "/"); {
		case len(el) == 2 && (strings.HasSuffix(el[1], ".py") || strings.HasSuffix(el[1], ".pyi")):
			top = el[0] // a package: an empty __init__.py is not indexed, so any module counts
		case len(el) == 1 && (strings.HasSuffix(el[0], ".py") || strings.HasSuffix(el[0], ".pyi")):
			top = strings.TrimSuffix(strings.TrimSuffix(el[0], ".py"), ".pyi")
		}
		if top == "" || notProvided[top] || strings.HasPrefix(top, "test_") || strings.HasPrefix(top, "_") || !identLike(top) || seen[top] {
			continue
		}
		seen[top] = true
		out = append(out, top)
	}
	sort.Strings(out)
	return out
}

// javaPackagesUnder lists the Java packages of the sources under dir.
func (x *repoIndex) javaPackagesUnder(dir string) []string {
	var out []string
	for p, fs := range x.javaPkg {
		for _, f := range fs {
			if (dir == "" || strings.HasPrefix(f, dir+"/")) && javaProvided(f) {
				out = append(out, p)
				break
			}
		}
	}
	sort.Strings(out)
	if len(out) > 50 {
		out = out[:50]
	}
	return out
}

// javaProvided reports whether a Java file is part of what its repository
// publishes (not a test source).
func javaProvided(p string) bool {
	return !strings.Contains("/"+p, "/src/test/")
}

// --- Go ---

func goSpec(raw string) string {
	spec := strings.Trim(raw, `"`)
	if i := strings.IndexByte(spec, ' '); i >= 0 {
		spec = strings.Trim(spec[i+1:], `" `)
	}
	return spec
}

func modMatch(spec, mod string) (rest string, ok bool) {
	if spec == mod {
		return "", true
	}
	if strings.HasPrefix(spec, mod+"/") {
		return spec[len(mod)+1:], true
	}
	return "", false
}

func (b *builder) goImport(ri int, raw string) ([]Ref, Identity) {
	spec := goSpec(raw)
	for _, m := range b.repos[ri].goMods {
		if _, ok := modMatch(spec, m.path); ok {
			return nil, Identity{} // the repository's own module
		}
	}
	var out []Ref
	var via Identity
	best := -1
	for _, m := range b.goMods {
		if len(m.path) < best {
			break
		}
		rest, ok := modMatch(spec, m.path)
		if !ok || m.repo == ri {
			continue
		}
		best = len(m.path)
		r := b.repos[m.repo]
		for _, f := range r.goDirs[cleanJoin(m.dir, rest)] {
			out = append(out, Ref{r.name, f})
		}
		if via.Ecosystem == "" {
			via = b.identity(m.repo, Go, m.dir)
		}
	}
	return out, via
}

// --- npm ---

func validNPMName(n string) bool {
	if n == "" || len(n) > 214 || strings.ContainsAny(n, " \\") || strings.HasPrefix(n, ".") {
		return false
	}
	if strings.HasPrefix(n, "@") {
		scope, name, ok := strings.Cut(n[1:], "/")
		return ok && scope != "" && name != "" && !strings.Contains(name, "/")
	}
	return !strings.Contains(n, "/")
}

// npmName splits a bare specifier into package name and subpath.
func npmName(spec string) (name, sub string, ok bool) {
	if spec == "" || strings.HasPrefix(spec, ".") || strings.HasPrefix(spec, "/") || strings.Contains(spec, ":") {
		return "", "", false // relative, absolute, node:, URLs
	}
	if i := strings.IndexAny(spec, "?#"); i >= 0 {
		spec = spec[:i]
	}
	el := strings.Split(spec, "/")
	n := 1
	if strings.HasPrefix(spec, "@") {
		if len(el) < 2 {
			return "", "", false
		}
		n = 2
	}
	return strings.Join(el[:n], "/"), strings.Join(el[n:], "/"), true
}

func (b *builder) jsImport(ri int, spec string) ([]Ref, Identity) {
	name, sub, ok := npmName(spec)
	if !ok {
		return nil, Identity{}
	}
	for _, p := range b.repos[ri].npm {
		if p.name == name {
			return nil, Identity{} // a workspace package of the repository itself
		}
	}
	var out []Ref
	var via Identity
	for _, pv := range b.npm[name] {
		if pv.repo == ri {
			continue
		}
		r := b.repos[pv.repo]
		if f, ok := r.npmFile(pv.npm, sub); ok {
			out = append(out, Ref{r.name, f})
			if via.Ecosystem == "" {
				via = b.identity(pv.repo, NPM, pv.npm.dir)
			}
		}
	}
	return out, via
}

var jsExts = []string{".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts"}

// buildDirs are where packages put build output that mirrors src/.
var buildDirs = []string{"dist/", "lib/", "build/", "out/", "esm/", "cjs/", "es/", "types/"}

// npmFile finds the file a subpath of package p names ("" is the package
// itself): the exports entry, else source, module, main or types, else
// the subpath as a path; build output paths (dist/index.js) are read back
// to their source (src/index.ts).
func (x *repoIndex) npmFile(p *npmPkg, sub string) (string, bool) {
	var cands []string
	if sub == "" {
		cands = append(cands, p.exports["."]...)
		cands = append(cands, p.m.Source, p.m.Module, p.m.Main, p.m.Types, p.m.Typings, "index", "src/index")
	} else {
		cands = append(cands, p.exports["./"+sub]...)
		for k, ts := range p.exports {
			pre, post, ok := strings.Cut(k, "*")
			if !ok || !strings.HasPrefix("./"+sub, pre) || !strings.HasSuffix("./"+sub, post) || len("./"+sub) < len(pre)+len(post) {
				continue
			}
			star := ("./" + sub)[len(pre) : len("./"+sub)-len(post)]
			for _, t := range ts {
				cands = append(cands, strings.ReplaceAll(t, "*", star))
			}
		}
		cands = append(cands, sub, "src/"+sub)
	}
	for _, c := range cands {
		c = strings.TrimPrefix(strings.TrimSpace(c), "./")
		if c == "" || strings.HasPrefix(c, "/") {
			continue
		}
		variants := []string{c}
		for _, d := range buildDirs {
			if rest, ok := strings.CutPrefix(c, d); ok {
				variants = append(variants, "src/"+rest, rest)
			}
		}
		for _, v := range variants {
			if f, ok := x.jsFile(cleanJoin(p.dir, v)); ok {
				return f, true
			}
		}
	}
	return "", false
}

// jsFile resolves a module path as a bundler would: the file, its
// TypeScript source for a .js name, the name with an extension, an index
// file of the directory.
func (x *repoIndex) jsFile(base string) (string, bool) {
	if base == "" || base == "." || strings.HasPrefix(base, "../") {
		return "", false
	}
	var cands []string
	stem := base
	for _, e := range []string{".d.ts", ".d.mts", ".d.cts"} {
		if s, ok := strings.CutSuffix(base, e); ok {
			stem = s
			cands = append(cands, s+".ts", s+".tsx", s+".mts", s+".cts")
		}
	}
	cands = append(cands, base)
	if stem == base {
		ext := path.Ext(base)
		s := strings.TrimSuffix(base, ext)
		switch ext {
		case ".js", ".jsx":
			cands = append(cands, s+".ts", s+".tsx")
		case ".mjs":
			cands = append(cands, s+".mts")
		case ".cjs":
			cands = append(cands, s+".cts")
		}
	}
	for _, e := range jsExts {
		cands = append(cands, base+e)
	}
	for _, e := range jsExts {
		cands = append(cands, join(base, "index"+e))
	}
	for _, c := range cands {
		if x.files[c] {
			return c, true
		}
	}
	return "", false
}

// --- Python ---

func (b *builder) pyImport(ri int, f File, spec string) ([]Ref, Identity) {
	if spec == "" || strings.HasPrefix(spec, ".") {
		return nil, Identity{}
	}
	top, _, _ := strings.Cut(spec, ".")
	a := b.repos[ri]
	if a.pyLocal(f, top) {
		return nil, Identity{}
	}
	var out []Ref
	var via Identity
	for _, pv := range b.py[top] {
		if pv.repo == ri {
			continue
		}
		r := b.repos[pv.repo]
		mod := spec
		for try := 0; try < 2 && mod != ""; try++ {
			if t, ok := r.pyModule(pv.dir, mod); ok {
				out = append(out, Ref{r.name, t})
				if via.Ecosystem == "" {
					via = b.pyIdentity(pv.repo, pv.dir)
				}
				break
			}
			mod = parentName(mod)
		}
	}
	return out, via
}

func (b *builder) pyIdentity(ri int, root string) Identity {
	d := root
	if s, ok := strings.CutSuffix(root, "src"); ok && (s == "" || strings.HasSuffix(s, "/")) {
		d = strings.TrimSuffix(s, "/")
	}
	return b.identity(ri, Python, d)
}

// pyLocal reports whether the repository itself has top-level module top
// where an absolute import from f looks (the root, src/ and every
// ancestor of f that is not a package), as pkg/graph resolves it.
func (x *repoIndex) pyLocal(f File, top string) bool {
	roots := []string{"", "src"}
	for d := dirOf(f.Path); d != ""; d = dirOf(d) {
		if !x.pyInit[d] {
			roots = append(roots, d)
		}
	}
	for _, root := range roots {
		p := join(root, top)
		if x.files[p+".py"] || x.files[p+".pyi"] || x.files[p+"/__init__.py"] {
			return true
		}
	}
	return false
}

func (x *repoIndex) pyModule(root, mod string) (string, bool) {
	p := join(root, strings.ReplaceAll(mod, ".", "/"))
	for _, c := range []string{p + ".py", p + ".pyi", p + "/__init__.py"} {
		if x.files[c] {
			return c, true
		}
	}
	return "", false
}

// --- Java ---

func (b *builder) javaImport(ri int, spec string) ([]Ref, Identity) {
	spec = strings.TrimSuffix(strings.TrimSpace(spec), ";")
	spec = strings.TrimSpace(strings.TrimPrefix(spec, "static "))
	a := b.repos[ri]
	var refs []Ref
	if pkg, ok := strings.CutSuffix(spec, ".*"); ok {
		if len(a.javaPkg[pkg]) > 0 || len(a.javaCls[pkg]) > 0 {
			return nil, Identity{}
		}
		refs = b.pkg[pkg]
		if len(refs) == 0 {
			refs = b.cls[pkg] // static a.b.C.*
		}
	} else {
		for try, s := 0, spec; try < 3 && s != ""; try, s = try+1, parentName(s) {
			if len(a.javaCls[s]) > 0 {
				return nil, Identity{}
			}
			if refs = b.cls[s]; len(refs) > 0 {
				break
			}
		}
	}
	var out []Ref
	var via Identity
	for _, r := range refs {
		if r.Repo == a.name {
			continue
		}
		out = append(out, r)
		if via.Ecosystem == "" {
			via = b.javaIdentity(r)
		}
	}
	return out, via
}

// javaIdentity is the Maven module whose directory holds file r (the
// deepest), else the Java package of the file.
func (b *builder) javaIdentity(r Ref) Identity {
	best := Identity{}
	for _, x := range b.repos {
		if x.name != r.Repo {
			continue
		}
		for _, id := range x.ids {
			if id.Ecosystem == Maven && (id.Dir == "" || strings.HasPrefix(r.Path, id.Dir+"/")) && (best.Ecosystem == "" || len(id.Dir) > len(best.Dir)) {
				best = id
			}
		}
	}
	return best
}

// --- Rust ---

func rustSpec(spec string) string {
	spec = strings.TrimSpace(strings.TrimSuffix(spec, ";"))
	spec = strings.TrimPrefix(spec, "pub ")
	spec = strings.TrimPrefix(spec, "use ")
	spec = strings.TrimPrefix(spec, "::")
	if i := strings.Index(spec, " as "); i >= 0 {
		spec = spec[:i]
	}
	if i := strings.Index(spec, "{"); i >= 0 {
		spec = spec[:i]
	}
	return strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(spec), "*"), "::")
}

func (b *builder) rustImport(ri int, f File, raw string) ([]Ref, Identity) {
	if strings.HasPrefix(raw, "mod:") {
		return nil, Identity{}
	}
	segs := strings.Split(rustSpec(raw), "::")
	first := segs[0]
	switch first {
	case "", "crate", "self", "super", "std", "core", "alloc":
		return nil, Identity{}
	}
	a := b.repos[ri]
	if _, ok := a.rustModFile(join(rustModDir(f.Path), first)); ok {
		return nil, Identity{} // a child module of the importing file
	}
	for _, c := range a.crates {
		if c.ident == first {
			return nil, Identity{} // the repository's own crate (a binary using its library)
		}
	}
	var out []Ref
	var via Identity
	for _, pv := range b.crates[first] {
		if pv.repo == ri {
			continue
		}
		r := b.repos[pv.repo]
		t := pv.cr.root
		base := dirOf(pv.cr.root)
		for n := len(segs) - 1; n >= 1; n-- {
			if m, ok := r.rustModFile(join(base, strings.Join(segs[1:n+1], "/"))); ok {
				t = m
				break
			}
		}
		out = append(out, Ref{r.name, t})
		if via.Ecosystem == "" {
			via = b.identity(pv.repo, Cargo, pv.cr.dir)
		}
	}
	return out, via
}

func rustModDir(p string) string {
	switch path.Base(p) {
	case "lib.rs", "main.rs", "mod.rs":
		return dirOf(p)
	}
	return strings.TrimSuffix(p, ".rs")
}

func (x *repoIndex) rustModFile(p string) (string, bool) {
	if p == "" {
		return "", false
	}
	for _, c := range []string{p + ".rs", p + "/mod.rs"} {
		if x.files[c] {
			return c, true
		}
	}
	return "", false
}

// --- helpers ---

func parentName(m string) string {
	if i := strings.LastIndexByte(m, '.'); i >= 0 {
		return m[:i]
	}
	return ""
}

func identLike(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

func dirOf(p string) string {
	d := path.Dir(p)
	if d == "." || d == "/" {
		return ""
	}
	return d
}

func join(dir, rel string) string {
	if dir == "" {
		return rel
	}
	if rel == "" {
		return dir
	}
	return dir + "/" + rel
}

// cleanJoin joins and cleans; a result outside the repository is "".
func cleanJoin(dir, rel string) string {
	p := path.Clean(join(dir, rel))
	if p == "." {
		return ""
	}
	if p == ".." || strings.HasPrefix(p, "../") || strings.HasPrefix(p, "/") {
		return "\x00"
	}
	return p
}

func sortStrings(s []string) { sort.Strings(s) }
