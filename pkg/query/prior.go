package query

import (
	"cmp"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"codectx/pkg/codectx"
	"codectx/pkg/fusion"
	"codectx/pkg/segment"
	"codectx/pkg/tokenize"
)

// Path priors. A query names behaviour; the code that implements it lives
// in source files, while tests, examples, docs and vendored copies repeat
// the same words (a test of a behaviour names it as often as its code).
// Their fused scores are scaled down, so they still appear, behind the
// implementation.
const (
	priorTest    = 0.5
	priorExample = 0.6
	priorVendor  = 0.4
	priorStub    = 0.7 // type stubs: .pyi, .d.ts
	priorDecl    = 0.7 // files that declare types only (see declOnly)
)

// declOnly returns the paths of the files that declare types and nothing
// else: no function, method or class. A query about behaviour
// ("fix response body cleanup after hooks") is answered by the code that
// runs, not by the file that types its options (source/types/hooks.ts),
// though the type file repeats the same words in its field names and docs.
func declOnly(seg *segment.Segment) map[string]bool {
	return seg.MemoFrom("query.declOnly", func(old any, same func(string) bool) any {
		prev, _ := old.(map[string]bool)
		m := map[string]bool{}
		for _, f := range seg.Files {
			if prev != nil && same(f.Path) {
				if prev[f.Path] {
					m[f.Path] = true
				}
				continue
			}
			decl, code := false, false
			for _, id := range f.Chunks {
				switch seg.Chunks[id].Kind {
				case codectx.KindInterface, codectx.KindType, codectx.KindStruct:
					decl = true
				case codectx.KindFunction, codectx.KindMethod, codectx.KindClass, codectx.KindWindow:
					code = true
				}
			}
			if decl && !code {
				m[f.Path] = true
			}
		}
		return m
	}).(map[string]bool)
}

// typeWords are the words of a query about declarations, for which a
// declaration-only file is no less likely than code.
var typeWords = words("type typing interface declaration signature doc documentation docstring comment jsdoc tsdoc")

// PathPrior is the score multiplier for a file path.
func PathPrior(p string) float64 {
	lower := strings.ToLower(p)
	dirs := strings.Split(path.Dir(lower), "/")
	for _, d := range dirs {
		switch d {
		case "vendor", "node_modules", "third_party", "thirdparty":
			return priorVendor
		}
	}
	if IsTestPath(p) {
		return priorTest
	}
	for _, d := range dirs {
		switch d {
		case "example", "examples", "docs", "doc", "benches", "bench", "benchmarks", "samples", "fixtures":
			return priorExample
		}
	}
	if strings.HasSuffix(lower, ".pyi") || strings.HasSuffix(lower, ".d.ts") {
		return priorStub
	}
	if isProse(lower) {
		return priorExample
	}
	return 1
}

// isProse reports whether a (lowercased) path is documentation rather than
// code: markdown and text files, licences and changelogs.
func isProse(lower string) bool {
	switch path.Ext(lower) {
	case ".md", ".markdown", ".rst", ".txt", ".adoc":
		return true
	}
	base := path.Base(lower)
	for _, p := range []string{"license", "licence", "changelog", "changes", "contributing", "authors", "notice", "copying", "history"} {
		if strings.HasPrefix(base, p) {
			return true
		}
	}
	return false
}

// IsTestPath reports whether p looks like a test file in any of the
// supported languages' conventions.
func IsTestPath(p string) bool {
	lower := strings.ToLower(p)
	for _, d := range strings.Split(path.Dir(lower), "/") {
		switch d {
		case "test", "tests", "__tests__", "testing", "spec", "testdata":
			return true
		}
	}
	base := path.Base(p)
	lb := strings.ToLower(base)
	switch {
	case strings.HasSuffix(lb, "_test.go"),
		strings.HasPrefix(lb, "test_") && strings.HasSuffix(lb, ".py"),
		strings.HasSuffix(lb, "_test.py"),
		strings.Contains(lb, ".test.") || strings.Contains(lb, ".spec."),
		strings.HasSuffix(base, "Test.java") || strings.HasSuffix(base, "Tests.java") || strings.HasSuffix(base, "IT.java"),
		lb == "tests.rs" || strings.HasSuffix(lb, "_test.rs") || lb == "conftest.py":
		return true
	}
	return false
}

// declPrior returns the declaration-only files that q's ranking should
// rank lower: none when q's title is about types or docs.
func declPrior(seg *segment.Segment, q string) map[string]bool {
	if slices.ContainsFunc(tokenize.QueryTokens(title(q)), func(t string) bool { return typeWords[t] }) {
		return nil
	}
	return declOnly(seg)
}

// applyPriors scales fused chunk scores by their file's path prior (and
// priorDecl for the declaration-only files, when withDecl: declPrior gave
// them) and re-sorts them.
func applyPriors(seg *segment.Segment, fused []fusion.Scored, withDecl bool) {
	pri := chunkPriors(seg, withDecl)
	for i := range fused {
		id, _ := strconv.Atoi(fused[i].ID)
		fused[i].Score *= pri[id]
	}
	sortByScore(fused)
}

// sortByScore sorts s by score, highest first, stably. It sorts positions
// and moves each result once: a Scored is 72 bytes, and a stable sort
// moves elements many times.
func sortByScore(s []fusion.Scored) {
	if slices.IsSortedFunc(s, func(a, b fusion.Scored) int { return cmp.Compare(b.Score, a.Score) }) {
		return
	}
	sc := sortPool.Get().(*sortScratch)
	idx := slices.Grow(sc.idx[:0], len(s))[:len(s)]
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(i, j int32) int { return cmp.Or(cmp.Compare(s[j].Score, s[i].Score), cmp.Compare(i, j)) })
	sorted := slices.Grow(sc.sorted[:0], len(s))[:len(s)]
	for k, i := range idx {
		sorted[k] = s[i]
	}
	copy(s, sorted)
	clear(sorted) // keeps no strings alive in the pool
	sc.idx, sc.sorted = idx, sorted
	sortPool.Put(sc)
}

// sortScratch is sortByScore's working memory, pooled (a query sorts
// thousands of results more than once).
type sortScratch struct {
	idx    []int32
	sorted []fusion.Scored
}

var sortPool = sync.Pool{New: func() any { return new(sortScratch) }}

// chunkPriors returns the prior of every chunk of seg, by chunk id: its
// file's PathPrior, times priorDecl for a declaration-only file when
// withDecl. Built once per segment.
func chunkPriors(seg *segment.Segment, withDecl bool) []float64 {
	key := "query.chunkPriors"
	if withDecl {
		key = "query.chunkPriorsDecl"
	}
	var decl map[string]bool
	if withDecl {
		decl = declOnly(seg) // outside the build: Memo is not reentrant
	}
	return seg.Memo(key, func() any {
		return byChunkPath(seg.Chunks, func(p string) float64 {
			w := PathPrior(p)
			if decl[p] {
				w *= priorDecl
			}
			return w
		})
	}).([]float64)
}

// byChunkPath gives each chunk of chunks of(its path), calling of once per
// distinct path. A file's chunks lie together, so a path is looked up only
// where it changes (a map access per chunk was most of the first query on
// a new snapshot of a 100k-chunk repository).
func byChunkPath[T any](chunks []codectx.Chunk, of func(path string) T) []T {
	out := make([]T, len(chunks))
	seen := map[string]T{}
	var last string
	var v T
	for i, c := range chunks {
		if i == 0 || c.Path != last {
			var ok bool
			if v, ok = seen[c.Path]; !ok {
				v = of(c.Path)
				seen[c.Path] = v
			}
			last = c.Path
		}
		out[i] = v
	}
	return out
}

// chunkFiles numbers the distinct paths of a segment's chunks (in chunk
// order) and gives each chunk its path's number: rankFiles and
// orderByFile group a ranking by file through slices instead of maps of
// paths, which hashed a path for every result of every query.
type chunkFiles struct {
	of     []int32          // by chunk id: the number of its path
	number map[string]int32 // by path
}

func fileNumbers(seg *segment.Segment) *chunkFiles {
	return seg.Memo("query.chunkFiles", func() any {
		t := &chunkFiles{number: make(map[string]int32, len(seg.Files))}
		t.of = byChunkPath(seg.Chunks, func(p string) int32 {
			n := int32(len(t.number))
			t.number[p] = n
			return n
		})
		return t
	}).(*chunkFiles)
}

// fileScratch is per-file working memory of rankFiles and orderByFile, by
// path number, pooled and handed back zeroed (only the entries a query
// touched are cleared).
type fileScratch struct {
	a, b []float64
	pos  []int32
}

var fileScratchPool sync.Pool

func getFileScratch(n int) *fileScratch {
	sc, _ := fileScratchPool.Get().(*fileScratch)
	if sc == nil || len(sc.pos) < n {
		return &fileScratch{a: make([]float64, n), b: make([]float64, n), pos: make([]int32, n)}
	}
	return sc
}

// orderByFile rescores chunks so the packer sees files in file-rank order:
// a chunk's score becomes its file's score, scaled by how the chunk ranks
// within its file (the best chunk of a file carries the file's score).
// It rescores and sorts fused in place and returns it.
func orderByFile(seg *segment.Segment, fused []fusion.Scored, files []File, shares map[int]float64) []fusion.Scored {
	nums := fileNumbers(seg)
	sc := getFileScratch(len(nums.number))
	defer fileScratchPool.Put(sc)
	fileScore, best := sc.a, sc.b // by path number; a path not there is 0
	for _, f := range files {
		if n, ok := nums.number[f.Path]; ok {
			fileScore[n] = f.Score
		}
	}
	for _, s := range fused {
		id, _ := strconv.Atoi(s.ID)
		p := nums.of[id]
		if s.Score > best[p] {
			best[p] = s.Score
		}
	}
	out := fused
	for i := range out {
		id, _ := strconv.Atoi(out[i].ID)
		p := nums.of[id]
		rel := 1.0
		if v, ok := shares[id]; ok {
			rel = v
		} else if b := best[p]; b > 0 {
			rel = out[i].Score / b
		}
		out[i].Score = fileScore[p] * (0.5 + 0.5*rel)
	}
	for _, s := range fused {
		id, _ := strconv.Atoi(s.ID)
		best[nums.of[id]] = 0
	}
	for _, f := range files {
		if n, ok := nums.number[f.Path]; ok {
			fileScore[n] = 0
		}
	}
	sortByScore(out)
	return out
}
