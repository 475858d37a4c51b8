package query

import (
	"math"
	"path"
	"slices"
	"sort"
	"strings"

	"codectx/pkg/codectx"
	"codectx/pkg/segment"
	"codectx/pkg/tokenize"
)

// armBM25Path is the file-name ranking, fused as part of the bm25 arm:
// files whose name the query says. Developers name files after the
// component they hold ("error" -> src/error.rs, "fix(proxy): ..." ->
// src/utils/proxy.ts), and a file's name is the one word of its path that
// the body-weighted rankings drown among the many chunks that merely use
// the word.
const armBM25Path = "bm25-path"

// indexStems are the stems of a directory's index module, which re-exports
// its siblings.
var indexStems = map[string]bool{"index": true, "mod": true, "__init__": true, "lib": true}

// baseStem is a path's base name up to its first dot ("app.test.ts" -> app).
func baseStem(p string) string {
	base := path.Base(p)
	if i := strings.IndexByte(base, '.'); i > 0 {
		return base[:i]
	}
	return base
}

// fileStem returns the name a file goes by: its base name without the
// extension ("server_sent_events.ts" -> server_sent_events), or the
// directory's name for an index or main file (src/utils/index.ts -> utils).
func fileStem(p string) string {
	stem := baseStem(p)
	if low := strings.ToLower(stem); indexStems[low] || low == "main" {
		stem = path.Base(path.Dir(p))
		if stem == "." || stem == "/" {
			return ""
		}
	}
	return stem
}

// classNamed are the languages whose files are named after the class they
// declare (Attribute.java holds class Attribute). The class chunk's name
// field already carries that word, so a file-name match would count it
// twice: on the dev tasks it put Selector.java above QueryParser.java for
// "consecutive combinators in CSS selectors".
var classNamed = map[codectx.Language]bool{codectx.Java: true}

// nameIndex maps each term of a file name to the files (positions in
// Segment.Files) whose name has it, and holds each name's part count.
type nameIndex struct {
	files  map[string][]int
	parts  []int
	abbrs  []abbr
	byPath map[string]fileName // each file's entry, for the next snapshot's index
}

// abbr is a file-name part that abbreviates a word the file's symbols
// spell out: src/de.rs declares Deserializer and deserialize_any, so "de"
// stands for "deserializer" and the query word "deserialization" names it.
type abbr struct {
	file        int
	short, long string
}

// Abbreviation limits: a name part of at most maxAbbr bytes expands to the
// commonest longer word (at least minExpand bytes more) that starts with
// it among the parts of the file's symbol names, if at least minAbbrUses
// symbols use it.
const (
	maxAbbr     = 4
	minExpand   = 3
	minAbbrUses = 3
)

// expand returns the word that abbreviation s stands for in file f, or "".
func expand(seg *segment.Segment, f segment.File, s string) string {
	count := map[string]int{}
	for _, id := range f.Chunks {
		var seen []string
		for _, t := range tokenize.Split(seg.Chunks[id].Name) {
			if len(t) >= len(s)+minExpand && strings.HasPrefix(t, s) && !slices.Contains(seen, t) {
				seen = append(seen, t)
				count[t]++
			}
		}
	}
	best, n := "", 0
	for t, c := range count {
		if c > n || c == n && t < best {
			best, n = t, c
		}
	}
	if n < minAbbrUses {
		return ""
	}
	return best
}

// abbreviates reports whether query term t is the word a.long stands for:
// it starts with the abbreviation and agrees with the expansion up to the
// last few letters (deserializ-ation, -ing, -er).
func (a abbr) abbreviates(t string) bool {
	if !strings.HasPrefix(t, a.short) {
		return false
	}
	n := 0
	for n < len(t) && n < len(a.long) && t[n] == a.long[n] {
		n++
	}
	return n >= len(a.short)+minExpand && n >= len(a.long)-2
}

// fileName is what a file adds to the name index: the parts of its name
// (0: not indexed), its distinct name tokens and, for each, the word it
// abbreviates ("" if none).
type fileName struct {
	parts       int
	toks, longs []string
}

// fileNames returns the segment's name index, built once per segment.
func fileNames(seg *segment.Segment) *nameIndex { return fileNamesOf(seg, false) }

// fileNamesOf is fileNames, with the files of classNamed languages too
// when classes is set. A file that came from a shard the segment it was
// joined from holds has its entry taken from that one's index.
func fileNamesOf(seg *segment.Segment, classes bool) *nameIndex {
	key := "query.fileNames"
	if classes {
		key = "query.fileNamesClasses"
	}
	return seg.MemoFrom(key, func(old any, same func(string) bool) any {
		prev, _ := old.(*nameIndex)
		ix := &nameIndex{files: map[string][]int{}, parts: make([]int, len(seg.Files)), byPath: make(map[string]fileName, len(seg.Files))}
		for i, f := range seg.Files {
			e, ok := fileName{}, false
			if prev != nil && same(f.Path) {
				e, ok = prev.byPath[f.Path]
			}
			if !ok {
				e = nameOf(seg, f, classes)
			}
			ix.byPath[f.Path] = e
			ix.parts[i] = e.parts
			for k, t := range e.toks {
				ix.files[t] = append(ix.files[t], i)
				if e.longs[k] != "" {
					ix.abbrs = append(ix.abbrs, abbr{file: i, short: t, long: e.longs[k]})
				}
			}
		}
		return ix
	}).(*nameIndex)
}

// nameOf is file f's entry of the name index (with classNamed languages
// when classes is set).
func nameOf(seg *segment.Segment, f segment.File, classes bool) fileName {
	// A test is named after what it tests: the name points at the code,
	// not at its test (which the path prior ranks lower anyway).
	if classNamed[f.Language] && !classes || IsTestPath(f.Path) {
		return fileName{}
	}
	stem := fileStem(f.Path)
	e := fileName{parts: max(1, len(tokenize.Split(stem)))}
	for _, t := range tokenize.Tokens(stem) {
		if !slices.Contains(e.toks, t) {
			long := ""
			if len(t) <= maxAbbr {
				long = expand(seg, f, t)
			}
			e.toks = append(e.toks, t)
			e.longs = append(e.longs, long)
		}
	}
	return e
}

// title is the first non-empty line of q. A task's or commit's title names
// the component it changes; its body names neighbours in passing ("fix
// flaky retry tests" in the body of a request-construction change), so
// only the title's words are matched against file names.
func title(q string) string {
	q = strings.TrimSpace(q)
	if i := strings.IndexByte(q, '\n'); i >= 0 {
		return q[:i]
	}
	return q
}

// pathArm ranks the files whose title words match file names: each matched
// term adds its inverse file frequency over file names, scaled by how much
// of the name it covers, so "proxy" ranks proxy.ts above proxy_utils.ts.
// Terms of the query's scope count double. Each file is represented by its
// best chunk of the chunk ranking, else its module chunk.
func (e *Engine) pathArm(q, scope string, chunks []int, k int, keep func(int) bool) []int {
	return e.namesArm(q, scope, chunks, k, keep, false)
}

// namesArm is pathArm, over the file names of classNamed languages too
// when classes is set (Request.ClassNames).
func (e *Engine) namesArm(q, scope string, chunks []int, k int, keep func(int) bool, classes bool) []int {
	seg := e.Seg
	terms := nameTerms(title(q))
	if len(terms) == 0 {
		return nil
	}
	weight := make(map[string]float64, len(terms))
	for _, t := range terms {
		weight[t] = 1
	}
	for _, t := range tokenize.QueryTokens(scope) {
		weight[t] = 2
	}
	names := fileNamesOf(seg, classes)
	type fileHit struct {
		file  int
		terms []string
	}
	var hits []fileHit
	at := map[int]int{}       // file -> position in hits
	named := map[string]int{} // term -> files it names
	for _, t := range terms {
		fs := names.files[t]
		for _, a := range names.abbrs {
			if a.abbreviates(t) && !slices.Contains(fs, a.file) {
				fs = append(fs[:len(fs):len(fs)], a.file)
			}
		}
		named[t] = len(fs)
		for _, f := range fs {
			h, ok := at[f]
			if !ok {
				h = len(hits)
				at[f] = h
				hits = append(hits, fileHit{file: f})
			}
			if !slices.Contains(hits[h].terms, t) {
				hits[h].terms = append(hits[h].terms, t)
			}
		}
	}
	if len(hits) == 0 {
		return nil
	}
	n := float64(len(seg.Files))
	score := make([]float64, len(hits))
	for h, fh := range hits {
		for _, t := range fh.terms {
			score[h] += weight[t] * math.Log(1+n/float64(named[t]))
		}
		cover := math.Min(1, float64(len(fh.terms))/float64(names.parts[fh.file]))
		score[h] *= cover * cover
	}
	order := make([]int, len(hits))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		if score[order[a]] != score[order[b]] {
			return score[order[a]] > score[order[b]]
		}
		return seg.Files[hits[order[a]].file].Path < seg.Files[hits[order[b]].file].Path
	})
	best := bestChunks(seg, chunks)
	var ids []int
	for _, o := range order {
		if id, ok := fileChunk(seg.Files[hits[o].file], best); ok {
			ids = append(ids, id)
		}
		if len(ids) == k {
			break
		}
	}
	return filterIDs(ids, keep)
}

// pathWeight is the file-name list's share of the bm25 arm's fusion weight.
// A sweep over 0.3, 0.5, 0.8 and 1 on the dev tasks moved MRR by less than
// 0.01; half keeps a name match from outvoting the text.
const pathWeight = 0.5
