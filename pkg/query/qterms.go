package query

import (
	"math"
	"slices"
	"strings"
	"unicode"

	"codectx/pkg/segment"
	"codectx/pkg/tokenize"
)

// TermFeatureNames is the layout of a query term's feature vector in a
// TermDump: what scripts/term-weights.py learns a term's weight from. None
// is tuned to a repository: each is the term's shape in the query, how
// rare it is in the snapshot, or how it spreads over the first stage's
// top files.
var TermFeatureNames = []string{
	"idf",          // whole-file BM25 idf of the term in the snapshot
	"df_log",       // log1p(files holding it)
	"in_title",     // a token of the query's first line
	"title_only",   // in the first line and nowhere after it
	"name_term",    // one of the title's file-name terms (change verbs dropped)
	"change_verb",  // a change verb ("fix", "add", ...) or its inflection
	"count_log",    // log1p(times the query holds it)
	"first_pos",    // position of its first occurrence among the query's tokens, over their number
	"first_line",   // log1p(the line it first occurs on)
	"len",          // min(bytes, 20) / 10
	"has_digit",    // holds a digit
	"camel",        // from a word with a lower-to-upper case change (fooBar, FooBar)
	"snake",        // from a word with an underscore
	"dotted",       // from a word with a dot between letters (a.b, file.go)
	"backticked",   // from a word between backticks
	"call",         // from a word followed by "(" or "()"
	"path_like",    // from a word with a slash
	"upper",        // from a word in capitals (HTTP, URL)
	"ident_whole",  // the whole-identifier token of a word of several parts (foobar of fooBar)
	"ident_part",   // a part of such a word (foo, bar of fooBar)
	"compound",     // a join of adjacent prose words the index knows (compoundTerms)
	"path_log",     // log1p(files whose path holds it)
	"path_share",   // files whose path holds it / files holding it
	"symbol",       // a word it came from names a symbol of the snapshot
	"sym_files",    // log1p(files defining a symbol of that name)
	"top20_share",  // share of the top 20 files of the RRF ranking holding it
	"top100_share", // share of the dumped candidates holding it
	"top_lift",     // log of top20_share over the snapshot's share (df / files)
	"top1",         // the top file of the RRF ranking holds it
	"top_spread",   // its whole-file score's coefficient of variation over the top-20 files holding it
	"added",        // added to the chunk query by root conflation or as an abbreviation's expansion (not a word of the query)
}

// TermDump is, for a feature dump, the query's terms of the whole-file and
// the chunk BM25 with their features and each term's BM25 score in each
// candidate file and in each chunk of the candidates: enough to re-weight
// the query's terms offline and rank the candidates by the re-weighted
// whole-file or best-chunk score (docs/benchmarks.md, twelfth round).
type TermDump struct {
	Names []string    `json:"names"`
	Terms []string    `json:"terms"`
	X     [][]float64 `json:"x"`
	// FileQ tells the terms of the whole-file BM25 query (fileBM25Arm)
	// and ChunkW each term's weight in the chunk BM25 query (bm25Query;
	// 0 when not in it).
	FileQ  []bool    `json:"file_q"`
	ChunkW []float64 `json:"chunk_w"`
	// Hits holds, per term, the candidates (their index in the dump's
	// files) that hold it and the term's whole-file BM25 score in each:
	// a candidate's whole-file score is the sum over its FileQ terms.
	Hits [][][2]float64 `json:"hits"`
	// ChunkHits holds, per term, the chunks of the candidates that hold
	// it: [candidate, chunk id, the term's chunk BM25 score at weight 1].
	ChunkHits [][][3]float64 `json:"chunk_hits"`
}

// termShape is what a term's source words look like.
type termShape struct {
	camel, snake, dotted, backticked, call, pathLike, upper, whole, part bool
	symbol                                                               bool
	symFiles                                                             int
}

// queryTermShapes maps each token of q to the shape of the words it came
// from (any of them).
func queryTermShapes(seg *segment.Segment, q string) map[string]*termShape {
	out := map[string]*termShape{}
	get := func(t string) *termShape {
		s := out[t]
		if s == nil {
			s = &termShape{}
			out[t] = s
		}
		return s
	}
	inTick := false
	for _, field := range strings.Fields(q) {
		ticked := inTick || strings.Contains(field, "`")
		if strings.Count(field, "`")%2 == 1 {
			inTick = !inTick
		}
		w := strings.Trim(field, "`'\",;:!?[]{}<>*")
		call := strings.Contains(w, "(")
		pathLike := strings.Contains(w, "/")
		dotted := false
		if i := strings.IndexByte(w, '.'); i > 0 && i < len(w)-1 && unicode.IsLetter(rune(w[i+1])) {
			dotted = true
		}
		for _, id := range strings.FieldsFunc(w, func(r rune) bool {
			return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_')
		}) {
			camel, upper := false, len(id) >= 2
			for i, r := range id {
				if i > 0 && unicode.IsUpper(r) && unicode.IsLower(rune(id[i-1])) {
					camel = true
				}
				if unicode.IsLower(r) {
					upper = false
				}
			}
			snake := strings.Contains(strings.Trim(id, "_"), "_")
			parts := tokenize.Split(id)
			partToks := map[string]bool{}
			if len(parts) > 1 {
				for _, p := range parts {
					for _, t := range tokenize.Tokens(p) {
						partToks[t] = true
					}
				}
			}
			var defs []int
			if camel || snake || len(id) >= 4 {
				defs = seg.Lookup(id)
			}
			for _, t := range tokenize.Tokens(id) {
				s := get(t)
				s.camel = s.camel || camel
				s.snake = s.snake || snake
				s.dotted = s.dotted || dotted
				s.backticked = s.backticked || ticked
				s.call = s.call || call
				s.pathLike = s.pathLike || pathLike
				s.upper = s.upper || upper
				if len(parts) > 1 {
					if partToks[t] {
						s.part = true
					} else {
						s.whole = true
					}
				}
				if len(defs) > 0 {
					s.symbol = true
					files := map[string]bool{}
					for _, d := range defs {
						files[seg.Chunks[d].Path] = true
					}
					s.symFiles = max(s.symFiles, len(files))
				}
			}
		}
	}
	return out
}

// pathTermFiles maps each token of the snapshot's paths to the number of
// files whose path holds it. (Not built from pathWords: a memo is not
// built inside another.)
func pathTermFiles(seg *segment.Segment) map[string]int {
	return seg.Memo("query.pathTermFiles", func() any {
		m := map[string]int{}
		for _, f := range seg.Files {
			for _, t := range distinct(tokenize.Tokens(f.Path), 1<<30) {
				m[t]++
			}
		}
		return m
	}).(map[string]int)
}

// termDump builds the TermDump of query q for the candidates cands (the
// dump's files, in RRF order): the whole-file BM25 query's terms (as
// fileBM25Arm builds them), their features, and each term's score in each
// candidate. Only for a feature dump: it searches the whole-file index
// once per term.
func (e *Engine) termDump(q string, cands []Candidate) *TermDump {
	seg := e.Seg
	if seg.FileBM25 == nil || len(cands) == 0 {
		return nil
	}
	qtoks := tokenize.QueryTokens(q)
	comp := compoundTerms(q, seg.FileBM25, qtoks)
	terms := append(slices.Clone(qtoks), comp...)
	nFile := len(terms)
	isComp, plain := map[string]bool{}, map[string]bool{}
	for _, t := range comp {
		isComp[t] = true
	}
	for _, t := range qtoks {
		plain[t] = true
	}
	chunkW := map[string]float64{}
	if seg.BM25 != nil {
		cq, cw := e.bm25Query(q)
		for _, t := range compoundTerms(q, seg.BM25, qtoks) {
			isComp[t] = true
		}
		for j, t := range cq {
			if chunkW[t] == 0 && !slices.Contains(terms, t) {
				terms = append(terms, t)
			}
			chunkW[t] += cw[j]
		}
	}
	if len(terms) == 0 {
		return nil
	}
	docs := map[int]int{} // FileBM25 document -> candidate
	chunkOf := map[int]int{}
	for i, c := range cands {
		if d, ok := seg.FileIndex(c.Path); ok {
			docs[d] = i
			for _, id := range seg.Files[d].Chunks {
				chunkOf[id] = i
			}
		}
	}
	keepCand := func(d int) bool { _, ok := docs[d]; return ok }
	keepChunk := func(id int) bool { _, ok := chunkOf[id]; return ok }

	all := tokenize.Tokens(q)
	firstPos := map[string]int{}
	count := map[string]int{}
	for i, t := range all {
		if _, ok := firstPos[t]; !ok {
			firstPos[t] = i
		}
		count[t]++
	}
	lineOf := map[string]int{}
	lines := strings.Split(strings.TrimSpace(q), "\n")
	for li, l := range lines {
		for _, t := range tokenize.Tokens(l) {
			if _, ok := lineOf[t]; !ok {
				lineOf[t] = li
			}
		}
	}
	titleT, bodyT := map[string]bool{}, map[string]bool{}
	for _, t := range tokenize.Tokens(title(q)) {
		titleT[t] = true
	}
	for _, l := range lines[1:] {
		for _, t := range tokenize.Tokens(l) {
			bodyT[t] = true
		}
	}
	names := map[string]bool{}
	for _, t := range nameTerms(title(q)) {
		names[t] = true
	}
	shapes := queryTermShapes(seg, q)
	pathFiles := pathTermFiles(seg)
	n := float64(max(1, seg.FileBM25.NumDocs()))
	top20 := min(20, len(cands))

	d := &TermDump{Names: TermFeatureNames}
	col := map[string]int{}
	for i, s := range TermFeatureNames {
		col[s] = i
	}
	for j, t := range terms {
		x := make([]float64, len(TermFeatureNames))
		set := func(name string, v float64) { x[col[name]] = v }
		df := seg.FileBM25.DocFreq(t)
		hits := seg.FileBM25.SearchFilter([]string{t}, len(cands), FileParams(), keepCand)
		pairs := make([][2]float64, 0, len(hits))
		var in20 int
		var sum, sq float64
		top1 := false
		for _, h := range hits {
			i := docs[h.Doc]
			pairs = append(pairs, [2]float64{float64(i), h.Score})
			if i < top20 {
				in20++
				sum += h.Score
				sq += h.Score * h.Score
			}
			top1 = top1 || i == 0
		}
		set("idf", math.Log(1+(n-float64(df)+0.5)/(float64(df)+0.5)))
		set("df_log", math.Log1p(float64(df)))
		set("in_title", b2f(titleT[t]))
		set("title_only", b2f(titleT[t] && !bodyT[t]))
		set("name_term", b2f(names[t]))
		set("change_verb", b2f(changeVerbs[t]))
		set("count_log", math.Log1p(float64(count[t])))
		if p, ok := firstPos[t]; ok && len(all) > 0 {
			set("first_pos", float64(p)/float64(len(all)))
		}
		set("first_line", math.Log1p(float64(lineOf[t])))
		set("len", float64(min(len(t), 20))/10)
		set("has_digit", b2f(strings.IndexFunc(t, unicode.IsDigit) >= 0))
		if s := shapes[t]; s != nil {
			set("camel", b2f(s.camel))
			set("snake", b2f(s.snake))
			set("dotted", b2f(s.dotted))
			set("backticked", b2f(s.backticked))
			set("call", b2f(s.call))
			set("path_like", b2f(s.pathLike))
			set("upper", b2f(s.upper))
			set("ident_whole", b2f(s.whole))
			set("ident_part", b2f(s.part))
			set("symbol", b2f(s.symbol))
			set("sym_files", math.Log1p(float64(s.symFiles)))
		}
		set("compound", b2f(isComp[t]))
		set("path_log", math.Log1p(float64(pathFiles[t])))
		if df > 0 {
			set("path_share", math.Min(1, float64(pathFiles[t])/float64(df)))
		}
		set("top20_share", float64(in20)/float64(top20))
		set("top100_share", float64(len(hits))/float64(len(cands)))
		set("top_lift", math.Log((float64(in20)/float64(top20)+0.01)/(float64(df)/n+0.01)))
		set("top1", b2f(top1))
		if in20 > 1 && sum > 0 {
			m := sum / float64(in20)
			set("top_spread", math.Sqrt(math.Max(0, sq/float64(in20)-m*m))/m)
		}
		set("added", b2f(!plain[t] && !isComp[t]))
		var chunks [][3]float64
		if chunkW[t] > 0 {
			for _, h := range seg.BM25.SearchFilter([]string{t}, len(chunkOf), Params(), keepChunk) {
				chunks = append(chunks, [3]float64{float64(chunkOf[h.Doc]), float64(h.Doc), h.Score})
			}
		}
		d.Terms = append(d.Terms, t)
		d.X = append(d.X, x)
		d.FileQ = append(d.FileQ, j < nFile)
		d.ChunkW = append(d.ChunkW, chunkW[t])
		d.Hits = append(d.Hits, pairs)
		d.ChunkHits = append(d.ChunkHits, chunks)
	}
	return d
}
