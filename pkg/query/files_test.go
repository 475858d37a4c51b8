package query

import (
	"cmp"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"testing"

	"codectx/pkg/fusion"
	"codectx/pkg/segment"
)

// rankFilesRef and orderByFileRef are rankFiles and orderByFile as they
// were written with maps of paths (orderByFileRef on a copy of fused).
func rankFilesRef(seg *segment.Segment, fused []fusion.Scored) []File {
	type acc struct {
		path       string
		best, rest float64
		signals    []string
	}
	m := map[string]int{}
	var accs []acc
	for _, s := range fused {
		id, _ := strconv.Atoi(s.ID)
		p := seg.Chunks[id].Path
		i, ok := m[p]
		if !ok {
			i = len(accs)
			m[p] = i
			accs = append(accs, acc{path: p})
		}
		a := &accs[i]
		if s.Score > a.best {
			a.rest += a.best
			a.best = s.Score
		} else {
			a.rest += s.Score
		}
		for _, arm := range s.Arms {
			if !slices.Contains(a.signals, arm) {
				a.signals = append(a.signals, arm)
			}
		}
	}
	var files []File
	for _, a := range accs {
		if a.signals == nil {
			a.signals = []string{}
		}
		slices.Sort(a.signals)
		files = append(files, File{Path: a.path, Score: a.best + restWeight*a.rest, Signals: a.signals})
	}
	slices.SortStableFunc(files, func(a, b File) int { return cmp.Compare(b.Score, a.Score) })
	return files
}

func orderByFileRef(seg *segment.Segment, fused []fusion.Scored, files []File) []fusion.Scored {
	fileScore := map[string]float64{}
	for _, f := range files {
		fileScore[f.Path] = f.Score
	}
	best := map[string]float64{}
	for _, s := range fused {
		id, _ := strconv.Atoi(s.ID)
		p := seg.Chunks[id].Path
		if s.Score > best[p] {
			best[p] = s.Score
		}
	}
	out := slices.Clone(fused)
	for i := range out {
		id, _ := strconv.Atoi(out[i].ID)
		p := seg.Chunks[id].Path
		rel := 1.0
		if b := best[p]; b > 0 {
			rel = out[i].Score / b
		}
		out[i].Score = fileScore[p] * (0.5 + 0.5*rel)
	}
	sortByScore(out)
	return out
}

// TestFileNumbersMatchMaps compares rankFiles and orderByFile, which group
// by path numbers in pooled slices, with the map versions on random
// rankings (negative and tied scores, files left out of the file list,
// files given twice), twice each so pooled scratch is reused: identical.
func TestFileNumbersMatchMaps(t *testing.T) {
	files := map[string]string{}
	for i := range 12 {
		files[fmt.Sprintf("d%d/f%d.go", i%3, i)] = fmt.Sprintf("package d\n\nfunc A%d() {}\n\nfunc B%d() int { return %d }\n\n// C%d does.\nfunc C%d() {}\n", i, i, i, i, i)
	}
	seg := buildSeg(t, files)
	e := &Engine{Seg: seg}
	r := rand.New(rand.NewSource(2))
	arms := []string{"bm25", "graph", "symbol"}
	for i := range 400 {
		var fused []fusion.Scored
		for range r.Intn(3 * len(seg.Chunks)) {
			s := fusion.Scored{ID: strconv.Itoa(r.Intn(len(seg.Chunks))), Score: float64(r.Intn(7)-1) / 3, Arms: arms[:r.Intn(4)]}
			fused = append(fused, s)
		}
		for range 2 {
			got, want := e.rankFiles(fused), rankFilesRef(seg, fused)
			if g, w := fmt.Sprintf("%v", got), fmt.Sprintf("%v", want); g != w {
				t.Fatalf("case %d: rankFiles\n%s\nwant\n%s", i, g, w)
			}
			fl := slices.Clone(want)
			if len(fl) > 0 && r.Intn(3) == 0 {
				fl = fl[:r.Intn(len(fl))] // some files not listed
			}
			if len(fl) > 0 && r.Intn(4) == 0 {
				fl = append(fl, File{Path: fl[0].Path, Score: 9}) // a path twice: the last wins
			}
			// orderByFile rescores its input in place.
			if g, w := fmt.Sprintf("%v", orderByFile(seg, slices.Clone(fused), fl, nil)), fmt.Sprintf("%v", orderByFileRef(seg, fused, fl)); g != w {
				t.Fatalf("case %d: orderByFile\n%s\nwant\n%s", i, g, w)
			}
		}
	}
}
