package query

import (
	"math"
	"strings"

	"codectx/pkg/segment"
)

// replayStats is what replaying the snapshot's own history through the
// title-only whole-file BM25 says of a file: how often that ranking put
// it near the top of a past commit's title, how often it was then among
// the files the commit changed, and how often the commit changed it while
// the ranking left it out. A hub that holds every word is ranked high
// for many titles and changed by few of them; a file that the words
// rarely name but the changes go to is changed while ranked low.
type replayStats struct {
	top     map[string]float64 // commits ranking it in the top replayTop
	hit     map[string]float64 // ... of which changed it
	missed  map[string]float64 // commits changing it while it ranked below replayDeep
	commits float64            // commits replayed
}

const (
	replayTop   = 5
	replayDeep  = 10
	replayFiles = 20 // commits touching more files are not replayed (sweeps, renames)
)

// replay computes (once per segment) the replay statistics of its
// history. Only commits before the indexed one are in the history, so
// nothing of the change being looked for leaks in.
func replay(seg *segment.Segment) *replayStats {
	return seg.Memo("query.replay", func() any {
		st := &replayStats{top: map[string]float64{}, hit: map[string]float64{}, missed: map[string]float64{}}
		if seg.FileBM25 == nil {
			return st
		}
		for _, c := range seg.History {
			if len(c.Files) == 0 || len(c.Files) > replayFiles {
				continue
			}
			tt := nameTerms(commitTitle(c.Message))
			if len(tt) == 0 {
				continue
			}
			changed := make(map[string]bool, len(c.Files))
			for _, p := range c.Files {
				if _, ok := seg.File(p); ok {
					changed[p] = true
				}
			}
			if len(changed) == 0 {
				continue
			}
			st.commits++
			ranked := map[string]bool{}
			for r, h := range seg.FileBM25.SearchFilter(tt, replayDeep, FileParams(), nil) {
				p := seg.Files[h.Doc].Path
				ranked[p] = true
				if r < replayTop {
					st.top[p]++
					if changed[p] {
						st.hit[p]++
					}
				}
			}
			for p := range changed {
				if !ranked[p] {
					st.missed[p]++
				}
			}
		}
		return st
	}).(*replayStats)
}

// commitTitle is the line of a commit message that says what it does: the
// subject, or for a merge commit ("Merge pull request #1 from a/b") the
// first line of its body.
func commitTitle(msg string) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || (i == 0 && strings.HasPrefix(l, "Merge ")) {
			continue
		}
		return l
	}
	return ""
}

// replayFeatures sets the replay features of the candidates.
func replayFeatures(seg *segment.Segment, cands []Candidate, set func(int, string, float64)) {
	st := replay(seg)
	if st.commits == 0 {
		return
	}
	for i, c := range cands {
		top, hit, missed := st.top[c.Path], st.hit[c.Path], st.missed[c.Path]
		set(i, "replay_top", math.Log1p(top))
		set(i, "replay_prec", (hit+0.5)/(top+2))
		set(i, "replay_missed", math.Log1p(missed))
		set(i, "replay_lift", math.Log((hit+missed+0.5)/(top+0.5)))
	}
}
