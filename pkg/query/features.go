package query

import (
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"codectx/pkg/classify"
	"codectx/pkg/codectx"
	"codectx/pkg/fusion"
	"codectx/pkg/segment"
	"codectx/pkg/tokenize"
)

// featureLists are the rankings whose file ranks become features, in a
// fixed order.
var featureLists = []string{ArmSymbol, ArmBM25, armBM25File, armBM25Path, armBM25Literal, ArmDense, ArmGraph, armGraphIndex, ArmHistory}

// FeatureNames is the layout of a candidate file's feature vector
// (Candidate.X): what the learned ranker (package rank) reads and what
// codectx eval --features dumps.
var FeatureNames = func() []string {
	var n []string
	for _, l := range featureLists {
		n = append(n, "rr_"+l) // 10/(10+rank) of the file's best chunk in the list, 0 if absent
	}
	return append(n,
		"bm25_rel",         // best chunk's BM25 score / the query's top BM25 score
		"bm25_chunks",      // log1p(chunks of the file in the BM25 top 200)
		"file_bm25_rel",    // whole-file BM25 score / the top one
		"title_rr",         // 10/(10+rank) in a whole-file BM25 of the title alone
		"fused_rel",        // the RRF file score / the top file's
		"fused_rr",         // 10/(10+rank) of the file in the RRF file ranking
		"prior",            // path prior (tests, examples, vendored, stubs, prose)
		"is_test",          // test file
		"is_docs",          // examples, docs, benches, prose
		"decl_only",        // declares types and nothing else, and the query is not about types
		"is_index",         // index.ts, mod.rs, __init__.py, lib.rs
		"is_generated",     // generated or minified
		"log_chunks",       // log1p(chunks of the file)
		"log_size",         // log1p(bytes/1000)
		"log_degree",       // log1p(graph neighbours)
		"near_top",         // graph neighbour of one of the three top RRF files
		"same_dir_top",     // in the directory of the top RRF file
		"hist_commits",     // log1p(commits of the history touching the file)
		"hist_recency",     // 1/(1+i/20) for the newest commit i touching it, 0 if none
		"cochange",         // commits shared with the top five BM25 files, damped by commit size
		"path_title",       // share of the title's words in the file's path
		"stem_title",       // the file's name is a word of the title
		"dir_title",        // share of the title's words in the directory names
		"path_body",        // share of the body's words in the path
		"code_share",       // share of the query's words that are code-like (identifiers)
		"trig_symbol",      // trigger EXPLICIT_SYMBOL
		"trig_temporal",    // trigger TEMPORAL_HISTORY
		"trig_implicit",    // trigger IMPLICIT_CONTEXT
		"additive",         // the query adds something
		"sym_x_code",       // rr_symbol * code_share
		"path_x_concept",   // path_title * (trigger SEMANTIC_CONCEPT)
		"fused_x_concept",  // fused_rel * (trigger SEMANTIC_CONCEPT)
		"title_cover",      // idf-weighted share of the title's name words found in the file
		"title_cover_rel",  // title_cover / the best title_cover among the candidates
		"query_cover",      // idf-weighted share of the query's words (first 48) found in the file
		"dir_first",        // no better-ranked candidate in the file's directory
		"path_depth",       // log1p(directories in the path)
		"cochange_title",   // commits shared with the top three files of the title-only ranking
		"test_pair",        // 10/(10+rank) of the best-ranked test file named after this file (foo_test.go, test_foo.py, FooTest.java, foo.test.ts)
		"def_share",        // share of the query's symbol names (weighted by how few files define each) that the file defines
		"def_title",        // def_share of the title's words
		"def_best",         // weight of the most specific query symbol the file defines / the query's most specific one
		"stem_ident",       // the file's name, separators dropped, is a word of the query (Foo.java, "FooBar" and foo_bar.py)
		"stem_ident_title", // stem_ident in the title
		"sym_cover",        // idf-weighted share of the query's words (first 48) among the tokens of the file's symbol names
		// Where a change lands: the first pass's scores (fused_rel) of the
		// file's graph neighbours among the top propDepth files.
		"prop_out",     // best fused_rel of a top file this file links to (imports, calls, uses a type of)
		"prop_in",      // best fused_rel of a top file linking to this one
		"prop_out_sum", // sum of fused_rel over the top files it links to
		"prop_in_sum",  // sum of fused_rel over the top files linking to it
		"def_calls",    // links to a file defining the query's most specific symbol (not itself)
		"def_called",   // linked to by a file defining the query's most specific symbol
		"test_imports", // 10/(10+rank) of the best-ranked top test file linking to this non-test file
		"deg_rel",      // log1p(graph degree) / the highest among the top files
		"dir_share",    // share of the top ten files (others) in the file's directory
		"links_top",    // log1p(top files linked either way)
		// The history replayed (replay.go): past commits' titles through the
		// title-only whole-file BM25.
		"replay_top",    // log1p(commits ranking the file in their top 5)
		"replay_prec",   // share of those that changed it (smoothed)
		"replay_missed", // log1p(commits changing it while it ranked below 10)
		"replay_lift",   // log of (commits changing it while ranked top 5 or below 10) over (commits ranking it top 5)
		// The title alone against chunks: one function that holds the
		// title's words, against a file that holds them spread out.
		"title_chunk_rr",  // 10/(10+rank) of the file's best chunk in a chunk BM25 of the title's name words
		"title_chunk_rel", // that chunk's score / the top chunk's
		// Each line of the query on its own (a PR's commit subjects): the
		// title-only whole-file BM25 of every line.
		"line_rr",   // best 10/(10+rank) over the lines
		"line_top5", // share of the lines ranking the file in their top 5
		"body_rr",   // 10/(10+rank) in a whole-file BM25 of the lines after the title
		// The file against its siblings (the other top files of its
		// directory) and the top file (contrast.go, siblingFeatures).
		"sib_n", "sib_title", "sib_file", "sib_distinct", "top_distinct",
		// The query expanded by the words of its top files (contrast.go,
		// prfFeatures): rank and score in the expanded whole-file BM25.
		"prf_rr", "prf_rel", "prf_rr_3_20", "prf_rel_3_20", "prf_rr_5_10", "prf_rel_5_10", "prf_rr_5_20", "prf_rel_5_20",
	)
}()

// costlyFeatures are computed only for a feature dump or a model that
// reads them: measured, they did not pay on the validation repositories
// (docs/benchmarks.md), and the coverage features scan a posting list per
// query word.
var costlyFeatures = []string{"title_cover", "title_cover_rel", "query_cover", "cochange_title", "test_pair", "dir_first", "path_depth",
	"def_share", "def_title", "def_best", "stem_ident", "stem_ident_title", "sym_cover",
	"prop_out", "prop_in", "prop_out_sum", "prop_in_sum", "def_calls", "def_called", "test_imports", "deg_rel", "dir_share", "links_top",
	"replay_top", "replay_prec", "replay_missed", "replay_lift", "title_chunk_rr", "title_chunk_rel",
	"line_rr", "line_top5", "body_rr",
	"sib_n", "sib_title", "sib_file", "sib_distinct", "top_distinct",
	"prf_rr", "prf_rel", "prf_rr_3_20", "prf_rel_3_20", "prf_rr_5_10", "prf_rel_5_10", "prf_rr_5_20", "prf_rel_5_20"}

// propDepth is how many top files of the RRF ranking the graph features
// propagate from: fixed, so a file's features do not depend on how many
// candidates are scored (20 by the model, 100 in a dump).
const propDepth = 20

// Candidate is one file the learned ranker scores, with its features.
type Candidate struct {
	Path string    `json:"path"`
	X    []float64 `json:"x"`
}

// featureInput is what Search hands the feature builder.
type featureInput struct {
	q      string
	cls    classify.Result
	lists  []fusion.Ranked
	bm25   []float64 // scores of the bm25 list, by position
	files  []File    // RRF file ranking
	keep   func(int) bool
	n      int
	fileBM map[string]float64
	decl   map[string]bool // declaration-only files the query's priors lower (declPrior)
	all    bool            // compute costlyFeatures too (else they stay 0)
}

// historyIndex maps each path to the history positions (newest first) of
// the commits that touched it.
func historyIndex(seg *segment.Segment) map[string][]int {
	return seg.Memo("query.historyIndex", func() any {
		m := map[string][]int{}
		for i, c := range seg.History {
			for _, p := range c.Files {
				m[p] = append(m[p], i)
			}
		}
		return m
	}).(map[string][]int)
}

// features computes the feature vectors of the top in.n files of the RRF
// ranking.
func (e *Engine) features(in featureInput) []Candidate {
	seg := e.Seg
	n := min(in.n, len(in.files))
	if n == 0 {
		return nil
	}
	col := map[string]int{}
	for i, s := range FeatureNames {
		col[s] = i
	}
	cands := make([]Candidate, n)
	pos := make(map[string]int, n)
	for i := 0; i < n; i++ {
		cands[i] = Candidate{Path: in.files[i].Path, X: make([]float64, len(FeatureNames))}
		pos[in.files[i].Path] = i
	}
	set := func(i int, name string, v float64) { cands[i].X[col[name]] = v }
	rr := func(rank int) float64 { return 10 / (10 + float64(rank)) }

	// List ranks (best chunk per file), BM25 scores and chunk counts.
	var bm25Top float64
	if len(in.bm25) > 0 {
		bm25Top = in.bm25[0]
	}
	for _, l := range in.lists {
		seen := map[string]bool{}
		for r, sid := range l.IDs {
			id, _ := strconv.Atoi(sid)
			p := seg.Chunks[id].Path
			i, ok := pos[p]
			if !ok {
				continue
			}
			if l.Arm == ArmBM25 {
				cands[i].X[col["bm25_chunks"]]++
			}
			if seen[p] {
				continue
			}
			seen[p] = true
			set(i, "rr_"+l.Arm, rr(r+1))
			if l.Arm == ArmBM25 && bm25Top > 0 && r < len(in.bm25) {
				set(i, "bm25_rel", in.bm25[r]/bm25Top)
			}
		}
	}
	var fileTop float64
	for _, v := range in.fileBM {
		fileTop = math.Max(fileTop, v)
	}
	top := in.files[0].Score
	decl := in.decl
	hist := historyIndex(seg)
	// The title's words without change verbs ("fix", "add" name no file),
	// as the file-name list reads them.
	tt := nameTerms(title(in.q))
	bodyT := tokenize.QueryTokens(strings.TrimPrefix(strings.TrimSpace(in.q), title(in.q)))
	tset := map[string]bool{}
	for _, t := range tt {
		tset[t] = true
	}
	code := codeShare(in.q)
	concept := b2f(in.cls.Trigger == classify.SemanticConcept)

	// Graph: neighbours of the three top files.
	near := map[string]bool{}
	if seg.Graph != nil {
		for i := 0; i < min(3, n); i++ {
			for _, nb := range seg.Graph.FileNeighbors(in.files[i].Path) {
				near[nb.Path] = true
			}
		}
	}
	topDir := path.Dir(in.files[0].Path)

	// Co-change with the top five BM25 files.
	co := map[string]float64{}
	var seeds []string
	for _, l := range in.lists {
		if l.Arm != ArmBM25 {
			continue
		}
		sseen := map[string]bool{}
		for _, sid := range l.IDs {
			id, _ := strconv.Atoi(sid)
			p := seg.Chunks[id].Path
			if !sseen[p] {
				sseen[p] = true
				seeds = append(seeds, p)
			}
			if len(seeds) == 5 {
				break
			}
		}
	}
	cochange(seg, hist, seeds, co)

	// Title-only whole-file BM25.
	titleRank := map[string]int{}
	if seg.FileBM25 != nil && len(tt) > 0 {
		fileKeep := fileFilter(seg, in.keep)
		for r, h := range seg.FileBM25.SearchFilter(tt, 30, FileParams(), fileKeep) {
			titleRank[seg.Files[h.Doc].Path] = r + 1
		}
	}

	if in.all {
		e.costlyFeatures(in, cands, set, tt, titleRank, hist)
	}

	for i := 0; i < n; i++ {
		f := in.files[i]
		p := f.Path
		x := cands[i].X
		x[col["bm25_chunks"]] = math.Log1p(x[col["bm25_chunks"]])
		if fileTop > 0 {
			set(i, "file_bm25_rel", in.fileBM[p]/fileTop)
		}
		if r, ok := titleRank[p]; ok {
			set(i, "title_rr", rr(r))
		}
		if top > 0 {
			set(i, "fused_rel", f.Score/top)
		}
		set(i, "fused_rr", rr(i+1))
		prior := PathPrior(p)
		set(i, "prior", prior)
		set(i, "is_test", b2f(IsTestPath(p)))
		set(i, "is_docs", b2f(prior == priorExample))
		set(i, "decl_only", b2f(decl[p]))
		set(i, "is_index", b2f(indexStems[baseStem(p)]))
		set(i, "is_generated", b2f(isGenerated(p)))
		if sf, ok := seg.File(p); ok {
			set(i, "log_chunks", math.Log1p(float64(len(sf.Chunks))))
			set(i, "log_size", math.Log1p(float64(sf.Size)/1000))
		}
		if seg.Graph != nil {
			set(i, "log_degree", math.Log1p(float64(seg.Graph.FileDegree(p))))
		}
		set(i, "near_top", b2f(near[p]))
		set(i, "same_dir_top", b2f(i > 0 && path.Dir(p) == topDir))
		if cs := hist[p]; len(cs) > 0 {
			set(i, "hist_commits", math.Log1p(float64(len(cs))))
			set(i, "hist_recency", 1/(1+float64(cs[0])/20))
		}
		set(i, "cochange", math.Log1p(co[p]))
		pw := pathWords(seg, p)
		pt, dt, stem := pw.path, pw.dir, pw.stem
		set(i, "path_title", share(tt, pt))
		set(i, "dir_title", share(tt, dt))
		set(i, "path_body", share(bodyT, pt))
		set(i, "stem_title", b2f(len(stem) > 0 && allIn(stem, tset)))
		set(i, "code_share", code)
		set(i, "trig_symbol", b2f(in.cls.Trigger == classify.ExplicitSymbol))
		set(i, "trig_temporal", b2f(in.cls.Trigger == classify.TemporalHistory))
		set(i, "trig_implicit", b2f(in.cls.Trigger == classify.ImplicitContext))
		set(i, "additive", b2f(isAdditive(in.q)))
		set(i, "sym_x_code", x[col["rr_symbol"]]*code)
		set(i, "path_x_concept", x[col["path_title"]]*concept)
		set(i, "fused_x_concept", x[col["fused_rel"]]*concept)
	}
	return cands
}

// costlyFeatures sets the costlyFeatures of the candidates: coverage of
// the title's and the query's words, the directory and test-pair
// features, co-change with the title-only ranking's top three files.
func (e *Engine) costlyFeatures(in featureInput, cands []Candidate, set func(int, string, float64), tt []string, titleRank map[string]int, hist map[string][]int) {
	seg := e.Seg
	rr := func(rank int) float64 { return 10 / (10 + float64(rank)) }
	// Co-change with the top three files of the title-only ranking.
	coT := map[string]float64{}
	tseeds := make([]string, 0, 3)
	for p, r := range titleRank {
		if r <= 3 {
			tseeds = append(tseeds, p)
		}
	}
	sort.Strings(tseeds)
	cochange(seg, hist, tseeds, coT)
	replayFeatures(seg, cands, set)
	e.titleChunkFeatures(in, tt, cands, set)
	e.lineFeatures(in, cands, set)
	e.contrastFeatures(in, tt, cands, set)

	// Coverage: which of the title's and the query's words each file holds.
	tcov := coverage(seg, tt, cands)
	qcov := coverage(seg, distinct(tokenize.QueryTokens(in.q), 48), cands)
	var tcovTop float64
	for _, v := range tcov {
		tcovTop = math.Max(tcovTop, v)
	}
	// Test files in the RRF ranking, by the name of the file they test.
	tested := map[string]int{}
	for r, f := range in.files[:min(len(in.files), 100)] {
		if k := testedName(f.Path); k != "" {
			if _, ok := tested[k]; !ok {
				tested[k] = r + 1
			}
		}
	}
	qw, tw := identWords(in.q), identWords(title(in.q))
	defs := definitions(seg, qw)
	qset, tset := map[string]bool{}, map[string]bool{}
	for _, w := range qw {
		qset[strings.ReplaceAll(w, "_", "")] = true
	}
	for _, w := range tw {
		tset[strings.ReplaceAll(w, "_", "")] = true
	}
	scov := symCoverage(seg, distinct(tokenize.QueryTokens(in.q), 48), cands)
	dirSeen := map[string]bool{}
	for i, c := range cands {
		set(i, "def_share", defs.share(qw, c.Path))
		set(i, "def_title", defs.share(tw, c.Path))
		set(i, "def_best", defs.best(qw, c.Path))
		if k := identKey(fileStem(c.Path)); len(k) >= 3 {
			set(i, "stem_ident", b2f(qset[k]))
			set(i, "stem_ident_title", b2f(tset[k]))
		}
		set(i, "sym_cover", scov[i])
		p := c.Path
		set(i, "title_cover", tcov[i])
		if tcovTop > 0 {
			set(i, "title_cover_rel", tcov[i]/tcovTop)
		}
		set(i, "query_cover", qcov[i])
		dir := path.Dir(p)
		set(i, "dir_first", b2f(!dirSeen[dir]))
		dirSeen[dir] = true
		set(i, "path_depth", math.Log1p(float64(strings.Count(p, "/"))))
		set(i, "cochange_title", math.Log1p(coT[p]))
		if r, ok := tested[sourceName(p)]; ok && !IsTestPath(p) {
			set(i, "test_pair", rr(r))
		}
	}
	graphFeatures(seg, in.files, cands, set, defs.top(qw))
}

// graphFeatures sets the features of where a change lands: the first
// pass's scores of each candidate's graph neighbours among the top
// propDepth files, its links to the files defining the query's most
// specific symbol (def), to top test files, its degree and directory.
func graphFeatures(seg *segment.Segment, files []File, cands []Candidate, set func(int, string, float64), def map[string]bool) {
	top := min(propDepth, len(files))
	dirN := map[string]int{}
	for _, f := range files[:min(10, len(files))] {
		dirN[path.Dir(f.Path)]++
	}
	for i, c := range cands {
		d := dirN[path.Dir(c.Path)]
		if i < 10 {
			d-- // itself
		}
		set(i, "dir_share", float64(d)/float64(max(1, min(10, len(files))-1)))
	}
	if seg.Graph == nil || top == 0 || files[0].Score <= 0 {
		return
	}
	rel := make(map[string]float64, top)
	rank := make(map[string]int, top)
	var degTop float64
	for r, f := range files[:top] {
		rel[f.Path] = f.Score / files[0].Score
		rank[f.Path] = r + 1
		degTop = math.Max(degTop, math.Log1p(float64(seg.Graph.FileDegree(f.Path))))
	}
	rr := func(rank int) float64 { return 10 / (10 + float64(rank)) }
	for i, c := range cands {
		var out, in, outSum, inSum, testBest float64
		var calls, called bool
		linked := map[string]bool{}
		seenOut, seenIn := map[string]bool{}, map[string]bool{}
		for _, nb := range seg.Graph.FileNeighbors(c.Path) {
			if nb.Path == c.Path {
				continue
			}
			if nb.Out {
				calls = calls || def[nb.Path]
			} else {
				called = called || def[nb.Path]
			}
			v, ok := rel[nb.Path]
			if !ok {
				continue
			}
			linked[nb.Path] = true
			if nb.Out {
				if !seenOut[nb.Path] {
					seenOut[nb.Path] = true
					out, outSum = math.Max(out, v), outSum+v
				}
				continue
			}
			if !seenIn[nb.Path] {
				seenIn[nb.Path] = true
				in, inSum = math.Max(in, v), inSum+v
			}
			if IsTestPath(nb.Path) && !IsTestPath(c.Path) {
				testBest = math.Max(testBest, rr(rank[nb.Path]))
			}
		}
		set(i, "prop_out", out)
		set(i, "prop_in", in)
		set(i, "prop_out_sum", outSum)
		set(i, "prop_in_sum", inSum)
		set(i, "def_calls", b2f(calls && !def[c.Path]))
		set(i, "def_called", b2f(called && !def[c.Path]))
		set(i, "test_imports", testBest)
		set(i, "links_top", math.Log1p(float64(len(linked))))
		if degTop > 0 {
			set(i, "deg_rel", math.Log1p(float64(seg.Graph.FileDegree(c.Path)))/degTop)
		}
	}
}

// identWords are the distinct words of q written as identifiers could be
// (letters, digits, underscores; at least three bytes), lower case,
// without stopwords and change verbs written as plain words.
func identWords(q string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(q, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_')
	}) {
		if len(w) < 3 || len(w) > tokenize.MaxTokenLen || isPlainWord(w) && changeVerbs[strings.ToLower(w)] {
			continue
		}
		l := strings.ToLower(w)
		if tokenize.IsStopword(l) || seen[l] {
			continue
		}
		seen[l] = true
		out = append(out, l)
	}
	return out
}

// identKey is a name compared without case and separators: FooBar,
// foo_bar and foo-bar are one.
func identKey(s string) string {
	return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
}

// defIndex holds, for a query's words that name symbols of the snapshot,
// the files that define each and its weight log(1 + files/defining files).
type defIndex struct {
	files  map[string]map[string]bool
	weight map[string]float64
}

func definitions(seg *segment.Segment, ws []string) defIndex {
	d := defIndex{files: map[string]map[string]bool{}, weight: map[string]float64{}}
	n := float64(max(1, len(seg.Files)))
	for _, w := range ws {
		ids := seg.Lookup(w)
		if len(ids) == 0 {
			continue
		}
		fs := map[string]bool{}
		for _, id := range ids {
			fs[seg.Chunks[id].Path] = true
		}
		d.files[w] = fs
		d.weight[w] = math.Log1p(n / float64(len(fs)))
	}
	return d
}

// share is the weighted share of ws's defined words that p defines.
func (d defIndex) share(ws []string, p string) float64 {
	var hit, total float64
	for _, w := range ws {
		fs, ok := d.files[w]
		if !ok {
			continue
		}
		total += d.weight[w]
		if fs[p] {
			hit += d.weight[w]
		}
	}
	if total == 0 {
		return 0
	}
	return hit / total
}

// best is the weight of the most specific of ws's words p defines over the
// most specific one's.
func (d defIndex) best(ws []string, p string) float64 {
	var mine, top float64
	for _, w := range ws {
		fs, ok := d.files[w]
		if !ok {
			continue
		}
		top = math.Max(top, d.weight[w])
		if fs[p] {
			mine = math.Max(mine, d.weight[w])
		}
	}
	if top == 0 {
		return 0
	}
	return mine / top
}

// top is the set of files defining the most specific of ws's words
// (the highest weight; nil when none names a symbol).
func (d defIndex) top(ws []string) map[string]bool {
	var best string
	var bw float64
	for _, w := range ws {
		if fs, ok := d.files[w]; ok && len(fs) > 0 && d.weight[w] > bw {
			best, bw = w, d.weight[w]
		}
	}
	if best == "" {
		return nil
	}
	return d.files[best]
}

// symTokens maps each file to the distinct tokens of its symbols' names,
// built once per segment.
func symTokens(seg *segment.Segment) map[string]map[string]bool {
	return seg.MemoFrom("query.symTokens", func(old any, same func(string) bool) any {
		prev, _ := old.(map[string]map[string]bool)
		m := make(map[string]map[string]bool, len(seg.Files))
		for _, f := range seg.Files {
			if prev != nil && same(f.Path) {
				if set, ok := prev[f.Path]; ok {
					m[f.Path] = set
				}
				continue
			}
			var set map[string]bool
			for _, id := range f.Chunks {
				c := seg.Chunks[id]
				if c.Name == "" || c.Kind == codectx.KindWindow {
					continue
				}
				if set == nil {
					set = map[string]bool{}
				}
				for _, t := range tokenize.Tokens(c.Name) {
					set[t] = true
				}
			}
			if set != nil {
				m[f.Path] = set
			}
		}
		return m
	}).(map[string]map[string]bool)
}

// symCoverage is, per candidate, the idf-weighted share of terms
// (distinct) found among the tokens of the file's symbol names (idf of
// the whole-file BM25 index).
func symCoverage(seg *segment.Segment, terms []string, cands []Candidate) []float64 {
	out := make([]float64, len(cands))
	if seg.FileBM25 == nil || len(terms) == 0 {
		return out
	}
	st := symTokens(seg)
	n := float64(max(1, seg.FileBM25.NumDocs()))
	var total float64
	for _, t := range terms {
		df := seg.FileBM25.DocFreq(t)
		if df == 0 {
			continue
		}
		idf := math.Log1p(n / float64(df))
		total += idf
		for i, c := range cands {
			if st[c.Path][t] {
				out[i] += idf
			}
		}
	}
	if total > 0 {
		for i := range out {
			out[i] /= total
		}
	}
	return out
}

// cochange adds to co, for each seed, the commits of the history that
// touched the seed, to every other file they touched, each damped by the
// commit's size (commits of more than 50 files are skipped).
func cochange(seg *segment.Segment, hist map[string][]int, seeds []string, co map[string]float64) {
	for _, s := range seeds {
		for _, ci := range hist[s] {
			c := seg.History[ci]
			if len(c.Files) > 50 {
				continue
			}
			w := 1 / math.Sqrt(float64(len(c.Files)))
			for _, p := range c.Files {
				if p != s {
					co[p] += w
				}
			}
		}
	}
}

// coverage is, per candidate, the idf-weighted share of terms (distinct)
// that the file holds, by the whole-file BM25 index.
func coverage(seg *segment.Segment, terms []string, cands []Candidate) []float64 {
	out := make([]float64, len(cands))
	if seg.FileBM25 == nil || len(terms) == 0 {
		return out
	}
	docPos := make(map[int]int, len(cands))
	for i, c := range cands {
		if d, ok := seg.FileIndex(c.Path); ok {
			docPos[d] = i
		}
	}
	hit := make([]bool, len(cands))
	var total float64
	seen := map[string]bool{}
	for _, t := range terms {
		if seen[t] {
			continue
		}
		seen[t] = true
		clear(hit)
		idf := seg.FileBM25.Docs(t, func(d int) {
			if i, ok := docPos[d]; ok {
				hit[i] = true
			}
		})
		total += idf
		for i, h := range hit {
			if h {
				out[i] += idf
			}
		}
	}
	if total > 0 {
		for i := range out {
			out[i] /= total
		}
	}
	return out
}

// testedName is the name of the file a test file tests, lower case with
// its extension ("foo.go" for foo_test.go, "foo.py" for test_foo.py,
// "foo.java" for FooTest.java, "foo.ts" for foo.test.ts), or "" when p
// is not named as a test of one file.
func testedName(p string) string {
	base := strings.ToLower(path.Base(p))
	ext := path.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	switch {
	case strings.HasSuffix(stem, "_test"):
		stem = strings.TrimSuffix(stem, "_test")
	case ext == ".py" && strings.HasPrefix(stem, "test_"):
		stem = strings.TrimPrefix(stem, "test_")
	case strings.HasSuffix(stem, ".test"), strings.HasSuffix(stem, ".spec"):
		stem = stem[:len(stem)-5]
	case ext == ".java" && strings.HasSuffix(stem, "tests"):
		stem = strings.TrimSuffix(stem, "tests")
	case ext == ".java" && strings.HasSuffix(stem, "test"):
		stem = strings.TrimSuffix(stem, "test")
	default:
		return ""
	}
	if stem == "" {
		return ""
	}
	return stem + ext
}

// sourceName is p's key among testedName's: its base name, lower case.
func sourceName(p string) string { return strings.ToLower(path.Base(p)) }

// distinct is the first n distinct words of ws.
func distinct(ws []string, n int) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range ws {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
			if len(out) == n {
				break
			}
		}
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// share is the fraction of the distinct words of q found in of.
func share(q, of []string) float64 {
	if len(q) == 0 {
		return 0
	}
	// Queries and paths have a few words each: scans beat building sets.
	hit, distinct := 0, 0
	for i, t := range q {
		if slices.Contains(q[:i], t) {
			continue
		}
		distinct++
		if slices.Contains(of, t) {
			hit++
		}
	}
	return float64(hit) / float64(distinct)
}

func allIn(ws []string, set map[string]bool) bool {
	for _, w := range ws {
		if !set[w] {
			return false
		}
	}
	return true
}

// isGenerated reports generated or minified files by name.
func isGenerated(p string) bool {
	l := strings.ToLower(p)
	return strings.Contains(l, "generated") || strings.Contains(l, ".pb.") || strings.HasSuffix(l, ".min.js") ||
		strings.Contains(l, "_gen.") || strings.Contains(l, "/gen/")
}

// codeShare is the share of the query's words written as code: with an
// underscore, inner capitals, dots or colons between letters, or brackets.
func codeShare(q string) float64 {
	ws := strings.Fields(q)
	if len(ws) == 0 {
		return 0
	}
	n := 0
	for _, w := range ws {
		if codeLike(strings.Trim(w, "`'\",;:!?()")) {
			n++
		}
	}
	return float64(n) / float64(len(ws))
}

func codeLike(w string) bool {
	if len(w) < 2 {
		return false
	}
	if strings.ContainsAny(w, "_()[]<>") || strings.Contains(w, "::") {
		return true
	}
	if i := strings.IndexByte(w, '.'); i > 0 && i < len(w)-1 {
		return true
	}
	for i, r := range w {
		if i > 0 && unicode.IsUpper(r) {
			return true
		}
	}
	return false
}

// rerank orders the top files by the model's scores. The reranked files
// take the top scores of the RRF ranking, in the model's order, so scores
// stay on one scale and files below the reranked ones keep theirs.
func rerank(files []File, cands []Candidate, score func([]float64) float64) {
	n := len(cands)
	type sc struct {
		f File
		s float64
		i int
	}
	xs := make([]sc, n)
	scores := make([]float64, n)
	for i := range cands {
		xs[i] = sc{files[i], score(cands[i].X), i}
		scores[i] = files[i].Score
	}
	sort.SliceStable(xs, func(a, b int) bool {
		if xs[a].s != xs[b].s {
			return xs[a].s > xs[b].s
		}
		return xs[a].i < xs[b].i
	})
	for i := range xs {
		files[i] = xs[i].f
		files[i].Score = scores[i]
	}
}

// words3 are the tokens of a file's path, directory and stem.
type words3 struct{ path, dir, stem []string }

// pathWords returns the tokens of p, its directory and its stem, from a
// table built once per segment for its files (tokenized on the spot for a
// path that is not one).
func pathWords(seg *segment.Segment, p string) words3 {
	m := seg.MemoFrom("query.pathWords", func(old any, _ func(string) bool) any {
		prev, _ := old.(map[string]words3) // a path's words are the path's alone
		m := make(map[string]words3, len(seg.Files))
		for _, f := range seg.Files {
			if w, ok := prev[f.Path]; ok {
				m[f.Path] = w
				continue
			}
			m[f.Path] = words3{tokenize.Tokens(f.Path), tokenize.Tokens(path.Dir(f.Path)), tokenize.Tokens(fileStem(f.Path))}
		}
		return m
	}).(map[string]words3)
	if w, ok := m[p]; ok {
		return w
	}
	return words3{tokenize.Tokens(p), tokenize.Tokens(path.Dir(p)), tokenize.Tokens(fileStem(p))}
}

// lineFeatures sets line_rr, line_top5 and body_rr: each line of the query
// (at most 10) through the title-only whole-file BM25, and the lines after
// the first together.
func (e *Engine) lineFeatures(in featureInput, cands []Candidate, set func(int, string, float64)) {
	seg := e.Seg
	if seg.FileBM25 == nil {
		return
	}
	pos := candIndex(cands)
	fileKeep := fileFilter(seg, in.keep)
	ranks := func(terms []string, k int) map[int]int {
		out := map[int]int{}
		for r, h := range seg.FileBM25.SearchFilter(terms, k, FileParams(), fileKeep) {
			if i, ok := pos[seg.Files[h.Doc].Path]; ok {
				out[i] = r + 1
			}
		}
		return out
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(in.q), "\n") {
		if l = strings.TrimSpace(l); l != "" && len(lines) < 10 {
			lines = append(lines, l)
		}
	}
	best := make([]float64, len(cands))
	top5 := make([]float64, len(cands))
	n := 0
	for _, l := range lines {
		terms := nameTerms(l)
		if len(terms) == 0 {
			continue
		}
		n++
		for i, r := range ranks(terms, 30) {
			best[i] = math.Max(best[i], 10/(10+float64(r)))
			if r <= 5 {
				top5[i]++
			}
		}
	}
	for i := range cands {
		set(i, "line_rr", best[i])
		if n > 0 {
			set(i, "line_top5", top5[i]/float64(n))
		}
	}
	if len(lines) > 1 {
		if terms := nameTerms(strings.Join(lines[1:], "\n")); len(terms) > 0 {
			for i, r := range ranks(terms, 30) {
				set(i, "body_rr", 10/(10+float64(r)))
			}
		}
	}
}

// titleChunkFeatures sets title_chunk_rr and title_chunk_rel: where the
// file's best chunk ranks in a chunk BM25 of the title's name words.
func (e *Engine) titleChunkFeatures(in featureInput, tt []string, cands []Candidate, set func(int, string, float64)) {
	seg := e.Seg
	if seg.BM25 == nil || len(tt) == 0 {
		return
	}
	pos := candIndex(cands)
	seen := map[string]bool{}
	var top float64
	for r, h := range seg.BM25.SearchFilter(tt, 200, Params(), in.keep) {
		if r == 0 {
			top = h.Score
		}
		p := seg.Chunks[h.Doc].Path
		i, ok := pos[p]
		if !ok || seen[p] {
			continue
		}
		seen[p] = true
		set(i, "title_chunk_rr", 10/(10+float64(r+1)))
		if top > 0 {
			set(i, "title_chunk_rel", h.Score/top)
		}
	}
}

// candIndex maps each candidate's path to its position in cands.
func candIndex(cands []Candidate) map[string]int {
	pos := make(map[string]int, len(cands))
	for i, c := range cands {
		pos[c.Path] = i
	}
	return pos
}
