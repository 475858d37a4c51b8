package api

import (
	"path"
	"slices"
	"strings"

	"codectx/pkg/codectx"
	"codectx/pkg/segment"
)

// symbolHit is one declaration a name resolves to: chunk id of seg.
type symbolHit struct {
	seg *segment.Segment
	id  int
}

// How well a declaration matches the name asked for, best first:
// resolveSymbol keeps the declarations of the best rank found.
const (
	rankWhole         = iota // the name as the index writes it, case and all (Router.Mount, (*Router).Mount, Mount)
	rankQualified            // pkg.Name, module.name: the rest of the name, in the file of that package or module
	rankMember               // pkg.Method: a member of that short name in that package or module
	rankQualifiedFold        // as rankQualified, the rest in another case
	rankWholeFold            // as rankWhole, in another case (Lookup ignores case)
	rankNone
)

// maxNameParts bounds the dotted parts of a name resolveSymbol splits
// into a qualifier and the rest (com.example.app.billing.Money.round is
// 7): a longer name is looked up whole only, so that one endless name
// (A.A.A...) costs what its one lookup does.
const maxNameParts = 12

// resolveSymbol finds the declarations name refers to in segs, the
// lookup of the symbol, references and impact tools. It reads those
// segments only, the ones the call was scoped to (its tenant's,
// repoSegs), and nothing else: a package or module qualifier is matched
// against the files of segs.
//
// The name is looked up as it is (seg.Lookup: Type.method, (*T).M,
// Class#method, Mod::item, a short name). When that finds no
// declaration of the same case and the name is qualified (A.B...), the
// shorter forms are tried in the files of package or module A: Go
// http.ListenAndServe, http.Server.ListenAndServe, codectx.Kind (the
// package clause's name); Python json.loads, email.utils.parseaddr (the
// file's module or package, by its path); TypeScript and JavaScript
// utils.parse (the file's path: stem or directory); Java
// com.acme.Money.round; Rust crate::de::from_str. A qualifier that names
// no such package or module gives nothing there: same-named symbols of
// other packages are not what was asked for.
//
// The lookup ignores case, so exact case wins: handler and Handler, or
// newRequest and NewRequest, are told apart when both are declared; a
// name matches in another case only when nothing matches in its own.
func resolveSymbol(segs []*segment.Segment, name string) []symbolHit {
	name = strings.TrimSpace(name)
	if name == "" {
		return nil
	}
	want := segment.PlainName(name)
	best := rankNone
	var hits []symbolHit
	seen := map[symbolHit]bool{}
	add := func(seg *segment.Segment, id, rank int) {
		switch {
		case rank < best:
			best, hits = rank, nil
			clear(seen)
		case rank > best:
			return
		}
		if h := (symbolHit{seg, id}); !seen[h] {
			seen[h] = true
			hits = append(hits, h)
		}
	}
	for _, seg := range segs {
		for _, id := range seg.Lookup(name) {
			c := seg.Chunks[id]
			if !isDecl(c.Kind) {
				continue
			}
			rank := rankWholeFold
			if segment.PlainName(c.Name) == want || segment.PlainName(segment.ShortName(c.Name)) == want {
				rank = rankWhole
			}
			add(seg, id, rank)
		}
	}
	// The qualified forms, qual.rest: qual one or more whole parts, in
	// the order tried.
	type split struct{ qual, rest string }
	var splits []split
	if best > rankWhole && strings.Count(want, ".") < maxNameParts {
		parts := strings.Split(want, ".")
		for k := 1; k < len(parts) && parts[k-1] != ""; k++ {
			splits = append(splits, split{strings.Join(parts[:k], "."), strings.Join(parts[k:], ".")})
		}
	}
	for _, seg := range segs {
		for _, sp := range splits {
			qual, rest := sp.qual, sp.rest
			for _, id := range seg.Lookup(rest) {
				c := seg.Chunks[id]
				if !isDecl(c.Kind) || !inModule(seg, c, qual) {
					continue
				}
				full := segment.PlainName(c.Name)
				switch {
				case full == rest:
					add(seg, id, rankQualified)
				case !strings.Contains(rest, ".") && segment.PlainName(segment.ShortName(c.Name)) == rest:
					add(seg, id, rankMember)
				case strings.ToLower(full) == strings.ToLower(rest):
					add(seg, id, rankQualifiedFold)
				}
			}
		}
	}
	// In the order of segs, then of the chunks: as a lookup finds them.
	order := make(map[*segment.Segment]int, len(segs))
	for i, seg := range segs {
		order[seg] = i
	}
	slices.SortStableFunc(hits, func(a, b symbolHit) int {
		if a.seg != b.seg {
			return order[a.seg] - order[b.seg]
		}
		return a.id - b.id
	})
	return hits
}

// inModule reports whether declaration c is in the package or module
// qual names (dotted, as resolveSymbol splits a name): in Go the
// package clause's name; elsewhere the file's module (its path, or the
// dotted module its language gives it: email.utils, com.acme.Money,
// crate.de) or, but in Rust, the package or directory holding it, each
// as a whole or by its last elements (utils for pkg/utils.py).
func inModule(seg *segment.Segment, c codectx.Chunk, qual string) bool {
	mod := fileModule(seg, c)
	if c.Language == codectx.Go {
		return mod == qual
	}
	if dottedSuffix(mod, qual) {
		return true
	}
	if c.Language == codectx.Rust {
		return false
	}
	i := strings.LastIndexByte(mod, '.')
	return i > 0 && dottedSuffix(mod[:i], qual)
}

// dottedSuffix reports whether qual is mod or its last dotted elements.
func dottedSuffix(mod, qual string) bool {
	return mod == qual || strings.HasSuffix(mod, "."+qual)
}

// fileModule is the package or module of c's file, dotted: the name its
// module chunk carries (Go's package clause, Python's module, Java's
// package and class, Rust's crate path, a TypeScript file's path), else
// one from the path (Go: its directory's last element).
func fileModule(seg *segment.Segment, c codectx.Chunk) string {
	mod := ""
	if f, ok := seg.File(c.Path); ok && len(f.Chunks) > 0 {
		if m := seg.Chunks[f.Chunks[0]]; m.Kind == codectx.KindModule {
			mod = m.Name
		}
	}
	if mod == "" {
		if c.Language == codectx.Go {
			return path.Base(path.Dir(c.Path))
		}
		mod = strings.TrimSuffix(c.Path, path.Ext(c.Path))
	}
	return strings.ReplaceAll(segment.PlainName(mod), "/", ".")
}
