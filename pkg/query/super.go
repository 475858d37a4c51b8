package query

import (
	"slices"
	"strings"
	"unicode"

	"codectx/pkg/codectx"
	"codectx/pkg/segment"
)

// armSymbolSuper is the type-hierarchy list, fused as part of the symbol
// arm when Request.Supertypes asks for it: the supertypes and subtypes of
// the classes and interfaces the query names. A change to "the Duration
// constructor" may land in BaseDuration, which Duration extends, and one
// to an interface in its implementations; neither shares the query's
// words as much as the named class does, so the lexical lists rank them
// far down (docs/benchmarks.md, fifth round).
const armSymbolSuper = "symbol-super"

// superWeight is the type-hierarchy list's share of the symbol arm's
// fusion weight.
const superWeight = 0.5

// maxSubtypes bounds the subtypes one named type contributes: an
// interface with hundreds of implementations names none of them.
const maxSubtypes = 10

// hierarchy maps type names to the chunks of their direct supertypes and
// subtypes, read from class and interface signatures.
type hierarchy struct {
	supers map[int][]string // type chunk -> normalized names it extends or implements
	subs   map[string][]int // normalized supertype name -> chunks of the types extending it
}

// typeHierarchy returns the segment's hierarchy, built once per segment.
func typeHierarchy(seg *segment.Segment) *hierarchy {
	return seg.Memo("query.typeHierarchy", func() any {
		h := &hierarchy{supers: map[int][]string{}, subs: map[string][]int{}}
		for id, c := range seg.Chunks {
			if c.Kind != codectx.KindClass && c.Kind != codectx.KindInterface {
				continue
			}
			for _, s := range superNames(c.Language, c.Signature) {
				n := segment.NormalizeName(s)
				if n == "" || slices.Contains(h.supers[id], n) {
					continue
				}
				h.supers[id] = append(h.supers[id], n)
				h.subs[n] = append(h.subs[n], id)
			}
		}
		return h
	}).(*hierarchy)
}

// superNames reads the names a class or interface signature extends or
// implements, without qualifiers or type arguments: "class Duration extends
// BaseDuration implements ReadableDuration, Serializable" -> [BaseDuration
// ReadableDuration Serializable]; Python "class Session(SessionRedirectMixin):"
// -> [SessionRedirectMixin].
func superNames(lang codectx.Language, sig string) []string {
	if i := strings.IndexByte(sig, '{'); i >= 0 {
		sig = sig[:i]
	}
	if len(sig) > 1000 {
		sig = sig[:1000]
	}
	sig = " " + strings.Join(strings.Fields(sig), " ") + " "
	var list string
	if lang == codectx.Python {
		i, j := strings.IndexByte(sig, '('), strings.LastIndexByte(sig, ')')
		if i < 0 || j < i {
			return nil
		}
		list = sig[i+1 : j]
	} else {
		for _, kw := range []string{" extends ", " implements "} {
			if i := strings.Index(sig, kw); i >= 0 {
				rest := sig[i+len(kw):]
				for _, stop := range []string{" extends ", " implements ", " permits ", " where "} {
					if j := strings.Index(rest, stop); j >= 0 {
						rest = rest[:j]
					}
				}
				list += "," + rest
			}
		}
	}
	// Drop type arguments, then split at commas.
	var b strings.Builder
	depth := 0
	for _, r := range list {
		switch {
		case r == '<' || r == '[' || r == '(':
			depth++
		case r == '>' || r == ']' || r == ')':
			depth = max(0, depth-1)
		case depth == 0:
			b.WriteRune(r)
		}
	}
	var out []string
	for _, part := range strings.Split(b.String(), ",") {
		part = strings.TrimSpace(part)
		if i := strings.LastIndexAny(part, ".:"); i >= 0 {
			part = part[i+1:]
		}
		if part == "" || strings.ContainsFunc(part, func(r rune) bool { return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '$') }) {
			continue
		}
		if lang == codectx.Python && (part == "object" || strings.Contains(part, "=")) {
			continue
		}
		out = append(out, part)
	}
	return out
}

// superArm lists, for each class or interface the query names, the chunks
// of its direct supertypes, then of at most maxSubtypes subtypes.
func (e *Engine) superArm(syms []string, keep func(int) bool) []int {
	seg := e.Seg
	h := typeHierarchy(seg)
	seen := map[int]bool{}
	var out []int
	addID := func(id int) {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, s := range syms {
		parts := symbolParts(s)
		if len(parts) == 0 {
			continue
		}
		name := strings.Join(parts, ".")
		ids := seg.Lookup(name)
		if len(ids) == 0 {
			ids = seg.Lookup(parts[len(parts)-1])
		}
		for _, id := range ids {
			c := seg.Chunks[id]
			if c.Kind != codectx.KindClass && c.Kind != codectx.KindInterface {
				continue
			}
			seen[id] = true // the named type itself is the symbol arm's
			for _, sup := range h.supers[id] {
				for _, sid := range seg.Lookup(sup) {
					if k := seg.Chunks[sid].Kind; k == codectx.KindClass || k == codectx.KindInterface {
						addID(sid)
					}
				}
			}
			short := segment.NormalizeName(c.Name)
			if i := strings.LastIndexByte(short, '.'); i >= 0 {
				short = short[i+1:]
			}
			subs := h.subs[short]
			for _, sid := range subs[:min(len(subs), maxSubtypes)] {
				addID(sid)
			}
		}
	}
	return filterIDs(out, keep)
}
