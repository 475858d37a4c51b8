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
//  2. Selection. Chunks are taken in score order, or breadth first with
//     Options.FileFirst: first the best chunk of every file, files by their
//     best score, then the rest in score order. The breadth pass can lead
//     with depth where the answer most likely is: the best chunks of the
//     first Options.Lead files, then more chunks of the first
//     Options.Deep files up to Options.DeepShare of the budget, and only
//     then the other files' best chunks, as stubs with Options.TailStubs
//     (a file's signature costs a few tokens, its body hundreds): a stub
//     is made whole after the rest is packed, if it then fits. Each chunk degrades until
//     it fits the remaining budget: its full body; for a merged container,
//     the full body of its strongest contained chunk; the stub (signature
//     and doc); the signature alone; else it is skipped (Result.Dropped).
//     Options.MaxPerFile caps the chunks of one file (the excess counts as
//     Dropped).
//  3. Layout. Chunks of one file form a group, in line order. Groups are
//     ranked by their best score and placed so the strongest evidence sits
//     at both ends of the context (models read the middle least): ranks
//     1, 3, 5, ... from the front, ranks 2, 4, 6, ... from the back, so the
//     order is 1, 3, 5, ..., 6, 4, 2; with Options.Ranked, in rank order.
package pack

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

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
	// Prep, when set, is NewPrep of this candidate, kept by the caller
	// across queries: the renderings are cut from it and counted through
	// it. nil: they are made afresh.
	Prep *Prep
}

// Prep is what the renderings of one candidate share from query to query:
// its body as emitted and the stubs' texts below the header line, each a
// tokens.Tail, which remembers what counting it below a header learns
// (the header alone changes with the query's signals). A query engine
// keeps one per chunk; it must only be given with the candidate it was
// made from.
type Prep struct {
	body     *tokens.Tail // the body as emitted: "" when blank
	doc, sig *tokens.Tail // a stub's text below its header: with the doc, signature alone
	// least is a lower bound of the count of every rendering cut from
	// the Prep (0: none known): tokens.PrefixCount of the header's part
	// that is the same for every query, when the header (but for its
	// signals) and the texts are ASCII.
	least int
}

// NewPrep returns the Prep of c (Body, Doc and Signature are read). grew,
// if not nil, is told the bytes the Prep takes beyond Size as its counts
// learn headers.
func NewPrep(c Candidate, grew func(n int64)) *Prep {
	body := strings.TrimRight(c.Body, " \t\r\n")
	if strings.TrimSpace(body) == "" {
		body = ""
	}
	p := &Prep{
		body: tokens.NewTail(body, grew),
		doc:  tokens.NewTail(string(appendStubRest(nil, c, true)), grew),
		sig:  tokens.NewTail(string(appendStubRest(nil, c, false)), grew),
	}
	// Every rendering is a header of c and then one of the texts; each
	// header starts with the same part (up to the symbol), which a
	// header of ASCII signals keeps as it is. (Pack reads an inverted
	// line range as its start line, as here.)
	c.EndLine = max(c.EndLine, c.StartLine)
	h, fixed := appendHeader(nil, c, nil, Stub)
	if fixed > 0 && asciiText(string(h)) && asciiText(p.body.Text()) && asciiText(p.doc.Text()) && asciiText(p.sig.Text()) {
		p.least, _ = tokens.PrefixCount(string(h[:fixed]))
	}
	return p
}

// asciiText reports whether s is ASCII without DEL (the text
// tokens.PrefixCount bounds).
func asciiText(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// plainSignals reports whether a header's signals keep it one ASCII line
// (appendHeader then leaves the rest of the header as it is).
func plainSignals(signals []string) bool {
	for _, s := range signals {
		if !asciiText(s) || !plainLine([]byte(s)) {
			return false
		}
	}
	return true
}

// outOfReach reports whether no rendering of it can fit limit tokens, by
// the bounds of its Preps alone: every rendering of the item (of main, or
// of its fallback) starts with a header part whose count exceeds limit.
// Only for o200k (Pack's default counter), whose counts the bounds are.
func (it *item) outOfReach(limit int) bool {
	m := it.main.Prep
	if m == nil || m.least <= limit {
		return false
	}
	if it.best != nil && (it.best.Prep == nil || it.best.Prep.least <= limit) {
		return false
	}
	return plainSignals(it.signals)
}

// Size is the heap bytes p holds when made, beyond the candidate's body:
// its structs and the stub texts (each allocation rounded up a little).
func (p *Prep) Size() int64 {
	return int64(unsafe.Sizeof(*p)+3*unsafe.Sizeof(tokens.Tail{})) + 64 + int64(len(p.doc.Text())+len(p.sig.Text()))
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
	// With FileFirst, the order of the breadth pass (see the package doc):
	// the best chunks of the first Lead files, whole; then more chunks of
	// the first Deep files, in score order, until they take DeepShare of
	// the budget; then the best chunk of every other file, as a stub when
	// TailStubs is set (made whole at the end if there is room).
	Lead      int
	Deep      int
	DeepShare float64
	TailStubs bool
	// Ranked lays the file groups out in rank order (1, 2, 3, ...) instead
	// of at both ends (1, 3, 5, ..., 6, 4, 2): for a reader that reads the
	// top of the context first, as the query engine's files[] list does.
	Ranked bool
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

// ShortCommit is a commit hash's first 12 digits; a working tree's
// pseudo-commit (worktree- and its content's hash) is kept whole: cut to
// 12 it kept 3 digits of the hash, which no longer named the snapshot.
func ShortCommit(c string) string {
	if len(c) > 12 && !strings.HasPrefix(c, "worktree-") {
		return c[:12]
	}
	return c
}

// Provenance returns "repo@commit:path#Lstart-Lend", the commit as
// ShortCommit writes it; empty fields stay empty ("repo@:path#L1-1").
func Provenance(c Candidate) string {
	commit := ShortCommit(c.Commit)
	b := make([]byte, 0, len(c.Repo)+len(commit)+len(c.Path)+16)
	b = append(b, c.Repo...)
	b = append(b, '@')
	b = append(b, commit...)
	b = append(b, ':')
	b = append(b, c.Path...)
	b = append(b, "#L"...)
	b = strconv.AppendInt(b, int64(c.StartLine), 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(c.EndLine), 10)
	return string(b)
}

// hdrBytesPerItem is the room for headers Pack sets aside per candidate.
const hdrBytesPerItem = 224

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
	res, _ := PackText(cands, opt)
	return res
}

// PackText is Pack that also returns the result's Render(), which Pack
// renders to count it anyway: a caller that emits the context need not
// join it again.
func PackText(cands []Candidate, opt Options) (Result, string) {
	count, atMost := opt.Count, tokens.CountJoinAtMost
	if count == nil {
		count = tokens.Count
	} else {
		atMost = func(a, b string, limit int) (int, bool) {
			n := count(a + b)
			return n, n <= limit
		}
	}
	items, slab, nfiles, deduped := dedup(cands)
	defer releaseSlab(slab)
	res := Result{Budget: opt.Budget, Deduped: deduped}
	if opt.Budget <= 0 {
		res.Dropped = len(items)
		return res, res.Render()
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
		it         *item
		p          Packed // but for its Text, which is head+body
		head, body string // may be bytes of hdr: copied into the render
	}
	var picks []pick
	perFile := make([]int, nfiles)
	// hdr holds the headers of renderings cut from Preps, appended and
	// never written again during the pack. A ranking's tried renderings
	// take 150-200 bytes of headers a candidate: sized once for them,
	// instead of growing by doubling (which allocated about twice the
	// final size), and taken from a pool.
	hp := getHdr(hdrBytesPerItem * len(items))
	hdr := *hp
	defer func() { // pooled as grown, if it grew
		*hp = hdr[:0]
		hdrPool.Put(hp)
	}()
	// render finds its first rendering from step from to stop that fits
	// in room tokens (separator included).
	render := func(it *item, from, stop, room int) (pick, bool) {
		l := ladder{it: it, hdr: hdr, step: from, stop: stop}
		defer func() { hdr = l.hdr }()
		for r, ok := l.next(); ok; r, ok = l.next() {
			var n int
			if r.tail != nil && opt.Count == nil {
				n, ok = r.tail.CountJoinAtMost(r.head, r.fixed, room-sepCost)
			} else {
				n, ok = atMost(r.head, r.body, room-sepCost)
			}
			if ok {
				// The text is head+body; it is written once, into the
				// rendered context, of which p.Text becomes a part.
				pk := pick{it: it, p: r.p, head: r.head, body: r.body}
				if r.text != "" {
					pk.head, pk.body = r.text, ""
				}
				pk.p.Tokens = n
				return pk, true
			}
		}
		return pick{}, false
	}
	// tryItem packs it in the first of its renderings from step from that
	// fits what is left (0: full body first; 2: a stub at most).
	tryItem := func(it *item, from int) {
		if opt.MaxPerFile > 0 && perFile[it.file] >= opt.MaxPerFile {
			res.Dropped++
			return
		}
		if left <= sepCost { // every chunk has at least one token
			res.Dropped++
			return
		}
		// Late in a long ranking most candidates cannot fit even as a
		// bare signature: their header alone is too long. Told by a
		// bound kept per chunk, before any rendering is made or counted
		// (the decision is the ladder's: all its renderings fail).
		if opt.Count == nil && it.outOfReach(left-sepCost) {
			res.Dropped++
			return
		}
		// The renderings are made one at a time: most candidates of a
		// long ranking fit as a stub or not at all.
		pk, ok := render(it, from, 0, left)
		if !ok {
			res.Dropped++
			return
		}
		left -= pk.p.Tokens + sepCost
		perFile[it.file]++
		picks = append(picks, pk)
	}
	// upgrade packs picks[k], a stub, whole instead if what is left with
	// the stub's tokens given back holds it.
	upgrade := func(k int) {
		room := left + picks[k].p.Tokens + sepCost
		if pk, ok := render(picks[k].it, 0, 2, room); ok {
			left = room - pk.p.Tokens - sepCost
			picks[k] = pk
		}
	}
	if opt.FileFirst {
		seen := make([]bool, nfiles)
		first := make([]bool, len(items))
		for i, it := range items {
			first[i] = !seen[it.file]
			seen[it.file] = true
		}
		done := make([]bool, len(items))
		try := func(i, from int) { done[i] = true; tryItem(items[i], from) }
		// The best chunk of each of the first Lead files.
		for i, it := range items {
			if first[i] && it.file < opt.Lead {
				try(i, 0)
			}
		}
		// More of the first Deep files, within DeepShare of the budget
		// (the last one tried may pass it).
		deepUsed, deepCap := 0, int(opt.DeepShare*float64(opt.Budget))
		for i, it := range items {
			if !first[i] && it.file < opt.Deep && deepUsed < deepCap {
				before := left
				try(i, 0)
				deepUsed += before - left
			}
		}
		// The best chunk of every other file; as a stub (a rendering
		// from the ladder's third step on), whose index is kept.
		from := 0
		if opt.TailStubs {
			from = 2
		}
		var stubs []int
		for i := range items {
			if first[i] && !done[i] {
				n := len(picks)
				try(i, from)
				if from > 0 && len(picks) > n {
					stubs = append(stubs, n)
				}
			}
		}
		// The rest in score order, then those stubs whole where they fit.
		for i := range items {
			if !done[i] {
				try(i, 0)
			}
		}
		for _, k := range stubs {
			upgrade(k)
		}
	} else {
		for _, it := range items {
			tryItem(it, 0)
		}
	}

	// Layout and the exact final check: drop the weakest pick (latest in
	// score order) until the render fits.
	slices.SortFunc(picks, func(a, b pick) int { return cmp.Compare(a.it.order, b.it.order) })
	var text string
	for {
		chosen := make([]Packed, len(picks))
		files := make([]int, len(picks))
		size := len(res.Preamble)
		for i, pk := range picks {
			chosen[i], files[i] = pk.p, pk.it.file
			size += len(Sep) + len(pk.head) + len(pk.body)
		}
		// Render() as one copy: the preamble and the chunks' texts
		// joined by Sep, each chunk's Text a part of it.
		order := layout(chosen, files, opt.Ranked)
		buf := make([]byte, 0, size)
		buf = append(buf, res.Preamble...)
		spans := make([][2]int, len(order))
		for k, i := range order {
			if k > 0 || res.Preamble != "" {
				buf = append(buf, Sep...)
			}
			spans[k][0] = len(buf)
			buf = append(buf, picks[i].head...)
			buf = append(buf, picks[i].body...)
			spans[k][1] = len(buf)
		}
		text = owned(buf)
		res.Chunks = make([]Packed, len(order))
		for k, i := range order {
			res.Chunks[k] = chosen[i]
			res.Chunks[k].Text = text[spans[k][0]:spans[k][1]]
		}
		res.Tokens = count(text)
		if res.Tokens <= opt.Budget || len(picks) == 0 {
			break
		}
		picks = picks[:len(picks)-1]
		res.Dropped++
	}
	if res.Tokens > opt.Budget { // only the preamble is left and the counter is not additive
		res.Preamble, res.Chunks, res.Tokens = "", nil, count("")
		text = ""
	}
	return res, text
}

// layout groups chunks by file in line order and orders the groups by
// their best score: ranks 1, 3, 5, ... from the front, 2, 4, ... from the
// back (ranked: in rank order), and returns the order as indices into
// chosen. chosen is in score order; files[i] is the file of chosen[i].
func layout(chosen []Packed, files []int, ranked bool) []int {
	var groups [][]int // indices into chosen, in order of their best (first) chunk
	index := map[int]int{}
	for i := range chosen {
		g, ok := index[files[i]]
		if !ok {
			g = len(groups)
			index[files[i]] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	out := make([]int, 0, len(chosen))
	emit := func(g []int) {
		slices.SortStableFunc(g, func(i, j int) int {
			a, b := &chosen[i], &chosen[j]
			return cmp.Or(cmp.Compare(a.StartLine, b.StartLine), cmp.Compare(a.EndLine, b.EndLine))
		})
		out = append(out, g...)
	}
	if ranked {
		for _, g := range groups {
			emit(g)
		}
		return out
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

// ladder yields the renderings of an item from richest to leanest: the
// full body of the emitted candidate and of its fallback, their stubs with
// doc, then their bare signatures, each distinct text once.
type ladder struct {
	it        *item
	step      int
	seen      [6]rendering // the texts yielded so far
	nseen     int
	hdr       []byte    // where headers of Prep renderings are appended (see cut)
	stop      int       // the steps tried end before this one; 0: all (6)
	stub      [2]string // the stub header of main and best, once made
	stubFixed [2]int
}

// rendering is one way to emit a candidate: p with the text head+body,
// joined only when it is picked (most full bodies of a long ranking do
// not fit, and their counts need no copy).
type rendering struct {
	p          Packed
	head, body string
	text       string       // head+body when they are one string already (a stub), else ""
	tail       *tokens.Tail // of body, when cut from a Prep
	fixed      int          // of head: the part that is the same for every query (see appendHeader)
}

// same reports whether r and o emit the same text.
func (r rendering) same(o rendering) bool {
	if len(r.head)+len(r.body) != len(o.head)+len(o.body) {
		return false
	}
	if len(r.head) > len(o.head) {
		r, o = o, r
	}
	// r.head is the shorter: o.head = r.head + x, r.body = x + o.body.
	x := o.head[len(r.head):]
	return o.head[:len(r.head)] == r.head && r.body[:len(x)] == x && r.body[len(x):] == o.body
}

func (l *ladder) next() (rendering, bool) {
	it := l.it
	stop := l.stop
	if stop == 0 {
		stop = 6
	}
	for ; l.step < stop; l.step++ {
		c := it.main
		if l.step%2 == 1 {
			if it.best == nil {
				continue
			}
			c = *it.best
		}
		var r rendering
		switch l.step / 2 {
		case 0:
			if c.Prep != nil {
				r.p = Packed{Candidate: c, Granularity: Full}
				r.tail = c.Prep.body
				if r.body = r.tail.Text(); r.body == "" {
					r.head, r.fixed = l.header(c, Full, "")
				} else {
					r.head, r.fixed = l.header(c, Full, "\n")
				}
				break
			}
			r.p = Packed{Candidate: c, Granularity: Full}
			r.head, r.body = fullText(c, it.signals)
		case 1, 2:
			r.p = Packed{Candidate: c, Granularity: Stub}
			withDoc := l.step/2 == 1
			if c.Prep == nil {
				r.text, r.head, r.body = stubText(c, it.signals, withDoc)
				break
			}
			if r.tail = c.Prep.sig; withDoc {
				r.tail = c.Prep.doc
			}
			if r.head, r.fixed = l.stub[l.step%2], l.stubFixed[l.step%2]; r.head == "" {
				r.head, r.fixed = l.header(c, Stub, "")
				l.stub[l.step%2], l.stubFixed[l.step%2] = r.head, r.fixed
			}
			r.body = r.tail.Text()
		}
		if slices.ContainsFunc(l.seen[:l.nseen], r.same) {
			continue
		}
		l.seen[l.nseen] = rendering{head: r.head, body: r.body}
		l.nseen++
		l.step++
		r.p.Score, r.p.Signals = it.score, it.signals
		return r, true
	}
	return rendering{}, false
}

// header appends c's header line of granularity g and then end to l.hdr
// and returns them as a string of l.hdr's bytes, with the length of the
// part that is the same for every query (see appendHeader): l.hdr is only appended
// to, so bytes once returned are never written again (when it grows, the
// strings keep the old array).
func (l *ladder) header(c Candidate, g Granularity, end string) (string, int) {
	start := len(l.hdr)
	var fixed int
	l.hdr, fixed = appendHeader(l.hdr, c, l.it.signals, g)
	l.hdr = append(l.hdr, end...)
	return unsafe.String(&l.hdr[start], len(l.hdr)-start), fixed
}

// Header returns the header line of a chunk:
// "// repo@commit:path#L10-42 symbol (kind) [bm25,graph]", with ", stub"
// added inside the parentheses for a stub. Line breaks in fields become
// spaces, so the header is always one line.
func Header(c Candidate, signals []string, g Granularity) string {
	b, _ := appendHeader(nil, c, signals, g)
	return string(b)
}

// appendHeader appends Header(c, signals, g) to b. fixed is the length of
// the header's part that is the same for any signals and granularity
// (up to the symbol), or 0 if it cannot be told (a header made one line).
func appendHeader(b []byte, c Candidate, signals []string, g Granularity) (_ []byte, fixed int) {
	start := len(b)
	commit := c.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	b = append(b, "// "...)
	b = append(b, c.Repo...)
	b = append(b, '@')
	b = append(b, commit...)
	b = append(b, ':')
	b = append(b, c.Path...)
	b = append(b, "#L"...)
	b = strconv.AppendInt(b, int64(c.StartLine), 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(c.EndLine), 10)
	if c.Symbol != "" {
		b = append(b, ' ')
		b = append(b, c.Symbol...)
	}
	fixed = len(b) - start
	switch {
	case c.Kind != "" && g == Stub:
		b = append(b, " ("...)
		b = append(b, c.Kind...)
		b = append(b, ", stub)"...)
	case c.Kind != "":
		b = append(b, " ("...)
		b = append(b, c.Kind...)
		b = append(b, ')')
	case g == Stub:
		b = append(b, " (stub)"...)
	}
	for i, sg := range signals {
		if i == 0 {
			b = append(b, " ["...)
		} else {
			b = append(b, ',')
		}
		b = append(b, sg...)
	}
	if len(signals) > 0 {
		b = append(b, ']')
	}
	if !plainLine(b[start:]) {
		h := string(b[start:])
		b = append(b[:start], OneLine(h)...)
		fixed = 0
	}
	return b, fixed
}

// plainLine reports whether b holds no line break (nor any non-ASCII
// byte, which could start one): OneLine leaves such text as it is.
func plainLine(b []byte) bool {
	for _, c := range b {
		if c == '\n' || c == '\r' || c == '\v' || c == '\f' || c >= 0x80 {
			return false
		}
	}
	return true
}

// OneLine returns s with every line break (\n, \r, \v, \f, U+0085,
// U+2028, U+2029) made a space and bytes that are not UTF-8 made U+FFFD:
// text of a repository put on a header or comment line of the context
// stays on it.
func OneLine(s string) string {
	// Every line break below is one of these bytes or starts with one.
	if plainLine([]byte(s)) { // no copy: the conversion does not escape
		return s
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '\n', '\r', '\v', '\f', '\u0085', '\u2028', '\u2029':
			return ' '
		}
		return r
	}, s)
}

// fullText returns the full rendering of c as its header line (with the
// line break) and its body: the text is head+body.
func fullText(c Candidate, signals []string) (head, body string) {
	body = strings.TrimRight(c.Body, " \t\r\n")
	if strings.TrimSpace(body) == "" {
		return Header(c, signals, Full), ""
	}
	b := make([]byte, 0, 128)
	b, _ = appendHeader(b, c, signals, Full)
	b = append(b, '\n')
	return owned(b), body
}

// owned returns b's bytes as a string without copying them: b must not be
// written to afterwards (strings.Builder does the same).
func owned(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// stubText renders the header, the doc as "// " comment lines (if withDoc)
// and the signature. With no signature, the first non-blank line of the
// body stands in for it. It returns the text and, as parts of it, the
// header line and the rest: the rest is the same for every query, the
// header not (its signals), and the counter joins them.
func stubText(c Candidate, signals []string, withDoc bool) (text, head, rest string) {
	b := make([]byte, 0, 128+len(c.Signature)+len(c.Doc))
	b, _ = appendHeader(b, c, signals, Stub)
	n := len(b)
	b = appendStubRest(b, c, withDoc)
	text = owned(b)
	return text, text[:n], text[n:]
}

// appendStubRest appends a stub's text below its header line: the doc as
// "// " comment lines (if withDoc) and the signature, or the first
// non-blank line of the body when there is no signature.
func appendStubRest(b []byte, c Candidate, withDoc bool) []byte {
	if withDoc {
		if doc := strings.Trim(c.Doc, " \t\r\n"); doc != "" {
			for rest, more := doc, true; more; {
				var l string
				l, rest, more = strings.Cut(rest, "\n")
				l = strings.TrimRight(l, " \t\r")
				b = append(b, "\n//"...)
				if l != "" {
					b = append(b, ' ')
					b = append(b, l...)
				}
			}
		}
	}
	sig := strings.Trim(c.Signature, " \t\r\n")
	if sig == "" {
		for rest, more := c.Body, true; more && sig == ""; {
			var l string
			l, rest, more = strings.Cut(rest, "\n")
			sig = strings.TrimSpace(l)
		}
	}
	if sig != "" {
		b = append(b, '\n')
		b = append(b, sig...)
	}
	return b
}

// hdrPool keeps Pack's header buffers between packs. Nothing a pack
// returns or leaves behind points into its buffer: a picked rendering's
// text is a copy, a Tail keeps copies of what it learns of a header, and
// the token caches copy their keys (TestCachesCopyKeys in pkg/tokens), so
// a buffer is written again only by a later pack.
var hdrPool sync.Pool

// getHdr returns a pooled empty buffer of at least n bytes' capacity (one
// too small is left to the collector, so the pool keeps large ones).
func getHdr(n int) *[]byte {
	if b, _ := hdrPool.Get().(*[]byte); b != nil && cap(*b) >= n {
		*b = (*b)[:0]
		return b
	}
	b := make([]byte, 0, n)
	return &b
}

// slabPool keeps dedup's item slabs between packs.
var slabPool sync.Pool

// releaseSlab clears slab (it holds candidates' strings) and pools it.
func releaseSlab(slab *[]item) {
	clear(*slab)
	*slab = (*slab)[:0]
	slabPool.Put(slab)
}

// dedup sorts cands strongest first and folds overlapping chunks of one
// file (see the package comment). It returns the items in score order, the
// number of distinct files and how many candidates were folded or dropped.
//
// The items live in slab, taken from a pool: nothing Pack returns points
// into it (a Packed copies an item's fields; its signals and best
// candidate are allocated apart), so Pack hands it back when it returns.
func dedup(cands []Candidate) (items []*item, slab *[]item, nfiles, deduped int) {
	// Sorted by index (moves less than candidates); an inverted line
	// range is read as its start line.
	end := func(c *Candidate) int { return max(c.EndLine, c.StartLine) }
	sorted := make([]int32, len(cands))
	for i := range sorted {
		sorted[i] = int32(i)
	}
	// Compared field by field, stopping at the first difference (cmp.Or
	// would compare every field first).
	slices.SortStableFunc(sorted, func(i, j int32) int {
		a, b := &cands[i], &cands[j]
		if c := cmp.Compare(key(b.Score), key(a.Score)); c != 0 {
			return c
		}
		if c := strings.Compare(a.Repo, b.Repo); c != 0 {
			return c
		}
		if c := strings.Compare(a.Commit, b.Commit); c != 0 {
			return c
		}
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		if c := cmp.Compare(a.StartLine, b.StartLine); c != 0 {
			return c
		}
		if c := cmp.Compare(end(a), end(b)); c != 0 {
			return c
		}
		return strings.Compare(a.Symbol, b.Symbol)
	})
	// Every candidate makes at most one item (kept or merged): one slab.
	slab, _ = slabPool.Get().(*[]item)
	if slab == nil || cap(*slab) < len(cands) {
		slab = &[]item{}
		*slab = make([]item, 0, len(cands))
	}
	newItem := func(it item) *item {
		*slab = append(*slab, it) // never past its capacity
		return &(*slab)[len(*slab)-1]
	}

	type fileKey struct{ repo, commit, path string }
	fileIdx := map[fileKey]int{}
	var byFile [][]*item // kept items of each file
	for _, ci := range sorted {
		c := cands[ci]
		c.EndLine = end(&c)
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
			byFile[f] = append(byFile[f], newItem(item{main: c, score: c.Score, signals: union(nil, c.Signals), file: f}))
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
			merged := newItem(item{main: c, best: &best, score: top.score, file: f})
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
		if c := cmp.Compare(key(b.score), key(a.score)); c != 0 {
			return c
		}
		if c := strings.Compare(a.main.Repo, b.main.Repo); c != 0 {
			return c
		}
		if c := strings.Compare(a.main.Commit, b.main.Commit); c != 0 {
			return c
		}
		if c := strings.Compare(a.main.Path, b.main.Path); c != 0 {
			return c
		}
		return cmp.Compare(a.main.StartLine, b.main.StartLine)
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
	return items, slab, nfiles, deduped
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
