package classify

import (
	"sort"
	"strings"
)

// class is what a cue is evidence for.
type class int

const (
	temporal class = iota
	implicit
	explicit
	nClasses
)

// cue is a phrase pattern with the weight of the evidence it gives.
//
// Pattern syntax, word by word: "a|b" matches either word; a trailing "?"
// makes the element optional; {X} is a slot (the Target, or for explicit
// cues the symbol); <num> <ver> <year> <month> <date> <sha> match a token of
// that kind. Literals never match a backticked or identifier-shaped token,
// so `history` or commit_log are not cues.
type cue struct {
	pat    string
	class  class
	weight float64
}

const (
	strong = 1.0
	medium = 0.6
	weak   = 0.3
)

var cueTable = []cue{
	// --- temporal: change over time -----------------------------------
	{"what changed", temporal, strong},
	{"what changed in|on|to|for {X}", temporal, strong},
	{"what has|have changed", temporal, strong},
	{"what has|have changed in|on|to {X}", temporal, strong},
	{"what was|were changed|modified|added|removed|merged|reverted", temporal, strong},
	{"what got changed|merged|added|removed|reverted", temporal, strong},
	{"changed in|since|between|recently|lately|over", temporal, strong},
	{"changed in {X}", temporal, strong},
	{"ever changed|modified|touched", temporal, strong},
	{"when did {X}", temporal, strong},
	{"when was|were {X}", temporal, 0.8},
	{"since when", temporal, strong},
	{"who changed|modified|wrote|added|introduced|authored|removed|touched|broke|committed|edited|reverted {X}", temporal, strong},
	{"who last changed|modified|touched|edited {X}", temporal, strong},
	{"last touched|modified|changed|edited", temporal, strong},
	{"why was|were {X} reverted|removed|changed|added|introduced|rewritten|deleted|renamed|deprecated|dropped|disabled|moved|modified", temporal, strong},
	{"why did {X} change|break", temporal, strong},
	{"git blame|log|history|bisect|diff", temporal, strong},
	{"git blame|log|history for|of|on? {X}", temporal, strong},
	{"blame|bisect", temporal, medium},
	{"blame for|of|on? {X}", temporal, medium},
	{"commit|change|revision|version|edit history", temporal, strong},
	{"commit|change|revision|version|edit history of|for {X}", temporal, strong},
	{"history of|for {X}", temporal, strong},
	{"history of changes to|in {X}", temporal, strong},
	{"history", temporal, weak},
	{"changes to|in {X}", temporal, medium},
	{"recent|latest changes|commits|releases|regressions|history|merges|prs|edits|modifications", temporal, strong},
	{"recent|latest changes to|in {X}", temporal, strong},
	{"recent|recently|lately|latest", temporal, medium},
	{"recently changed|modified|added|removed|touched|updated|merged {X}", temporal, strong},
	{"last|past|previous week|month|year|sprint|quarter|release|releases|version|versions|commit|commits|tag|tags|refactor|deploy|deployment|merge|few|couple|night|upgrade", temporal, strong},
	{"last|past <num> days|weeks|months|years|hours|commits|releases|versions|tags", temporal, strong},
	{"this|last week|month|sprint|quarter", temporal, 0.8},
	{"yesterday|ago|changelog|changelogs", temporal, strong},
	{"release notes", temporal, strong},
	{"over time", temporal, strong},
	{"evolution of {X}", temporal, medium},
	{"evolved|churn", temporal, medium},
	{"regression|regressions|regressed", temporal, medium},
	{"regression in|with|from {X}", temporal, medium},
	{"reverted|reverting", temporal, strong},
	{"revert|reverts|rollback|rolled", temporal, medium},
	{"introduced in|by|with", temporal, strong},
	{"was|were|got|been introduced|reverted|regressed", temporal, strong},
	{"first introduced|added|appeared|broke", temporal, strong},
	{"introduced", temporal, medium},
	{"since version|release|v|commit|tag", temporal, strong},
	{"since <ver>", temporal, strong},
	{"since <year>", temporal, strong},
	{"since <month>", temporal, strong},
	{"between <ver> and <ver>", temporal, strong},
	{"between versions|releases|commits|tags", temporal, strong},
	{"in|before|after|during <year>", temporal, medium},
	{"<month> <year>", temporal, strong},
	{"<date>", temporal, strong},
	{"<sha>", temporal, medium},
	{"after upgrading|updating|bumping|upgrade", temporal, strong},
	{"after the upgrade|update|bump|migration|refactor", temporal, strong},
	{"used to work|succeed|pass", temporal, strong},
	{"this|it used to", temporal, strong},
	{"which|what commit|commits|release|pr", temporal, strong},
	{"the commit that|which", temporal, strong},
	{"commits touching|affecting|to|in|on {X}", temporal, strong},
	{"commits that|which touched|touch|modified|changed|affect|affected {X}", temporal, strong},
	{"commits by|from", temporal, strong},
	{"commits", temporal, medium},
	{"commit", temporal, weak},
	{"old|previous|original|earlier|prior behaviour|behavior|implementation", temporal, 0.8},
	// A session's own past: "the function we looked at before" (the API
	// answers it from the session's earlier packs).
	{"we|i|you looked|saw|viewed|read|opened|discussed|found|checked|showed at? before|earlier|previously|already", temporal, strong},
	{"looked at before|earlier|previously", temporal, strong},
	{"no longer", temporal, weak},
	{"stopped|started working|failing|crashing|breaking", temporal, weak},
	{"upgrade|upgrading|merged|landed|changed", temporal, weak},

	// --- implicit: relationships and surrounding context ----------------
	{"depends|depend|depending|relies|rely|relying on {X}", implicit, strong},
	{"dependents|dependants|callers|callees", implicit, strong},
	{"dependents|dependants|callers|caller|callees|callee of {X}", implicit, strong},
	{"dependencies|dependency of|between|around|for {X}", implicit, strong},
	{"reverse dependencies", implicit, strong},
	{"dependency|import|call graph|tree|chain|cycle|cycles|hierarchy", implicit, strong},
	{"dependency|import|call graph|tree|chain|hierarchy of|for|around {X}", implicit, strong},
	{"call sites|site", implicit, strong},
	{"call sites|site of|for {X}", implicit, strong},
	{"callsites of|for? {X}", implicit, strong},
	{"who|what|which calls|call|uses|use|references|imports|import|invokes|implements|extends|overrides|subclasses|consumes|reads|writes {X}", implicit, strong},
	{"what|which|who else? still? calls|uses|references|imports|depends {X}", implicit, strong},
	{"what|which functions|methods|modules|files|packages|classes|code|handlers|services|components|tests|types|structs|places|callers call|calls|use|uses|import|imports|reference|references|depend|touch|read|write|consume|implement|invoke {X}", implicit, strong},
	{"what|which functions|methods|modules|files|packages|classes|code|handlers|services|components|tests|types|places are|is affected|impacted|broken", implicit, strong},
	{"everything|anything|something|code|functions|methods|places|files|modules|classes|packages that|which call|calls|use|uses|import|imports|reference|references|depend|depends|invoke|invokes|touch|touches {X}", implicit, strong},
	{"everything|anything|something still? calls|call|uses|use|imports|import|references|reference|depends {X}", implicit, strong},
	{"that|which calls|invokes {X}", implicit, weak},
	{"calls to {X}", implicit, weak},
	{"all|every calls|call|caller|callers|uses|use|usages|references|import|imports to|of {X}", implicit, strong},
	{"uses|usages|consumers|references|refs|referrers|importers|implementers|implementors|implementations|subclasses|subtypes|invocations|neighbours|neighbors of {X}", implicit, strong},
	{"usage|use of {X}", implicit, weak},
	{"references to {X}", implicit, strong},
	{"imports of|from {X}", implicit, strong},
	{"referenced|imported|used|called|consumed|required|included|invoked|wrapped by {X}", implicit, strong},
	{"where|where's is|are {X} used|referenced|called|imported|consumed|invoked|read|written", implicit, strong},
	{"where|what|who|which else", implicit, strong},
	{"what|which other files|modules|places|packages|code|functions|components|parts|services|tests|callers|classes", implicit, strong},
	{"if|when i|we|you change|modify|rename|remove|delete|touch|update|refactor|move|bump|replace|edit|drop {X}", implicit, strong},
	{"if|when {X} changes", implicit, medium},
	{"impact|effect|effects|consequences of changing|modifying|renaming|removing|deleting|bumping|upgrading|touching|dropping {X}", implicit, strong},
	{"impact of|on {X}", implicit, 0.8},
	{"impact|impacted|knock-on|downstream|upstream|coupling", implicit, medium},
	{"impacted|affected by {X}", implicit, strong},
	{"downstream|upstream of|from {X}", implicit, strong},
	{"affect|affects", implicit, weak},
	{"blast radius", implicit, strong},
	{"blast radius of {X}", implicit, strong},
	{"ripple effect|effects", implicit, strong},
	{"what would|will|could|might break", implicit, strong},
	{"would|will break", implicit, medium},
	{"need|needs to be updated|changed|touched", implicit, medium},
	{"need|needs updating|changing", implicit, medium},
	{"related to|with {X}", implicit, strong},
	{"relating|connected|linked|coupled|tied|wired|hooked|attached to {X}", implicit, strong},
	{"coupled|interacts|interacting|integrates|integrated with {X}", implicit, strong},
	{"wired|hooked into|up {X}", implicit, medium},
	{"related", implicit, weak},
	{"imports", implicit, medium},
	{"inherit|inherits from {X}", implicit, medium},
	{"which|what tests cover|exercise|hit {X}", implicit, strong},
	{"tests that|which cover|exercise {X}", implicit, strong},
	{"what|which does|do {X} call|import|use|depend|need|require|touch|affect", implicit, strong},
	{"what|which functions|methods|modules|packages|files does|do {X} call|import|use|depend|touch", implicit, strong},
	{"code graph", implicit, medium},
	{"data flow|flows", implicit, medium},
	{"surrounding code|context", implicit, strong},
	{"context around {X}", implicit, medium},

	// --- explicit: the query names a definition ------------------------
	{"where|where's is|are {X} defined|declared|implemented|located|initialized|initialised|created|set|configured|registered|instantiated", explicit, strong},
	{"definition|declaration|signature|implementation|source|docstring|body of {X}", explicit, strong},
	{"return type of {X}", explicit, strong},
	{"the {X} function|method|class|struct|interface|trait|enum|type|constant|const|variable|field|attribute|property|decorator|macro|fixture|constructor|callback|hook|module|package|crate", explicit, strong},
	{"func|def|fn {X}", explicit, strong},
	{"what does {X} do|return|mean|contain|represent|return", explicit, strong},
}

// elem kinds
const (
	eLit = iota
	eSlot
	eNum
	eVer
	eYear
	eMonth
	eDate
	eSha
)

type elem struct {
	kind  int
	words map[string]bool
}

type pattern struct {
	cue   *cue
	elems []elem
	lits  int // literal elements: more means more specific
}

type cueIndex struct {
	byWord map[string][]*pattern
	wild   []*pattern
}

var index = compile(cueTable)

func compile(table []cue) *cueIndex {
	ix := &cueIndex{byWord: make(map[string][]*pattern)}
	for i := range table {
		c := &table[i]
		for _, els := range expand(strings.Fields(c.pat)) {
			p := &pattern{cue: c, elems: els}
			for _, e := range els {
				if e.kind != eSlot {
					p.lits++
				}
			}
			if els[0].kind == eLit {
				for w := range els[0].words {
					ix.byWord[w] = append(ix.byWord[w], p)
				}
			} else {
				ix.wild = append(ix.wild, p)
			}
		}
	}
	return ix
}

// expand turns optional elements into one element list per combination.
func expand(words []string) [][]elem {
	out := [][]elem{nil}
	for _, w := range words {
		opt := strings.HasSuffix(w, "?")
		e := parseElem(strings.TrimSuffix(w, "?"))
		var next [][]elem
		for _, prefix := range out {
			with := append(append([]elem(nil), prefix...), e)
			next = append(next, with)
			if opt {
				next = append(next, prefix)
			}
		}
		out = next
	}
	return out
}

func parseElem(w string) elem {
	switch w {
	case "{X}":
		return elem{kind: eSlot}
	case "<num>":
		return elem{kind: eNum}
	case "<ver>":
		return elem{kind: eVer}
	case "<year>":
		return elem{kind: eYear}
	case "<month>":
		return elem{kind: eMonth}
	case "<date>":
		return elem{kind: eDate}
	case "<sha>":
		return elem{kind: eSha}
	}
	return elem{kind: eLit, words: set(strings.ReplaceAll(w, "|", " "))}
}

// match is one cue found in the query.
type match struct {
	cue          *cue
	lits         int
	start        int
	cover        []int // token positions of the non-slot elements
	slot0, slot1 int   // slot span [slot0, slot1); slot0 < 0 when none
	closed       bool  // the slot is followed by a literal (it has a known end)
	body         bool
}

const maxSlot = 5

func (p *pattern) matchAt(toks []token, i int) (match, bool) {
	m := match{cue: p.cue, lits: p.lits, start: i, slot0: -1, body: toks[i].body}
	if p.step(toks, 0, i, &m) {
		return m, true
	}
	return match{}, false
}

// step matches elems[k:] at toks[j:].
func (p *pattern) step(toks []token, k, j int, m *match) bool {
	if k == len(p.elems) {
		return true
	}
	e := p.elems[k]
	last := k == len(p.elems)-1
	if e.kind == eSlot {
		if last {
			end := j
			for end < len(toks) && end-j < maxSlot+1 {
				end++
				if toks[end-1].stop {
					break
				}
			}
			m.slot0, m.slot1 = j, end
			return true
		}
		for n := 1; n <= maxSlot && j+n <= len(toks); n++ {
			cover := len(m.cover)
			if p.step(toks, k+1, j+n, m) {
				m.slot0, m.slot1, m.closed = j, j+n, true
				return true
			}
			m.cover = m.cover[:cover]
			if toks[j+n-1].stop {
				break
			}
		}
		return false
	}
	if j >= len(toks) || !e.accepts(&toks[j]) {
		return false
	}
	// A clause boundary may only follow the final element or a final slot.
	if toks[j].stop && !last && !(k == len(p.elems)-2 && p.elems[k+1].kind == eSlot) {
		return false
	}
	m.cover = append(m.cover, j)
	return p.step(toks, k+1, j+1, m)
}

func (e elem) accepts(t *token) bool {
	switch e.kind {
	case eLit:
		return !t.quote && !t.shape && e.words[t.low]
	case eNum:
		return (t.num && !t.ver) || numberWords[t.low]
	case eVer:
		return t.ver
	case eYear:
		return t.year
	case eMonth:
		return months[t.low]
	case eDate:
		return t.date
	case eSha:
		return t.sha
	}
	return false
}

// findCues returns every cue match in the query, in no particular order.
func findCues(toks []token) []match {
	var out []match
	for i := range toks {
		t := &toks[i]
		if !t.quote && !t.shape {
			for _, p := range index.byWord[t.low] {
				if m, ok := p.matchAt(toks, i); ok {
					out = append(out, m)
				}
			}
		}
		for _, p := range index.wild {
			if m, ok := p.matchAt(toks, i); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// score sums the weights of the non-overlapping matches of each class,
// strongest first; a cue in the body of a multi-line query counts half.
// used[j][c] reports whether token j is part of an accepted cue of class c.
func score(ms []match, ntoks int) (total [nClasses]float64, used [][nClasses]bool) {
	sort.SliceStable(ms, func(a, b int) bool {
		x, y := ms[a], ms[b]
		if x.cue.weight != y.cue.weight {
			return x.cue.weight > y.cue.weight
		}
		if x.lits != y.lits {
			return x.lits > y.lits
		}
		return x.start < y.start
	})
	used = make([][nClasses]bool, ntoks)
	for _, m := range ms {
		c := m.cue.class
		free := true
		for _, j := range m.cover {
			if used[j][c] {
				free = false
				break
			}
		}
		if !free {
			continue
		}
		for _, j := range m.cover {
			used[j][c] = true
		}
		w := m.cue.weight
		if m.body {
			w /= 2
		}
		total[c] += w
	}
	return total, used
}
