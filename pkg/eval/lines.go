package eval

import (
	"errors"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/utils/diff"
	"github.com/sergi/go-diff/diffmatchpatch"

	"codectx/pkg/pack"
	"codectx/pkg/query"
	"codectx/pkg/segment"
)

// Changed-line recall. File recall counts a gold file packed as soon as
// any chunk of it is, even a struct two lines long at the other end of
// the file from the change. What an agent needs is the code the change
// touches: the share of the PR's changed lines, in base-commit line
// numbers, that a chunk the pack emitted whole shows (a stub shows no
// body, so it covers none; a class emitted as an outline shows its own
// lines, not its members' bodies). A deleted or modified line counts once;
// lines inserted between two base lines count as one, at the line before
// them (the first line when at the top). Gold files the PR added have no
// base lines and are left out; a task with none is left out of the mean.

// changedLines returns, per gold file present at the base commit, the base
// lines the PR changed (sorted), read from the git dir's base and merge
// commits; nil when the merge commit is not there.
func changedLines(gitDir string, t Task) (map[string][]int, error) {
	if t.MergeCommit == "" {
		return nil, nil
	}
	repo, err := git.PlainOpenWithOptions(gitDir, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) { // a directory inside a work tree
		repo, err = git.PlainOpenWithOptions(gitDir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	}
	if err != nil {
		return nil, err
	}
	tree := func(rev string) (*object.Tree, error) {
		c, err := repo.CommitObject(plumbing.NewHash(rev))
		if err != nil {
			return nil, err
		}
		return c.Tree()
	}
	base, err := tree(t.BaseCommit)
	if err != nil {
		return nil, err
	}
	merged, err := tree(t.MergeCommit)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	text := func(tr *object.Tree, path string) (string, bool, error) {
		f, err := tr.File(path)
		if errors.Is(err, object.ErrFileNotFound) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		s, err := f.Contents()
		return s, err == nil, err
	}
	out := map[string][]int{}
	for _, p := range t.GoldFiles {
		before, ok, err := text(base, p)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // added by the PR
		}
		after, _, err := text(merged, p) // "" when the PR removed it
		if err != nil {
			return nil, err
		}
		if lines := diffLines(before, after); len(lines) > 0 {
			out[p] = lines
		}
	}
	return out, nil
}

// diffLines is the base lines of before that differ in after: each line
// deleted or modified, and for each run of lines inserted the base line
// before it (1 at the top).
func diffLines(before, after string) []int {
	var out []int
	line := 0 // base lines passed
	for _, d := range diff.Do(before, after) {
		n := strings.Count(d.Text, "\n")
		if !strings.HasSuffix(d.Text, "\n") {
			n++ // a last line without a newline
		}
		switch d.Type {
		case diffmatchpatch.DiffEqual:
			line += n
		case diffmatchpatch.DiffDelete:
			for i := 1; i <= n; i++ {
				out = append(out, line+i)
			}
			line += n
		case diffmatchpatch.DiffInsert:
			out = append(out, max(line, 1))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// shown tells which lines of a chunk the pack shows when it emits the
// chunk whole: all of its range, except for a container emitted as an
// outline (a class, interface, impl), whose members are cut to their
// declarations: it shows only the lines outside its members' chunks.
type shown struct {
	outlines map[span][]span // by outline chunk: its members' spans
}

type span struct {
	path       string
	start, end int
}

// newShown reads the outline chunks of the changed files from seg.
func newShown(seg *segment.Segment, changed map[string][]int) *shown {
	s := &shown{outlines: map[span][]span{}}
	by := map[string][]int{}
	for i := range seg.Chunks {
		if p := seg.Chunks[i].Path; len(changed[p]) > 0 {
			by[p] = append(by[p], i)
		}
	}
	for p, ids := range by {
		for _, i := range ids {
			c := &seg.Chunks[i]
			if !c.Outlined() {
				continue
			}
			o := span{p, c.StartLine, c.EndLine}
			var members []span
			for _, j := range ids {
				m := &seg.Chunks[j]
				if j != i && m.StartLine >= c.StartLine && m.EndLine <= c.EndLine && (m.StartLine != c.StartLine || m.EndLine != c.EndLine) {
					members = append(members, span{p, m.StartLine, m.EndLine})
				}
			}
			s.outlines[o] = members
		}
	}
	return s
}

// holds reports whether the chunk of path spanning start-end, emitted
// whole, shows line.
func (s *shown) holds(path string, start, end, line int) bool {
	if line < start || line > end {
		return false
	}
	if s == nil {
		return true
	}
	for _, m := range s.outlines[span{path, start, end}] {
		if m.start <= line && line <= m.end {
			return false
		}
	}
	return true
}

// lineRecall is the share of changed's lines that a chunk emitted whole
// shows (sh; nil: its whole range); ok is false when there are none.
func lineRecall(changed map[string][]int, chunks []query.Chunk, sh *shown) (float64, bool) {
	total := 0
	for _, ls := range changed {
		total += len(ls)
	}
	if total == 0 {
		return 0, false
	}
	covered := 0
	for p, ls := range changed {
		for _, l := range ls {
			for _, ch := range chunks {
				if ch.Path == p && ch.Granularity == string(pack.Full) && sh.holds(p, ch.StartLine, ch.EndLine, l) {
					covered++
					break
				}
			}
		}
	}
	return float64(covered) / float64(total), true
}

// fileLineRecall is lineRecall for a pack of whole files (the baseline).
func fileLineRecall(changed map[string][]int, files map[string]bool) (float64, bool) {
	total, covered := 0, 0
	for p, ls := range changed {
		total += len(ls)
		if files[p] {
			covered += len(ls)
		}
	}
	if total == 0 {
		return 0, false
	}
	return float64(covered) / float64(total), true
}
