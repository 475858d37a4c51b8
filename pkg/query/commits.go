package query

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"codectx/pkg/classify"
	"codectx/pkg/pack"
	"codectx/pkg/segment"
	"codectx/pkg/tokenize"
)

// Commit is a commit of the indexed history listed in the answer to a
// history question ("what changed recently in the packer", "when was
// retry added"): the files of the answer say where, the commits say what
// happened to them. Author is the author's name (the e-mail address is
// left out); Files are the commit's files among the answer's, in rank
// order (at most maxCommitFiles), and Others counts the rest it touched.
type Commit struct {
	Repo    string   `json:"repo,omitempty"` // set in answers over several repositories
	Hash    string   `json:"hash"`
	When    string   `json:"when"` // RFC 3339
	Author  string   `json:"author"`
	Subject string   `json:"subject"`
	Files   []string `json:"files"`
	Others  int      `json:"others,omitempty"`

	score float64 // weight of its files in the answer, times boost
	boost float64 // what recency and the message's words add
	total int     // files it touched
	age   int     // position in its repository's history, newest first
}

const (
	maxCommits     = 8  // commits listed in an answer
	maxCommitFiles = 5  // files listed per commit
	commitTop      = 10 // the answer's top files a listed commit is weighed against
	maxSubject     = 120
	maxAuthor      = 64
	// commitShare is the most of the budget the commits' preamble may
	// take: the rest is the code's.
	commitShare = 10
)

// commits picks the commits to list for a history question: those that
// touched the answer's top files (a file's weight falls with its rank, and
// a commit's is shared among the files it touched), weighing more when
// recent and when their message holds the query's words (the words that
// ask about history, "changed", "recently", ..., left out); best first,
// and none below a quarter of the best. files is the final file ranking
// (already restricted to the request's languages and paths). Only
// TEMPORAL_HISTORY queries list commits, and only when the history arm
// ran.
func (e *Engine) commits(q string, cls classify.Result, files []File) []Commit {
	seg := e.Seg
	if cls.Trigger != classify.TemporalHistory || len(seg.History) == 0 || len(files) == 0 {
		return nil
	}
	rank := make(map[string]int, commitTop)
	for i, f := range files[:min(commitTop, len(files))] {
		rank[f.Path] = i + 1
	}
	var terms []string
	for _, t := range tokenize.QueryTokens(q) {
		if !historyWords[t] {
			terms = append(terms, t)
		}
	}
	msgs := historyTokens(seg)
	var out []Commit
	for i, c := range seg.History {
		if len(c.Files) > 50 {
			continue // a sweeping change says little about any one file
		}
		rel := 0.0
		var hit []string
		for _, p := range c.Files {
			if r, ok := rank[p]; ok {
				rel += 1 / float64(r)
				hit = append(hit, p)
			}
		}
		if rel == 0 {
			continue // none of its files is in the answer: nothing to point at
		}
		rel /= math.Sqrt(float64(len(c.Files)))
		overlap := 0
		for _, t := range terms {
			if slices.Contains(msgs[i], t) {
				overlap++
			}
		}
		slices.SortFunc(hit, func(a, b string) int { return cmp.Compare(rank[a], rank[b]) })
		n := min(len(hit), maxCommitFiles)
		boost := (1 + 0.5*float64(overlap)) / (1 + float64(i)/20)
		out = append(out, Commit{
			Hash: c.Hash, When: c.When, Author: authorName(c.Author), Subject: subject(c.Message),
			Files: hit[:n:n], Others: len(c.Files) - n,
			score: rel * boost, boost: boost, total: len(c.Files), age: i,
		})
	}
	return topCommits(out)
}

// historyWords are the query tokens that ask about history rather than
// say what about: a commit message holding them is no likelier to answer.
var historyWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`what when who why which change changed changing recent recently lately
		latest last commit committed modify modified modifying add added remove removed introduce introduced
		update updated edit edited touch touched happen happened history ago since week month year yesterday today`) {
		for _, t := range tokenize.QueryTokens(w) {
			historyWords[t] = true
		}
	}
}

// rescore weighs commits of several repositories against the merged file
// ranking of an answer over all of them, as commits weighs one
// repository's against its own: files in rank order (File.Repo set).
func rescore(cs []Commit, files []File) {
	rank := make(map[[2]string]int, len(files))
	for i, f := range files {
		if _, ok := rank[[2]string{f.Repo, f.Path}]; !ok {
			rank[[2]string{f.Repo, f.Path}] = i + 1
		}
	}
	for i := range cs {
		rel := 0.0
		for _, p := range cs[i].Files {
			if r, ok := rank[[2]string{cs[i].Repo, p}]; ok {
				rel += 1 / float64(r)
			}
		}
		cs[i].score = rel / math.Sqrt(float64(cs[i].total)) * cs[i].boost
	}
}

// topCommits keeps the maxCommits best scored, best first (the newer of
// two alike), and none below a quarter of the best.
func topCommits(cs []Commit) []Commit {
	slices.SortStableFunc(cs, func(a, b Commit) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.age, b.age)
	})
	n := 0
	for n < len(cs) && n < maxCommits && cs[n].score >= cs[0].score/4 {
		n++
	}
	return cs[:n]
}

// historyTokens returns the query tokens of each history commit's
// message (its head: messageHead), computed once per segment.
func historyTokens(seg *segment.Segment) [][]string {
	return seg.Memo("query.historyTokens", func() any {
		m := make([][]string, len(seg.History))
		for i, c := range seg.History {
			m[i] = tokenize.QueryTokens(messageHead(c.Message))
		}
		return m
	}).([][]string)
}

// maxMessageScan bounds the bytes of a commit message whose words are
// weighed (historyTokens). A message is kept up to 64 KiB
// (source.MaxMessageBytes), and the words of every one are held for the
// segment and scanned by every query's history arm: 500 commits of 64 KiB
// of distinct words (a repository made to) cost the first query of the
// segment 1.9 s and 1.8 GB of allocations, held 220 MB, and made every
// later query of it, history question or not, 70-90 ms instead of 1-2.
// What a message says about its change is at its head, and most real ones
// end well before 2 KiB.
const maxMessageScan = 2 << 10

// messageHead is msg cut to maxMessageScan bytes, at the last space or
// line break before the cut (no word cut in two).
func messageHead(msg string) string {
	if len(msg) <= maxMessageScan {
		return msg
	}
	head := msg[:maxMessageScan]
	if i := strings.LastIndexAny(head, " \t\r\n"); i > 0 {
		head = head[:i]
	}
	return head
}

// authorName is "Name" of "Name <email>", cut to maxAuthor runes: the
// repository writes the name, of any length, and one too long for the
// history's share of the budget would keep every commit out of it.
func authorName(a string) string {
	if i := strings.LastIndex(a, " <"); i >= 0 && strings.HasSuffix(a, ">") {
		a = a[:i]
	}
	return cut(a, maxAuthor)
}

// subject is a commit message's first line, cut to maxSubject runes.
func subject(msg string) string {
	s, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	return cut(strings.TrimSpace(s), maxSubject)
}

// cut cuts s to n runes, the last an ellipsis. It reads no further than
// the n-th rune: a first line may run to 64 KiB, an author name further,
// and every commit touching the answer's files is cut.
func cut(s string, n int) string {
	k := 0
	for i := range s {
		if k++; k == n {
			if _, size := utf8.DecodeRuneInString(s[i:]); i+size < len(s) {
				return s[:i] + "…"
			}
			break
		}
	}
	return s
}

// commitPreamble renders the commits as the context's first block, as
// many as fit in budget/commitShare tokens (none if the first does not):
//
//	// history of repo@commit: commits touching the files below, most relevant first
//	// 1a2b3c4d5e6f 2026-12-05 Jane Doe: fix the packer's stub (pkg/pack/pack.go +2)
//
// It returns the block and how many commits it holds.
func commitPreamble(cs []Commit, head string, budget int, count func(string) int) (string, int) {
	if len(cs) == 0 || budget/commitShare <= 0 {
		return "", 0
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// history of %s: commits touching the files below, most relevant first", head)
	text, n := "", 0
	for _, c := range cs {
		fmt.Fprintf(&b, "\n// %s %s ", short(c.Hash), day(c.When))
		if c.Repo != "" {
			b.WriteString(c.Repo + " ")
		}
		// The repository's text stays on its comment line: a line break
		// would let it pass for code, or for another chunk's header.
		fmt.Fprintf(&b, "%s: %s (%s", pack.OneLine(c.Author), pack.OneLine(c.Subject), pack.OneLine(strings.Join(c.Files, ", ")))
		if c.Others > 0 {
			fmt.Fprintf(&b, " +%d", c.Others)
		}
		b.WriteString(")")
		if count(b.String()) > budget/commitShare {
			break
		}
		text, n = b.String(), n+1
	}
	return text, n
}

func short(hash string) string { return hash[:min(12, len(hash))] }

// day is the date of an RFC 3339 time ("2026-12-05").
func day(when string) string { return when[:min(10, len(when))] }
