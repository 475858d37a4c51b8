// Package pack turns ranked retrieval candidates into the context text handed
// to a model, under a hard budget of o200k tokens.
//
// Every emitted token counts: the preamble, each chunk's header line, its
// body or stub, and the separators between chunks. Pack guarantees
// Count(r.Render()) <= Budget for whatever counter it is given: it plans
// with per-chunk counts plus one separator each, then counts the final
// render once and, should BPE merges across a separator make it larger
// than planned, drops the weakest chunk and renders again until it fits.
// Result.Tokens is that exact final count. With the default counter, a
// rendering is only counted as far as the remaining budget
// (tokens.CountAtMost), so huge bodies cost little.
//
// The steps:
//
//  1. Dedup. Candidates are taken strongest first (Score, then provenance
//     for a deterministic order). Within one file (same Repo, Commit, Path),
//     a candidate whose line range lies inside an already kept one is
//     folded into it (its signals are added); one that contains kept
//     chunks is merged with them: the container is emitted, with the best
//     score and the union of signals, and the strongest contained chunk
//     is kept as a fallback should the container not fit; one that
//     partially overlaps a stronger chunk is dropped. Result.Deduped counts
//     all of these.
//  2. Selection. Chunks are taken in score order (or breadth first with
//     Options.FileFirst: first the best chunk of every file, files by their
//     best score, then the rest in score order). Each chunk degrades until
//     it fits the remaining budget: its full body; for a merged container,
//     the full body of its strongest contained chunk; the stub (signature
//     and doc); the signature alone; else it is skipped (Result.Dropped).
//     Options.MaxPerFile caps the chunks of one file (the excess counts as
//     Dropped).
//  3. Layout. Chunks of one file form a group, in line order. Groups are
//     ranked by their best score and placed so the strongest evidence sits
//     at both ends of the context (models read the middle least): ranks
//     1, 3, 5, ... from the front, ranks 2, 4, 6, ... from the back, so the
//     order is 1, 3, 5, ..., 6, 4, 2.
package pack

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"codectx/pkg/tokens"
)

// Candidate is one retrieved chunk, with the fused score of the arms that
// found it.
type Candidate struct {
	Repo, Commit, Path   string
	StartLine, EndLine   int      // 1-based, inclusive
	Symbol               string   // qualified name, may be ""
	Kind                 string   // chunk kind (function, method, window, ...)
	Signature, Doc, Body string   // Body = full text; Signature+Doc used for the stub
	Score                float64  // fused score, higher = stronger
	Signals              []string // arms that found it, e.g. ["bm25","graph"]
	// Outline marks a Body that outlines its span (a class with its
	// members cut to signatures) rather than holding all of it: an outline
	// neither contains nor is contained by other chunks of its file, so a
	// method is never folded into its class outline.
	Outline bool
}

// Granularity is how much of a chunk was emitted.
type Granularity string

const (
	Full Granularity = "full" // header and full body
	Stub Granularity = "stub" // header, doc comment and signature (or signature alone)
)

// Packed is one emitted chunk. For a merged chunk, Candidate is the one
// emitted (container or fallback) with the merged Score and Signals.
type Packed struct {
	Candidate
	Granularity Granularity
	Text        string // exactly the text emitted for this chunk (header + body or stub)
	Tokens      int    // tokens of Text alone
}

// Result is a packed context. Chunks are in output order.
type Result struct {
	Chunks   []Packed
	Tokens   int    // exact count of Render() with the counter Pack was given
	Budget   int    // the budget asked for
	Dropped  int    // distinct chunks left out (budget or MaxPerFile)
	Deduped  int    // candidates folded into or dropped for an overlapping chunk
	Preamble string // the preamble as emitted: "" if it alone exceeded the budget
}

// Options tune Pack.
type Options struct {
	Budget     int              // hard cap in tokens for the whole rendered output; <= 0 packs nothing
	Count      func(string) int // token counter; default tokens.Count
	Preamble   string           // optional text emitted first (counted); left out if it alone exceeds Budget
	MaxPerFile int              // cap on chunks per file (0 = none)
	FileFirst  bool             // breadth first: each file's best chunk before any file's second
}

// Sep joins the preamble and the chunk texts in Render.
const Sep = "\n\n"

// Render returns the full context text: the preamble and each chunk's Text,
// joined by Sep.
func (r Result) Render() string {
	parts := make([]string, 0, len(r.Chunks)+1)
	if r.Preamble != "" {
		parts = append(parts, r.Preamble)
	}
	for _, c := range r.Chunks {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, Sep)
}

// Provenance returns "repo@commit:path#Lstart-Lend". The commit is cut to
// its first 12 characters; empty fields stay empty ("repo@:path#L1-1").
func Provenance(c Candidate) string {
	commit := c.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	return fmt.Sprintf("%s@%s:%s#L%d-%d", c.Repo, commit, c.Path, c.StartLine, c.EndLine)
}

// item is a deduplicated chunk: the candidate to emit and, for a merged
// container, the strongest candidate it swallowed.
type item struct {
	main    Candidate
	best    *Candidate // strongest original candidate, when it is not main
	score   float64
	signals []string
	file    int // index into the file order
	order   int // position in score order
}

// Pack selects, degrades and orders cands so that the rendered result fits
// opt.Budget. It never panics on odd input (empty or huge bodies, invalid
// line ranges, NaN scores).
func Pack(cands []Candidate, opt Options) Result {
	count, atMost := opt.Count, tokens.CountAtMost
	if count == nil {
		count = tokens.Count
	} else {
		atMost = func(s string, limit int) (int, bool) {
			n := count(s)
			return n, n <= limit
		}
	}
	items, nfiles, deduped := dedup(cands)
	res := Result{Budget: opt.Budget, Deduped: deduped}
	if opt.Budget <= 0 {
		res.Dropped = len(items)
		return res
	}

	left := opt.Budget
	sepCost := count(Sep)
	if opt.Preamble != "" {
		if n := count(opt.Preamble); n <= left {
			res.Preamble = opt.Preamble
			left -= n
		}
	}

	// Selection.
	type pick struct {
		it *item
		p  Packed
	}
	var picks []pick
	perFile := make([]int, nfiles)
	tryItem := func(it *item) {
		if opt.MaxPerFile > 0 && perFile[it.file] >= opt.MaxPerFile {
			res.Dropped++
			return
		}
		if left <= sepCost { // every chunk has at least one token
			res.Dropped++
			return
		}
		for _, p := range ladder(it) {
			if n, ok := atMost(p.Text, left-sepCost); ok {
				p.Tokens = n
				left -= n + sepCost
				perFile[it.file]++
				picks = append(picks, pick{it, p})
				return
			}
		}
		res.Dropped++
	}
	if opt.FileFirst {
		seen := make([]bool, nfiles)
		var rest []*item
		for _, it := range items {
			if seen[it.file] {
				rest = append(rest, it)
				continue
			}
			seen[it.file] = true
			tryItem(it)
		}
		for _, it := range rest {
			tryItem(it)
		}
	} else {
		for _, it := range items {
			tryItem(it)
		}
	}

	// Layout and the exact final check: drop the weakest pick (latest in
	// score order) until the render fits.
	slices.SortFunc(picks, func(a, b pick) int { return cmp.Compare(a.it.order, b.it.order) })
	for {
		chosen := make([]Packed, len(picks))
		files := make([]int, len(picks))
		for i, pk := range picks {
			chosen[i], files[i] = pk.p, pk.it.file
		}
		res.Chunks = layout(chosen, files)
		res.Tokens = count(res.Render())
		if res.Tokens <= opt.Budget || len(picks) == 0 {
			break
		}
		picks = picks[:len(picks)-1]
		res.Dropped++
	}
	if res.Tokens > opt.Budget { // only the preamble is left and the counter is not additive
		res.Preamble, res.Chunks, res.Tokens = "", nil, count("")
	}
	return res
}

// layout groups chunks by file in line order and orders the groups by
// their best score: ranks 1, 3, 5, ... from the front, 2, 4, ... from the
// back. chosen is in score order; files[i] is the file of chosen[i].
func layout(chosen []Packed, files []int) []Packed {
	var groups [][]Packed // in order of their best (first) chunk
	index := map[int]int{}
	for i, p := range chosen {
		g, ok := index[files[i]]
		if !ok {
			g = len(groups)
			index[files[i]] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], p)
	}
	out := make([]Packed, 0, len(chosen))
	emit := func(g []Packed) {
		slices.SortStableFunc(g, func(a, b Packed) int {
			return cmp.Or(cmp.Compare(a.StartLine, b.StartLine), cmp.Compare(a.EndLine, b.EndLine))
		})
		out = append(out, g...)
	}
	for r := 0; r < len(groups); r += 2 {
		emit(groups[r])
	}
	last := len(groups) - 1
	if last%2 == 0 {
		last--
	}
	for r := last; r > 0; r -= 2 {
		emit(groups[r])
	}
	return out
}

// ladder lists the renderings of it from richest to leanest.
func ladder(it *item) []Packed {
	cs := []Candidate{it.main}
	if it.best != nil {
		cs = append(cs, *it.best)
	}
	var out []Packed
	seen := map[string]bool{}
	add := func(c Candidate, g Granularity, text string) {
		if seen[text] {
			return
		}
		seen[text] = true
		c.Score, c.Signals = it.score, it.signals
		out = append(out, Packed{Candidate: c, Granularity: g, Text: text})
	}
	for _, c := range cs {
		add(c, Full, fullText(c, it.signals))
	}
	for _, c := range cs {
		add(c, Stub, stubText(c, it.signals, true))
	}
	for _, c := range cs {
		add(c, Stub, stubText(c, it.signals, false))
	}
	return out
}

// Header returns the header line of a chunk:
// "// repo@commit:path#L10-42 symbol (kind) [bm25,graph]", with ", stub"
// added inside the parentheses for a stub. Line breaks in fields become
// spaces, so the header is always one line.
func Header(c Candidate, signals []string, g Granularity) string {
	var b strings.Builder
	b.WriteString("// ")
	b.WriteString(Provenance(c))
	if c.Symbol != "" {
		b.WriteString(" " + c.Symbol)
	}
	var paren []string
	if c.Kind != "" {
		paren = append(paren, c.Kind)
	}
	if g == Stub {
		paren = append(paren, "stub")
	}
	if len(paren) > 0 {
		b.WriteString(" (" + strings.Join(paren, ", ") + ")")
	}
	if len(signals) > 0 {
		b.WriteString(" [" + strings.Join(signals, ",") + "]")
	}
	return oneLine(b.String())
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '\n', '\r', '\v', '\f', '\u0085', '\u2028', '\u2029':
			return ' '
		}
		return r
	}, s)
}

func fullText(c Candidate, signals []string) string {
	h := Header(c, signals, Full)
	body := strings.TrimRight(c.Body, " \t\r\n")
	if strings.TrimSpace(body) == "" {
		return h
	}
	return h + "\n" + body
}

// stubText renders the header, the doc as "// " comment lines (if withDoc)
// and the signature. With no signature, the first non-blank line of the
// body stands in for it.
func stubText(c Candidate, signals []string, withDoc bool) string {
	var b strings.Builder
	b.WriteString(Header(c, signals, Stub))
	if withDoc {
		if doc := strings.Trim(c.Doc, " \t\r\n"); doc != "" {
			for _, l := range strings.Split(doc, "\n") {
				l = strings.TrimRight(l, " \t\r")
				b.WriteString("\n//")
				if l != "" {
					b.WriteString(" " + l)
				}
			}
		}
	}
	sig := strings.Trim(c.Signature, " \t\r\n")
	if sig == "" {
		for _, l := range strings.Split(c.Body, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				sig = l
				break
			}
		}
	}
	if sig != "" {
		b.WriteString("\n" + sig)
	}
	return b.String()
}

// dedup sorts cands strongest first and folds overlapping chunks of one
// file (see the package comment). It returns the items in score order, the
// number of distinct files and how many candidates were folded or dropped.
func dedup(cands []Candidate) (items []*item, nfiles, deduped int) {
	sorted := make([]Candidate, len(cands))
	for i, c := range cands {
		if c.EndLine < c.StartLine {
			c.EndLine = c.StartLine
		}
		sorted[i] = c
	}
	slices.SortStableFunc(sorted, func(a, b Candidate) int {
		return cmp.Or(
			cmp.Compare(key(b.Score), key(a.Score)),
			cmp.Compare(a.Repo, b.Repo), cmp.Compare(a.Commit, b.Commit), cmp.Compare(a.Path, b.Path),
			cmp.Compare(a.StartLine, b.StartLine), cmp.Compare(a.EndLine, b.EndLine),
			cmp.Compare(a.Symbol, b.Symbol))
	})

	type fileKey struct{ repo, commit, path string }
	fileIdx := map[fileKey]int{}
	var byFile [][]*item // kept items of each file
	for i := range sorted {
		c := sorted[i]
		k := fileKey{c.Repo, c.Commit, c.Path}
		f, ok := fileIdx[k]
		if !ok {
			f = len(byFile)
			fileIdx[k] = f
			byFile = append(byFile, nil)
		}
		var over []*item
		var inside *item
		for _, it := range byFile[f] {
			if c.Outline || it.main.Outline {
				continue
			}
			if it.main.StartLine <= c.EndLine && c.StartLine <= it.main.EndLine {
				over = append(over, it)
				if inside == nil && it.main.StartLine <= c.StartLine && c.EndLine <= it.main.EndLine {
					inside = it
				}
			}
		}
		switch {
		case len(over) == 0:
			byFile[f] = append(byFile[f], &item{main: c, score: c.Score, signals: union(nil, c.Signals), file: f})
		case inside != nil:
			inside.signals = union(inside.signals, c.Signals)
			deduped++
		case containsAll(c, over):
			top := over[0] // strongest: items are created in score order
			for _, it := range over[1:] {
				if key(it.score) > key(top.score) {
					top = it
				}
			}
			best := top.main
			if top.best != nil {
				best = *top.best
			}
			merged := &item{main: c, best: &best, score: top.score, file: f}
			for _, it := range over {
				merged.signals = union(merged.signals, it.signals)
			}
			merged.signals = union(merged.signals, c.Signals)
			byFile[f] = slices.DeleteFunc(byFile[f], func(it *item) bool { return slices.Contains(over, it) })
			byFile[f] = append(byFile[f], merged)
			deduped += len(over)
		default:
			deduped++
		}
	}
	for _, its := range byFile {
		items = append(items, its...)
	}
	slices.SortStableFunc(items, func(a, b *item) int {
		return cmp.Or(cmp.Compare(key(b.score), key(a.score)),
			cmp.Compare(a.main.Repo, b.main.Repo), cmp.Compare(a.main.Commit, b.main.Commit),
			cmp.Compare(a.main.Path, b.main.Path), cmp.Compare(a.main.StartLine, b.main.StartLine))
	})
	// Number files by their best item, so FileFirst and layout see files
	// in score order.
	renum := make([]int, len(byFile))
	for i := range renum {
		renum[i] = -1
	}
	for i, it := range items {
		if renum[it.file] < 0 {
			renum[it.file] = nfiles
			nfiles++
		}
		it.file = renum[it.file]
		it.order = i
	}
	return items, nfiles, deduped
}

func containsAll(c Candidate, its []*item) bool {
	for _, it := range its {
		if it.main.StartLine < c.StartLine || it.main.EndLine > c.EndLine {
			return false
		}
	}
	return true
}

// union appends the signals of add missing from dst, keeping order.
func union(dst, add []string) []string {
	for _, s := range add {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}

// key orders scores with NaN lowest.
func key(f float64) float64 {
	if math.IsNaN(f) {
		return math.Inf(-1)
	}
	return f
}
