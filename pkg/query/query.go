// Package query answers a question about one indexed snapshot with a
// token-budgeted context. It classifies the query (trigger type), runs the
// retrieval arms the trigger's plan asks for (symbol table, identifier-aware
// BM25, dense vectors when configured, graph expansion, history), fuses
// their rankings by weighted reciprocal rank and packs the result into a
// hard o200k token budget with provenance on every chunk.
//
// An Engine holds only an immutable segment and optional adapters, so any
// number of goroutines (and replicas) can serve queries from it.
package query

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"codectx/pkg/classify"
	"codectx/pkg/codectx"
	"codectx/pkg/fusion"
	"codectx/pkg/graph"
	"codectx/pkg/pack"
	"codectx/pkg/query/rank"
	"codectx/pkg/segment"
	"codectx/pkg/tokenize"
	"codectx/pkg/tokens"
)

// Arm names.
const (
	ArmSymbol  = "symbol"
	ArmBM25    = "bm25"
	ArmDense   = "dense"
	ArmGraph   = "graph"
	ArmHistory = "history"
)

// armBM25File is the whole-file BM25 ranking, fused as part of the bm25 arm:
// each file is represented by its best chunk of the chunk ranking (or its
// module header).
const armBM25File = "bm25-file"

// subLists are the rankings fused as part of an arm, by the arm they
// belong to: they share its fusion weight (scaled) and its name in
// signals.
var subLists = map[string]string{armBM25File: ArmBM25, armBM25Path: ArmBM25, armBM25Literal: ArmBM25, armGraphIndex: ArmGraph, armSymbolSuper: ArmSymbol}

// IsList reports whether name is a ranking that Request.Scale can weigh:
// an arm or a sub-list of one.
func IsList(name string) bool {
	_, sub := subLists[name]
	return sub || slices.Contains(AllArms, name)
}

// armNames maps internal list names to arm names (bm25-file is part of bm25).
func armNames(arms []string) []string {
	out := arms[:0:0]
	for _, a := range arms {
		if arm, ok := subLists[a]; ok {
			a = arm
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// mergeSubLists names a fused result's sub-lists by their arm (see
// armNames), each arm once with its best rank.
func mergeSubLists(s *fusion.Scored) {
	sub := false
	for _, a := range s.Arms {
		if _, ok := subLists[a]; ok {
			sub = true
			break
		}
	}
	if !sub {
		return
	}
	if len(s.Ranks) != len(s.Arms) { // not from fusion.RRF: names only
		s.Arms, s.Ranks = armNames(s.Arms), nil
		return
	}
	arms := make([]string, 0, len(s.Arms))
	ranks := make([]int, 0, len(s.Arms))
	for i, a := range s.Arms {
		if arm, ok := subLists[a]; ok {
			a = arm
		}
		if j := slices.Index(arms, a); j >= 0 {
			ranks[j] = min(ranks[j], s.Ranks[i])
			continue
		}
		arms = append(arms, a)
		ranks = append(ranks, s.Ranks[i])
	}
	s.Arms, s.Ranks = arms, ranks
}

// minorWeight is the fusion weight of an arm the trigger's plan omits.
const minorWeight = 0.2

// AllArms lists every arm in a stable order.
var AllArms = []string{ArmSymbol, ArmBM25, ArmDense, ArmGraph, ArmHistory}

// Dense is the port for dense-vector retrieval: it returns chunk ids of the
// segment, best first. With no Dense configured the arm is absent.
type Dense interface {
	Search(ctx context.Context, seg *segment.Segment, query string, k int) ([]int, error)
}

// Request is one query.
type Request struct {
	Query     string
	Budget    int                // o200k tokens; default 8000
	Arms      []string           // arms to run; nil = all available
	Route     bool               // use the classifier's per-trigger weights (default on via NewRequest)
	Languages []codectx.Language // restrict results to these languages; nil = all
	Paths     func(string) bool  // restrict results to the paths it accepts; nil = all
	RRFK      float64            // default 60
	// Scale multiplies the fusion weight of the named rankings (arms or
	// their sub-lists: bm25-file, bm25-path, bm25-literal, graph-index;
	// see IsList) after routing. It exists to measure and tune weights: codectx eval
	// --configs. Nil leaves the built-in weights.
	Scale map[string]float64
	// Sent are chunks the caller already has (a session's earlier packs):
	// Pack leaves out every candidate overlapping one of them in the same
	// file at the same commit, and names them in AlreadySent instead.
	Sent []Sent
	// Ranker picks the file ranking: "" or RankLearned reranks the top
	// files with the engine's model (the shipped one by default),
	// RankRRF keeps the fused RRF order.
	Ranker string
	// Features asks Search to return the learned ranker's candidates with
	// their feature vectors (Ranking.Candidates), for codectx eval
	// --features.
	Features bool
	// FeatureDepth, with Features, is how many top files get feature
	// vectors (at least the model's depth; only the model's depth are
	// reranked).
	FeatureDepth int
	// ChunkRanker picks the order of chunks inside a file: "" or
	// RankLearned uses the engine's chunk model, RankRRF the fused order.
	// ChunkFeatures asks Search for the chunk ranker's candidates with
	// their features (Ranking.Chunks), for codectx eval --chunk-features.
	ChunkRanker   string
	ChunkFeatures bool
	// Depth is how many chunks the BM25 chunk list takes (default 200)
	// and FileDepth how many files the whole-file BM25 and file-name lists
	// take (default 50): more reach more candidate files, at the cost of
	// longer lists. They exist to measure first-stage recall (codectx eval
	// --configs "depth", "file_depth").
	Depth, FileDepth int
	// ClassNames lets the file names of languages whose files are named
	// after their class (Java) into the file-name list, and Supertypes
	// adds the type-hierarchy list (the supertypes and subtypes of the
	// classes the query names). Both are off by default; they exist to
	// measure first-stage recall (codectx eval --configs "class_names",
	// "supertypes"; docs/benchmarks.md, fifth round).
	ClassNames, Supertypes bool
	// Shape overrides the pack's breadth pass (nil: DefaultShape). It
	// exists to measure the pack: codectx eval --configs "pack".
	Shape *Shape
	// Merge picks how PackAll orders the files of several repositories:
	// "" weighs each repository's by its gate (repoGates), MergeScore
	// takes the fused scores alone (what every query did before), "gate:X"
	// raises the gates to X (to measure; "" is gate:0.5). It exists to
	// measure the merge: codectx eval --org --configs "merge".
	Merge string
}

// Shape is the pack's breadth pass (pack.Options' Lead, Deep, DeepShare
// and TailStubs): the best chunks of the first Lead files whole, more of
// the first Deep files up to DeepShare of the budget, then the other
// files' best chunks as stubs when TailStubs is set.
type Shape struct {
	Lead      int     `json:"lead"`
	Deep      int     `json:"deep"`
	DeepShare float64 `json:"deep_share"`
	TailStubs bool    `json:"tail_stubs"`
}

// DefaultShape is the shape every query packs with, chosen on the
// training tasks (docs/benchmarks.md, "Changed lines in the pack").
var DefaultShape = Shape{Lead: 4, Deep: 1, DeepShare: 0.1, TailStubs: true}

// Sent is a chunk an earlier pack of a session emitted.
type Sent struct {
	Repo      string `json:"repo"`
	Commit    string `json:"commit"`
	Path      string `json:"path"`
	StartLine int    `json:"start_line"`
	EndLine   int    `json:"end_line"`
	Symbol    string `json:"symbol,omitempty"`
	Tokens    int    `json:"tokens"`
	// Seq numbers the session's queries, from 1: the chunks of one query
	// share it, in the order it ranked them (0: written before queries
	// were numbered).
	Seq int `json:"seq,omitempty"`
	// Outline: what was sent outlined the span, its members cut to their
	// declarations; it does not count as sending them.
	Outline bool `json:"outline,omitempty"`
}

// MergeScore is the Request.Merge that orders every repository's files
// and chunks by their fused scores alone, as if one ranking.
const MergeScore = "score"

// Rankers.
const (
	RankLearned = "learned"
	RankRRF     = "rrf"
)

// Engine answers queries over one segment.
type Engine struct {
	Seg   *segment.Segment
	Dense Dense
	Count func(string) int // token counter; default o200k
	Model *rank.Model      // learned file ranker; nil = the shipped model
	// ChunkModel orders the chunks inside the top files (chunkrank.go);
	// nil keeps the fused order.
	ChunkModel *rank.Model
	// DegradeDense: when the dense arm fails (its embedder or vector
	// store) for a request that names no arms, the other arms answer and
	// Ranking.Degraded says why the dense arm is missing. Otherwise (and
	// always for a request that names the dense arm) the search fails
	// with an *ArmError. Servers set it; eval does not, so that a
	// measurement never silently goes without the arm.
	DegradeDense bool
}

var shipped = sync.OnceValues(func() (*rank.Model, error) { return rank.Shipped(FeatureNames) })

// model returns the engine's learned ranker.
func (e *Engine) model() (*rank.Model, error) {
	if e.Model != nil {
		return e.Model, nil
	}
	return shipped()
}

// File is one ranked file of a response.
type File struct {
	Repo    string   `json:"repo,omitempty"` // set in answers over several repositories
	Path    string   `json:"path"`
	Score   float64  `json:"score"`
	Signals []string `json:"signals"`
}

// Chunk is one packed chunk of a response (the JSON schema is documented in
// docs/query-json.md).
type Chunk struct {
	Repo        string   `json:"repo"`
	Commit      string   `json:"commit"`
	Path        string   `json:"path"`
	StartLine   int      `json:"start_line"`
	EndLine     int      `json:"end_line"`
	Symbol      string   `json:"symbol"`
	Kind        string   `json:"kind"`
	Granularity string   `json:"granularity"`
	Tokens      int      `json:"tokens"`
	Score       float64  `json:"score"`
	Signals     []string `json:"signals"`
	Provenance  string   `json:"provenance"`
	Text        string   `json:"text"`
	// Outline: Text outlines the span (a class with its members cut to
	// their declarations), so a session records it as sent without its
	// members.
	Outline bool `json:"-"`
}

// Response is the answer to a Request.
type Response struct {
	Query      string   `json:"query"`
	Repo       string   `json:"repo"`            // "" when several repositories answered
	Commit     string   `json:"commit"`          // "" when several repositories answered
	Repos      []string `json:"repos,omitempty"` // the repositories searched, when several
	Trigger    string   `json:"trigger"`
	Confidence float64  `json:"confidence"`
	Symbols    []string `json:"symbols,omitempty"`
	Arms       []string `json:"arms"`
	Budget     int      `json:"budget"`
	Tokens     int      `json:"tokens"`
	Chunks     []Chunk  `json:"chunks"`
	Files      []File   `json:"files"`
	// Commits are the commits a history question's answer lists, most
	// relevant first; the context opens with as many of them as fit in a tenth of
	// the budget.
	Commits []Commit       `json:"commits,omitempty"`
	Dropped int            `json:"dropped"`
	Timings map[string]int `json:"timings_us"`
	Context string         `json:"context"`
	// AlreadySent names (by provenance) the chunks of the request's Sent
	// that this pack found relevant again and left out; TokensSaved is
	// what they cost when they were sent.
	AlreadySent []string `json:"already_sent,omitempty"`
	TokensSaved int      `json:"tokens_saved,omitempty"`
	// Stale is set when the store could not be read and the answer comes
	// from the last HEAD this server knew; StaleReason says why.
	Stale       bool   `json:"stale,omitempty"`
	StaleReason string `json:"stale_reason,omitempty"`
	// Degraded is set when an arm the request did not name failed (the
	// embedder or the vector store of the dense arm) and the answer comes
	// from the other arms; it says which arm and why.
	Degraded string `json:"degraded,omitempty"`
}

// denseDeeper is how much deeper the dense arm searches again when a
// request's languages or paths filter out most of its hits.
const denseDeeper = 8

// ArmError is the failure of one retrieval arm: a fault of the server's
// embedder or vector store, not of the request.
type ArmError struct {
	Arm string
	Err error
}

func (e *ArmError) Error() string { return "query: " + e.Arm + ": " + e.Err.Error() }
func (e *ArmError) Unwrap() error { return e.Err }

// Ranking is the fused ranking before packing: what eval measures.
type Ranking struct {
	Class classify.Result
	Arms  []string
	Fused []fusion.Scored // chunk ids as decimal strings
	Files []File
	// Commits are the history's commits a history question lists
	// (TEMPORAL_HISTORY queries only), most relevant first.
	Commits []Commit
	Timings map[string]int
	// Degraded says which arm failed and was left out of the ranking,
	// and why ("" when every arm asked for ran).
	Degraded string
	// Candidates are the files the learned ranker scored, in RRF order,
	// with their features (only when Request.Features).
	Candidates []Candidate
	// Pool is every file of the fused ranking in RRF order, before
	// reranking, and Deep the files of deeper single lists (DeepLists)
	// best first: where the first stage puts each file (only when
	// Request.Features).
	Pool []string
	Deep map[string][]string
	// Terms are the query's whole-file BM25 terms with their features and
	// scores in each candidate (only when Request.Features).
	Terms *TermDump
	// Chunks are the chunks of the top files with the chunk ranker's
	// features (only when Request.ChunkFeatures).
	Chunks []ChunkCandidate
	// Across are the files ExpandAcross added, each with the index of the
	// part whose top file pulled it in: PackAll weighs them by that
	// part's gate, not their own repository's.
	Across map[string]int
}

// Search runs classification, retrieval and fusion.
func (e *Engine) Search(ctx context.Context, req Request) (*Ranking, error) {
	seg := e.Seg
	if seg == nil {
		return nil, fmt.Errorf("query: no segment")
	}
	q := strings.TrimSpace(req.Query)
	if q == "" {
		return nil, fmt.Errorf("query: empty query")
	}
	tm := map[string]int{}
	t0 := time.Now()
	cls := classify.Classify(q, seg)
	tm["classify"] = int(time.Since(t0).Microseconds())

	arms := req.Arms
	if arms == nil {
		arms = AllArms
	}
	want := map[string]bool{}
	for _, a := range arms {
		want[a] = true
	}
	if e.Dense == nil {
		delete(want, ArmDense)
	}
	keep := e.keepFunc(req.Languages, req.Paths)

	var lists []fusion.Ranked
	add := func(arm string, ids []int) {
		if len(ids) == 0 {
			return
		}
		r := fusion.Ranked{Arm: arm, IDs: make([]string, 0, len(ids))}
		for _, id := range ids {
			r.IDs = append(r.IDs, strconv.Itoa(id))
		}
		lists = append(lists, r)
	}
	depth := 200
	if req.Depth > 0 {
		depth = req.Depth
	}
	fileDepth := 50
	if req.FileDepth > 0 {
		fileDepth = req.FileDepth
	}
	// Every arm is bounded by the segment, but a client that went away
	// should not keep a core busy: check between arms (and inside the
	// literal scan of every chunk).
	stop := func() error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("query: %w", err)
		}
		return nil
	}
	if err := stop(); err != nil {
		return nil, err
	}
	var bm25Scores []float64
	var fileBM map[string]float64
	if want[ArmSymbol] {
		t := time.Now()
		add(ArmSymbol, e.symbolArm(cls, keep))
		if req.Supertypes {
			add(armSymbolSuper, e.superArm(cls.Symbols, keep))
		}
		tm[ArmSymbol] = int(time.Since(t).Microseconds())
	}
	if want[ArmBM25] {
		t := time.Now()
		var chunks []int
		chunks, bm25Scores = e.bm25Arm(q, depth, keep)
		add(ArmBM25, chunks)
		var fileIDs []int
		fileIDs, fileBM = e.fileBM25Arm(q, chunks, fileDepth, keep)
		add(armBM25File, fileIDs)
		add(armBM25Path, e.namesArm(q, cls.Scope, chunks, fileDepth, keep, req.ClassNames))
		lits, err := e.literalArm(ctx, q, keep)
		if err != nil {
			return nil, fmt.Errorf("query: %w", err)
		}
		add(armBM25Literal, lits)
		tm[ArmBM25] = int(time.Since(t).Microseconds())
	}
	if err := stop(); err != nil {
		return nil, err
	}
	var degraded string
	if want[ArmDense] {
		t := time.Now()
		ids, err := e.Dense.Search(ctx, seg, q, depth)
		if err == nil && keep != nil && len(ids) >= depth && len(filterIDs(ids, keep)) < depth {
			// The store ranks the whole repository; the languages or
			// paths asked for left fewer than depth of its hits (a
			// Python function below 300 Go ones was never seen): once
			// more, deeper.
			if more, merr := e.Dense.Search(ctx, seg, q, depth*denseDeeper); merr == nil {
				ids = more
			}
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("query: %w", ctx.Err())
		case err != nil && (req.Arms != nil || !e.DegradeDense):
			// The caller asked for the dense arm by name: its failure is
			// the answer.
			return nil, &ArmError{Arm: ArmDense, Err: err}
		case err != nil:
			// The embedder or the vector store failed (a server down, a
			// lost shard): the other arms still answer, and the answer
			// says the dense arm is missing from it.
			degraded = (&ArmError{Arm: ArmDense, Err: err}).Error()
		default:
			add(ArmDense, filterIDs(ids, keep))
		}
		tm[ArmDense] = int(time.Since(t).Microseconds())
	}
	if err := stop(); err != nil {
		return nil, err
	}
	if want[ArmHistory] {
		t := time.Now()
		add(ArmHistory, e.historyArm(q, cls, keep))
		tm[ArmHistory] = int(time.Since(t).Microseconds())
	}
	if err := stop(); err != nil {
		return nil, err
	}
	weights := map[string]float64{}
	if req.Route {
		for _, a := range AllArms {
			// An arm the plan leaves out still runs, at a low weight.
			weights[a] = minorWeight
		}
		for k, v := range cls.Plan.Weights {
			weights[k] = v
		}
	}
	bw := 1.0
	if w, ok := weights[ArmBM25]; ok {
		bw = w
	}
	weights[armBM25File] = bw
	weights[armBM25Path] = bw * pathWeight
	weights[armBM25Literal] = bw
	weights[armGraphIndex] = bw * indexWeight
	sw := 1.0
	if w, ok := weights[ArmSymbol]; ok {
		sw = w
	}
	weights[armSymbolSuper] = sw * superWeight
	for name, f := range req.Scale {
		w, ok := weights[name]
		if !ok {
			w = 1 // unrouted: every list weighs 1
		}
		weights[name] = w * f
	}
	decl := declPrior(seg, q)
	if want[ArmGraph] && seg.Graph != nil {
		t := time.Now()
		// Seeds are the other arms' fused ranking, priors applied, as the
		// final ranking would show it.
		// The seeds live in a pooled buffer: the arms keep only ids.
		sp, _ := seedPool.Get().(*[]fusion.Scored)
		if sp == nil {
			sp = new([]fusion.Scored)
		}
		seeds := fusion.AppendRRF((*sp)[:0], lists, weights, req.RRFK)
		applyPriors(seg, seeds, decl != nil)
		add(ArmGraph, e.graphArm(seeds, cls, keep))
		add(armGraphIndex, e.indexArm(q, seeds, keep))
		clear(seeds) // IDs and arms
		*sp = seeds[:0]
		seedPool.Put(sp)
		tm[ArmGraph] = int(time.Since(t).Microseconds())
		if err := stop(); err != nil {
			return nil, err
		}
	}
	fused := fusion.RRF(lists, weights, req.RRFK)
	for i := range fused {
		mergeSubLists(&fused[i])
	}
	applyPriors(seg, fused, decl != nil)
	used := make([]string, 0, len(lists))
	for _, l := range lists {
		if _, sub := subLists[l.Arm]; !sub {
			used = append(used, l.Arm)
		}
	}
	files := e.rankFiles(fused)
	var pool []string
	if req.Features {
		pool = make([]string, len(files))
		for i, f := range files {
			pool[i] = f.Path
		}
	}
	var cands []Candidate
	if req.Ranker != RankRRF || req.Features {
		if req.Ranker != "" && req.Ranker != RankRRF && req.Ranker != RankLearned {
			return nil, fmt.Errorf("query: unknown ranker %q", req.Ranker)
		}
		t := time.Now()
		m, err := e.model()
		if err != nil {
			return nil, fmt.Errorf("query: %w", err)
		}
		n := m.Depth
		if req.Features {
			n = max(n, req.FeatureDepth)
		}
		cands = e.features(featureInput{q: q, cls: cls, lists: lists, bm25: bm25Scores, files: files, keep: keep, n: n, fileBM: fileBM, decl: decl,
			all: req.Features || m.Uses(costlyFeatures...)})
		if req.Ranker != RankRRF {
			rerank(files, cands[:min(m.Depth, len(cands))], m.Score)
		}
		tm["rank"] = int(time.Since(t).Microseconds())
	}
	var chunks []ChunkCandidate
	var shares map[int]float64
	if cm := e.ChunkModel; req.ChunkFeatures || (cm != nil && req.ChunkRanker != RankRRF) {
		t := time.Now()
		chunks = e.chunkFeatures(q, lists, bm25Scores, fused, files)
		if cm != nil && req.ChunkRanker != RankRRF {
			shares = chunkOrder(chunks, cm.Score)
		}
		tm["chunks"] = int(time.Since(t).Microseconds())
	}
	tm["total"] = int(time.Since(t0).Microseconds())
	rk := &Ranking{Class: cls, Arms: used, Fused: orderByFile(seg, fused, files, shares), Files: files, Timings: tm, Degraded: degraded}
	if req.ChunkFeatures {
		rk.Chunks = chunks
	}
	if want[ArmHistory] {
		rk.Commits = e.commits(q, cls, files)
	}
	if req.Features {
		rk.Candidates, rk.Pool, rk.Deep = cands, pool, e.deepLists(q, keep)
		rk.Terms = e.termDump(q, cands)
	}
	return rk, nil
}

// Query runs Search and packs the result into the budget.
func (e *Engine) Query(ctx context.Context, req Request) (*Response, error) {
	if req.Budget <= 0 {
		req.Budget = 8000
	}
	rk, err := e.Search(ctx, req)
	if err != nil {
		return nil, err
	}
	return e.Pack(rk, req), nil
}

// Pack packs a ranking from Search into req.Budget (default 8000). One
// ranking can be packed at several budgets without searching again.
func (e *Engine) Pack(rk *Ranking, req Request) *Response {
	out := PackAll([]Part{{Seg: e.Seg, Ranking: rk}}, req, e.Count)
	out.Repo, out.Commit = e.Seg.Meta.Repo, e.Seg.Meta.Commit
	out.Repos = nil
	return out
}

// Part is one repository's ranking in a query over several repositories.
type Part struct {
	Seg     *segment.Segment
	Ranking *Ranking
}

// PackAll fuses the rankings of several repositories (each from Search
// over its own segment) into one ranking and packs it into one budget:
// candidates are merged by their fused scores, each repository's weighed
// by its gate (repoGates; req.Merge picks another merge, an unknown one
// is taken as MergeScore), so every repository's chunks compete for the
// same tokens, and each packed chunk names its repository. count is the
// token counter (nil: o200k). With one part it is Pack, but for Repos,
// which it sets (the API's answers name the repositories searched; Pack,
// the in-process path, leaves it out). The trigger and symbols are those
// of the part with the highest gate, the first among equals (the
// classifier sees the same text everywhere; only its symbol lookups
// differ).
func PackAll(parts []Part, req Request, count func(string) int) *Response {
	if req.Budget <= 0 {
		req.Budget = 8000
	}
	t := time.Now()
	// The packer counts every candidate's tokens; beyond this many it could
	// only add stubs of files far down the ranking.
	limit := max(100, req.Budget/20)
	// The candidates live in a pooled slice: what the packer returns
	// copies them (see candPool).
	cp, _ := candPool.Get().(*[]pack.Candidate)
	if cp == nil {
		cp = new([]pack.Candidate)
	}
	all := (*cp)[:0]
	defer func() {
		if cap(all) > maxPooledCands {
			return
		}
		clear(all[:cap(all)]) // drop the candidates' strings and Preps
		*cp = all[:0]
		candPool.Put(cp)
	}()
	var files []File
	var commits []Commit
	var arms []string
	seenArm := map[string]bool{}
	timings := map[string]int{}
	factor := func(int) float64 { return 1 }
	lead := 0 // the part whose trigger and symbols the answer reports
	if x, err := mergeExponent(req.Merge); len(parts) > 1 && err == nil && x > 0 {
		gates := repoGates(parts, req.Query)
		factor = func(i int) float64 { return math.Pow(gates[i], x) }
		for i, g := range gates {
			if g > gates[lead] {
				lead = i
			}
		}
	}
	for pi, p := range parts {
		seg, rk := p.Seg, p.Ranking
		g := factor(pi)
		gate := func(path string) float64 {
			if from, ok := rk.Across[path]; ok && from >= 0 && from < len(parts) {
				return factor(from)
			}
			return g
		}
		fused := rk.Fused
		if len(fused) > limit {
			fused = fused[:limit]
		}
		preps := packPreps(seg)
		all = slices.Grow(all, len(fused))
		for _, s := range fused {
			id, _ := strconv.Atoi(s.ID)
			c := seg.Chunks[id]
			all = append(all, pack.Candidate{
				Repo: seg.Meta.Repo, Commit: seg.Meta.Commit, Path: c.Path,
				StartLine: c.StartLine, EndLine: c.EndLine, Symbol: c.Name, Kind: string(c.Kind),
				Signature: c.Signature, Doc: c.Doc, Body: c.Body, Score: s.Score * gate(c.Path), Signals: s.Arms,
				Outline: c.Outlined(),
			})
			if count == nil {
				all[len(all)-1].Prep = preps.get(seg, id, &all[len(all)-1])
			}
		}
		for _, f := range rk.Files {
			if len(parts) > 1 {
				f.Repo = seg.Meta.Repo
				f.Score *= gate(f.Path)
			}
			files = append(files, f)
		}
		for _, c := range rk.Commits {
			if len(parts) > 1 {
				c.Repo = seg.Meta.Repo
			}
			commits = append(commits, c)
		}
		for _, a := range rk.Arms {
			if !seenArm[a] {
				seenArm[a] = true
				arms = append(arms, a)
			}
		}
		for k, v := range rk.Timings {
			timings[k] += v
		}
	}
	all, already, saved := leaveOutSent(all, req.Sent)
	if len(parts) > 1 {
		slices.SortStableFunc(all, func(a, b pack.Candidate) int { return cmp.Compare(b.Score, a.Score) })
		if len(all) > limit {
			all = all[:limit]
		}
		slices.SortStableFunc(files, func(a, b File) int { return cmp.Compare(b.Score, a.Score) })
	}
	// The context reads in the ranking's order, as files[] does. The budget
	// goes first where the change most likely is: the best chunks of the
	// first files whole and more of the top file; every other file's best
	// chunk comes as a stub, made whole at the end where it fits
	// (docs/benchmarks.md, "Changed lines in the pack").
	sh := DefaultShape
	if req.Shape != nil {
		sh = *req.Shape
	}
	opt := pack.Options{Budget: req.Budget, FileFirst: true, Ranked: true, Lead: sh.Lead, Deep: sh.Deep, DeepShare: sh.DeepShare, TailStubs: sh.TailStubs}
	if count != nil {
		opt.Count = count
	}
	if len(parts) > 1 {
		rescore(commits, files)
		commits = topCommits(commits)
	}
	if len(commits) > 0 {
		head := fmt.Sprintf("%d repositories", len(parts))
		if len(parts) == 1 {
			head = parts[0].Seg.Meta.Repo + "@" + short(parts[0].Seg.Meta.Commit)
		}
		cnt := opt.Count
		if cnt == nil {
			cnt = tokens.Count
		}
		opt.Preamble, _ = commitPreamble(commits, head, req.Budget, cnt)
	}
	res, text := pack.PackText(all, opt)
	timings["pack"] = int(time.Since(t).Microseconds())
	out := &Response{Query: req.Query, Arms: arms, Budget: req.Budget, Tokens: res.Tokens, Files: files, Commits: commits, Dropped: res.Dropped, Timings: timings, Context: text,
		AlreadySent: already, TokensSaved: saved}
	if len(parts) > 0 {
		rk := parts[lead].Ranking
		out.Trigger, out.Confidence, out.Symbols = string(rk.Class.Trigger), rk.Class.Confidence, rk.Class.Symbols
	}
	for _, p := range parts {
		out.Repos = append(out.Repos, p.Seg.Meta.Repo)
		if out.Degraded == "" && p.Ranking != nil {
			out.Degraded = p.Ranking.Degraded
		}
	}
	if len(parts) == 1 {
		out.Repo, out.Commit = parts[0].Seg.Meta.Repo, parts[0].Seg.Meta.Commit
	}
	out.Chunks = make([]Chunk, 0, len(res.Chunks))
	for _, p := range res.Chunks {
		out.Chunks = append(out.Chunks, Chunk{
			Repo: p.Repo, Commit: p.Commit, Path: p.Path, StartLine: p.StartLine, EndLine: p.EndLine,
			Symbol: p.Symbol, Kind: p.Kind, Granularity: string(p.Granularity), Tokens: p.Tokens,
			Score: p.Score, Signals: p.Signals, Provenance: pack.Provenance(p.Candidate), Text: p.Text,
			Outline: p.Outline,
		})
	}
	return out
}

// candPool keeps PackAll's candidate slices between queries. Nothing a
// pack returns points into the slice (a packed chunk copies its
// candidate), so it is cleared and pooled when PackAll returns; a slice
// above maxPooledCands (a query over many repositories) is left to the
// collector.
var candPool sync.Pool

const maxPooledCands = 4096

// prepTable holds the packer's Prep of each chunk of a segment asked for
// so far (pack.Prep: a chunk's renderings and what counting them learnt),
// up to maxPreps of them; its bytes are counted in the segment's heap.
type prepTable struct {
	preps []atomic.Pointer[pack.Prep] // by chunk id
	n     atomic.Int64
}

// maxPreps bounds the Preps of one segment (a segment's first 16,384
// chunks to reach the packer keep theirs).
const maxPreps = 1 << 14

func packPreps(seg *segment.Segment) *prepTable {
	return seg.Memo("query.packPreps", func() any {
		return &prepTable{preps: make([]atomic.Pointer[pack.Prep], len(seg.Chunks))}
	}).(*prepTable)
}

// get returns the Prep of chunk id (c is its candidate), made on first
// use; nil once the table is full.
func (t *prepTable) get(seg *segment.Segment, id int, c *pack.Candidate) *pack.Prep {
	if id < 0 || id >= len(t.preps) {
		return nil
	}
	if p := t.preps[id].Load(); p != nil {
		return p
	}
	if t.n.Load() >= maxPreps {
		return nil
	}
	p := pack.NewPrep(*c, seg.MemoGrew)
	if !t.preps[id].CompareAndSwap(nil, p) {
		return t.preps[id].Load()
	}
	t.n.Add(1)
	seg.MemoGrew(p.Size())
	return p
}

// leaveOutSent drops the candidates that overlap a chunk already sent (same
// repository, commit and file) and returns the provenance of the sent
// chunks that were hit, each once, and the tokens they cost.
func leaveOutSent(cands []pack.Candidate, sent []Sent) ([]pack.Candidate, []string, int) {
	if len(sent) == 0 {
		return cands, nil, 0
	}
	type fileKey struct{ repo, commit, path string }
	byFile := map[fileKey][]int{}
	for i, s := range sent {
		k := fileKey{s.Repo, s.Commit, s.Path}
		byFile[k] = append(byFile[k], i)
	}
	hit := make([]bool, len(sent))
	var already []string
	saved := 0
	kept := cands[:0:0]
	for _, c := range cands {
		drop := false
		for _, i := range byFile[fileKey{c.Repo, c.Commit, c.Path}] {
			s := sent[i]
			if c.StartLine > s.EndLine || c.EndLine < s.StartLine {
				continue
			}
			if (s.Outline || c.Outline) && !(s.Outline && c.Outline && s.StartLine == c.StartLine && s.EndLine == c.EndLine) {
				// As in the pack: an outline neither holds its members
				// nor is held by them. A class outline sent is not its
				// methods' bodies, and a method sent is not the outline.
				continue
			}
			drop = true
			if !hit[i] {
				hit[i] = true
				already = append(already, pack.Provenance(pack.Candidate{Repo: s.Repo, Commit: s.Commit, Path: s.Path, StartLine: s.StartLine, EndLine: s.EndLine}))
				saved += s.Tokens
			}
		}
		if !drop {
			kept = append(kept, c)
		}
	}
	return kept, already, saved
}

func (e *Engine) keepFunc(langs []codectx.Language, paths func(string) bool) func(int) bool {
	if len(langs) == 0 && paths == nil {
		return nil
	}
	ok := map[codectx.Language]bool{}
	for _, l := range langs {
		ok[l] = true
	}
	memo := map[string]bool{}
	return func(id int) bool {
		c := e.Seg.Chunks[id]
		if len(langs) > 0 && !ok[c.Language] {
			return false
		}
		if paths == nil {
			return true
		}
		keep, seen := memo[c.Path]
		if !seen {
			keep = paths(c.Path)
			memo[c.Path] = keep
		}
		return keep
	}
}

func filterIDs(ids []int, keep func(int) bool) []int {
	if keep == nil {
		return ids
	}
	out := ids[:0:0]
	for _, id := range ids {
		if keep(id) {
			out = append(out, id)
		}
	}
	return out
}

// symbolArm looks the query's symbols up in the symbol table. A qualified
// symbol ("value::Serializer::serialize_map", "requests.Session.send") is
// tried whole, then by shorter and shorter suffixes; the leading parts that
// did not match the name must then match the file path ("value" ->
// src/value/ser.rs), which ranks the right one of several same-named
// symbols first. Prefix matches come last.
func (e *Engine) symbolArm(cls classify.Result, keep func(int) bool) []int {
	seen := map[int]bool{}
	var exact, fuzzy []int
	syms := cls.Symbols
	// A commit scope that names a symbol ("fix(withBase): ...") is one.
	if sc := cls.Scope; sc != "" && !slices.Contains(syms, sc) && e.Seg.HasSymbol(sc) {
		syms = append(slices.Clip(syms), sc)
	}
	for _, s := range syms {
		parts := symbolParts(s)
		if len(parts) == 0 {
			continue
		}
		for i := 0; i < len(parts); i++ {
			suffix := strings.Join(parts[i:], ".")
			if i == len(parts)-1 && len(parts) > 1 && len(suffix) <= 2 {
				break
			}
			ids := e.Seg.Lookup(suffix)
			if len(ids) == 0 {
				continue
			}
			ids = e.byQualifier(ids, parts[:i])
			for _, id := range ids {
				if !seen[id] {
					seen[id] = true
					if i == 0 {
						exact = append(exact, id)
					} else {
						fuzzy = append(fuzzy, id)
					}
				}
			}
			break
		}
		if len(s) >= 4 {
			for _, id := range e.Seg.LookupPrefix(strings.Join(parts, "."), 8) {
				if !seen[id] {
					seen[id] = true
					fuzzy = append(fuzzy, id)
				}
			}
		}
	}
	return filterIDs(append(exact, fuzzy...), keep)
}

// symbolParts splits a qualified symbol at ".", "::", "#" and "/" and drops
// receiver decoration: "(*Router).Mount" -> [router mount].
func symbolParts(s string) []string {
	s = segment.NormalizeName(s)
	f := strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '/' || r == ':' || r == '#' || r == ' ' })
	if len(f) > maxSymbolParts {
		// No real qualified name is this deep; keeping only its tail keeps
		// the suffix search linear in the query ("A.A.A..." of 8 KB).
		f = f[len(f)-maxSymbolParts:]
	}
	return f
}

// maxSymbolParts bounds the parts of one symbol the symbol arm tries.
const maxSymbolParts = 8

// byQualifier keeps, of several same-named symbols, those whose path or
// name contains the most qualifier parts ("value" in
// value::Serializer::serialize_map selects src/value/ser.rs). When no
// candidate matches any qualifier, all are kept.
func (e *Engine) byQualifier(ids []int, quals []string) []int {
	if len(quals) == 0 || len(ids) < 2 {
		return ids
	}
	score := func(id int) int {
		c := e.Seg.Chunks[id]
		hay := strings.ToLower(c.Path + " " + c.Name)
		n := 0
		for _, q := range quals {
			if strings.Contains(hay, q) {
				n++
			}
		}
		return n
	}
	best := 0
	for _, id := range ids {
		best = max(best, score(id))
	}
	var out []int
	for _, id := range ids {
		if score(id) == best {
			out = append(out, id)
		}
	}
	return out
}

func (e *Engine) bm25Arm(q string, k int, keep func(int) bool) ([]int, []float64) {
	terms, weights := e.bm25Query(q)
	if len(terms) == 0 {
		return nil, nil
	}
	var hits []int
	var scores []float64
	for _, h := range e.Seg.BM25.SearchWeighted(terms, weights, k, Params(), keep) {
		hits = append(hits, h.Doc)
		scores = append(scores, h.Score)
	}
	return hits, scores
}

// bm25Query returns the chunk BM25 arm's query terms and their weights:
// the query's tokens, the identifiers its prose spells and the index's
// roots of its rare words (weight 1), and its abbreviations' expansions
// (abbrevWeight).
func (e *Engine) bm25Query(q string) ([]string, []float64) {
	terms := tokenize.QueryTokens(q)
	terms = append(terms, compoundTerms(q, e.Seg.BM25, terms)...)
	terms = append(terms, rootTerms(e.Seg.BM25, terms)...)
	if len(terms) == 0 {
		return nil, nil
	}
	weights := make([]float64, len(terms), 2*len(terms))
	for i := range weights {
		weights[i] = 1
	}
	for _, a := range abbrevTerms(q, terms) {
		terms = append(terms, a)
		weights = append(weights, abbrevWeight)
	}
	return terms, weights
}

// fileBM25Arm also returns the whole-file BM25 score of each file it ranks.
func (e *Engine) fileBM25Arm(q string, chunks []int, k int, keep func(int) bool) ([]int, map[string]float64) {
	seg := e.Seg
	if seg.FileBM25 == nil {
		return nil, nil
	}
	terms := tokenize.QueryTokens(q)
	terms = append(terms, compoundTerms(q, seg.FileBM25, terms)...)
	if len(terms) == 0 {
		return nil, nil
	}
	best := bestChunks(seg, chunks)
	fileKeep := fileFilter(seg, keep)
	hits := seg.FileBM25.SearchFilter(terms, k, FileParams(), fileKeep)
	ids := make([]int, 0, len(hits))
	scores := make(map[string]float64, len(hits))
	for _, h := range hits {
		if id, ok := fileChunk(seg.Files[h.Doc], best); ok {
			ids = append(ids, id)
			scores[seg.Files[h.Doc].Path] = h.Score
		}
	}
	return ids, scores
}

// bestChunks maps each file of a chunk ranking to its best chunk.
func bestChunks(seg *segment.Segment, chunks []int) map[string]int {
	best := map[string]int{}
	for _, id := range chunks {
		p := seg.Chunks[id].Path
		if _, ok := best[p]; !ok {
			best[p] = id
		}
	}
	return best
}

// fileChunk is the chunk that stands for file f in a file ranking: its best
// chunk of the chunk ranking, else its module chunk.
func fileChunk(f segment.File, best map[string]int) (int, bool) {
	if id, ok := best[f.Path]; ok {
		return id, true
	}
	if len(f.Chunks) > 0 {
		return f.Chunks[0], true
	}
	return 0, false
}

// graphArm expands the top files of the other arms through import, call and
// type edges; each reached file contributes its best-connected chunk.
func (e *Engine) graphArm(seeds []fusion.Scored, cls classify.Result, keep func(int) bool) []int {
	seg := e.Seg
	// The trigger's adaptive k sets how many top files seed the walk: a
	// symbol question expands from few, a concept question from more.
	nSeeds := min(max(cls.K/2, 3), 10)
	fileSeeds := map[string]float64{}
	symSeeds := map[int]float64{}
	for i, s := range seeds {
		if len(fileSeeds) >= nSeeds {
			break
		}
		id, _ := strconv.Atoi(s.ID)
		p := seg.Chunks[id].Path
		if _, ok := fileSeeds[p]; !ok {
			fileSeeds[p] = 1 / float64(1+i)
		}
		symSeeds[id] = 1 / float64(1+i)
	}
	if len(fileSeeds) == 0 {
		return nil
	}
	depth := cls.Plan.GraphDepth
	sc, _ := graphScratchPool.Get().(*graphScratch)
	if sc == nil {
		sc = new(graphScratch)
	}
	defer func() {
		clear(sc.files) // paths
		sc.reached, sc.files, sc.cands = sc.reached[:0], sc.files[:0], sc.cands[:0]
		graphScratchPool.Put(sc)
	}()
	sc.reached = seg.Graph.AppendReachSymbols(sc.reached[:0], symSeeds, depth)
	sc.files = seg.Graph.AppendReachFiles(sc.files[:0], fileSeeds, depth)
	reached, files := sc.reached, sc.files
	cands := slices.Grow(sc.cands[:0], len(reached)+len(files))
	defer func() { sc.cands = cands[:0] }()
	for _, r := range reached {
		if r.ID >= 0 && r.ID < len(seg.Chunks) {
			cands = append(cands, graphCand{r.ID, r.Score})
		}
	}
	// A file's module header (imports and package doc) stands for it,
	// unless the symbol walk reached that chunk already.
	syms := len(cands)
	for _, r := range files {
		f, ok := seg.File(r.Path)
		if !ok || len(f.Chunks) == 0 {
			continue
		}
		id := f.Chunks[0]
		if _, dup := slices.BinarySearchFunc(cands[:syms], id, func(c graphCand, id int) int { return c.id - id }); !dup {
			cands = append(cands, graphCand{id, r.Score * 0.9})
		}
	}
	// Only the best 50 are kept: select them, then sort those.
	byScore := func(a, b graphCand) int { return cmp.Or(cmp.Compare(b.score, a.score), a.id-b.id) }
	if len(cands) > 50 {
		cands = topK(cands, 50, byScore)
	}
	slices.SortFunc(cands, byScore)
	ids := make([]int, 0, len(cands))
	for _, c := range cands {
		ids = append(ids, c.id)
	}
	return filterIDs(ids, keep)
}

// seedPool keeps the graph arm's seed rankings between queries.
var seedPool sync.Pool

// graphCand is a candidate of the graph arm.
type graphCand struct {
	id    int
	score float64
}

// graphScratch is the graph arm's working memory, pooled: what the walks
// reached and the candidates made of it (only ids leave the arm).
type graphScratch struct {
	reached []graph.SymbolScore
	files   []graph.FileScore
	cands   []graphCand
}

var graphScratchPool sync.Pool

// historyArm scores files by the commits that touched them: commits whose
// message shares words with the query count more, recent commits count
// more. Each file contributes its module chunk.
func (e *Engine) historyArm(q string, cls classify.Result, keep func(int) bool) []int {
	seg := e.Seg
	if len(seg.History) == 0 {
		return nil
	}
	terms := tokenize.QueryTokens(q)
	qset := map[string]bool{}
	for _, t := range terms {
		qset[t] = true
	}
	temporal := cls.Trigger == classify.TemporalHistory
	var target func(path string) bool
	if tt := tokenize.QueryTokens(cls.Target); len(tt) > 0 {
		memo := map[string]bool{}
		target = func(p string) bool {
			if hit, ok := memo[p]; ok {
				return hit
			}
			pt := tokenize.Tokens(p)
			hit := slices.ContainsFunc(tt, func(t string) bool { return slices.Contains(pt, t) })
			memo[p] = hit
			return hit
		}
	}
	msgs := historyTokens(seg)
	score := map[string]float64{}
	for i, c := range seg.History {
		overlap := 0
		for _, t := range msgs[i] {
			if qset[t] {
				overlap++
			}
		}
		recency := 1 / (1 + float64(i)/20)
		s := float64(overlap) * recency
		if temporal {
			s += recency
		}
		if s <= 0 || len(c.Files) > 50 {
			continue
		}
		for _, p := range c.Files {
			w := 1.0
			if target != nil && target(p) {
				w = 2 // "what changed in X": commits touching X's files first
			}
			score[p] += w * s / math.Sqrt(float64(len(c.Files)))
		}
	}
	type fs struct {
		path  string
		score float64
	}
	var files []fs
	for p, s := range score {
		if _, ok := seg.File(p); ok {
			files = append(files, fs{p, s})
		}
	}
	sort.Slice(files, func(i, j int) bool {
		if files[i].score != files[j].score {
			return files[i].score > files[j].score
		}
		return files[i].path < files[j].path
	})
	var ids []int
	for _, f := range files {
		sf, _ := seg.File(f.path)
		if len(sf.Chunks) > 0 {
			ids = append(ids, sf.Chunks[0])
		}
		if len(ids) >= 3*max(cls.K, 10) {
			break
		}
	}
	return filterIDs(ids, keep)
}

// restWeight is the share of a file's other chunks in its score. A file
// whose several chunks match is likelier to need the change than one with
// a single lucky chunk, but summing chunks at full weight favours big
// files. Chosen by a sweep over 0, 0.05, 0.1, 0.2, 0.3 on the dev tasks
// (MRR 0.68, 0.80, 0.78, 0.76, 0.74); see docs/benchmarks.md.
const restWeight = 0.05

// rankFiles aggregates fused chunk scores to files: a file scores its best
// chunk plus a damped share of its other chunks.
func (e *Engine) rankFiles(fused []fusion.Scored) []File {
	type acc struct {
		path       string
		num        int32 // the path's number
		best, rest float64
		signals    []string // distinct
	}
	nums := fileNumbers(e.Seg)
	sc := getFileScratch(len(nums.number))
	pos := sc.pos // by path number: 1 + the file's index in accs, 0 for none yet
	var accs []acc
	for _, s := range fused {
		id, _ := strconv.Atoi(s.ID)
		n := nums.of[id]
		i := int(pos[n]) - 1
		if i < 0 {
			i = len(accs)
			pos[n] = int32(i + 1)
			accs = append(accs, acc{path: e.Seg.Chunks[id].Path, num: n})
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
	for _, a := range accs {
		pos[a.num] = 0
	}
	fileScratchPool.Put(sc)
	files := make([]File, 0, len(accs))
	for _, a := range accs {
		if a.signals == nil {
			a.signals = []string{} // JSON: [], not null
		}
		slices.Sort(a.signals)
		files = append(files, File{Path: a.path, Score: a.best + restWeight*a.rest, Signals: slices.Clip(a.signals)})
	}
	slices.SortStableFunc(files, func(a, b File) int { return cmp.Compare(b.Score, a.Score) })
	return files
}

// topK returns the k first elements of s in cmp's order, in no particular
// order of their own: the prefix of s becomes a heap of them (s's other
// elements are overwritten). cmp must order every two elements (ties
// broken) for the choice to be the one a full sort would make.
func topK[T any](s []T, k int, cmp func(a, b T) int) []T {
	if k <= 0 {
		return s[:0]
	}
	if len(s) <= k {
		return s
	}
	h := s[:k]
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(h, i, cmp)
	}
	for _, x := range s[k:] {
		if cmp(x, h[0]) < 0 { // better than the worst kept
			h[0] = x
			siftDown(h, 0, cmp)
		}
	}
	return h
}

// siftDown restores the heap of h below i, the last element in cmp's
// order at the root.
func siftDown[T any](h []T, i int, cmp func(a, b T) int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && cmp(h[c+1], h[c]) > 0 {
			c++
		}
		if cmp(h[c], h[i]) <= 0 {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// fileFilter turns a chunk filter into the file filter of a whole-file
// BM25 search: a file passes when its first chunk does. Nil stays nil.
func fileFilter(seg *segment.Segment, keep func(int) bool) func(int) bool {
	if keep == nil {
		return nil
	}
	return func(i int) bool {
		f := seg.Files[i]
		return len(f.Chunks) > 0 && keep(f.Chunks[0])
	}
}
