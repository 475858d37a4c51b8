// Package eval measures retrieval quality on tasks mined from merged pull
// requests: for each task it indexes the repository at the task's base
// commit, runs the query under several configurations (arms) and scores the
// ranked files and the packed context against the files the PR changed.
// A whole-file BM25 baseline runs beside them on the same tasks.
package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/bm25"
	"codectx/pkg/codectx"
	"codectx/pkg/dense"
	"codectx/pkg/embed"
	"codectx/pkg/index"
	"codectx/pkg/query"
	"codectx/pkg/query/rank"
	"codectx/pkg/segment"
	"codectx/pkg/source"
	"codectx/pkg/tokenize"
	vlocal "codectx/pkg/vector/local"
)

// Task is one line of a tasks.jsonl file.
type Task struct {
	ID          string   `json:"id"`
	Repo        string   `json:"repo"`
	BaseCommit  string   `json:"base_commit"`
	MergeCommit string   `json:"merge_commit"`
	Query       string   `json:"query"`
	GoldFiles   []string `json:"gold_files"`
	Language    string   `json:"language"`
}

// ReadTasks parses a JSONL task file.
func ReadTasks(r io.Reader) ([]Task, error) {
	var tasks []Task
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		var t Task
		if err := json.Unmarshal([]byte(s), &t); err != nil {
			return nil, fmt.Errorf("eval: tasks line %d: %w", line, err)
		}
		if t.Repo == "" || t.BaseCommit == "" || t.Query == "" || len(t.GoldFiles) == 0 {
			return nil, fmt.Errorf("eval: tasks line %d: repo, base_commit, query and gold_files are required", line)
		}
		tasks = append(tasks, t)
	}
	return tasks, sc.Err()
}

// Config is one arm configuration of the table.
type Config struct {
	Name     string             `json:"name"`
	Baseline bool               `json:"baseline,omitempty"` // whole-file BM25, greedy whole-file packing
	Arms     []string           `json:"arms,omitempty"`     // query arms; empty = all
	Route    bool               `json:"route,omitempty"`    // classifier routing (per-trigger weights)
	Scale    map[string]float64 `json:"scale,omitempty"`    // fusion weight multipliers (query.Request.Scale)
	Ranker   string             `json:"ranker,omitempty"`   // query.Request.Ranker: "" or "learned", "rrf"
	// Model is a model file (scripts/train-rank.py's output) the learned
	// ranker uses instead of the shipped one, to compare models side by
	// side in one run.
	Model string `json:"model,omitempty"`
	// Depth and FileDepth are query.Request.Depth and FileDepth: how deep
	// the BM25 chunk list and the whole-file and file-name lists reach.
	Depth     int `json:"depth,omitempty"`
	FileDepth int `json:"file_depth,omitempty"`
	// ClassNames and Supertypes are query.Request.ClassNames and
	// Supertypes: first-stage candidate lists measured for recall.
	ClassNames bool `json:"class_names,omitempty"`
	Supertypes bool `json:"supertypes,omitempty"`
	// ChunkModel is a chunk model file (scripts/train-chunks.py's output)
	// that orders the chunks inside each top file; none is shipped, so
	// without it a file's chunks keep the fused order. ChunkRanker is
	// query.Request.ChunkRanker: "rrf" keeps the fused order even with a
	// model, "learned" asks for the model (and needs ChunkModel).
	ChunkRanker string `json:"chunk_ranker,omitempty"`
	ChunkModel  string `json:"chunk_model,omitempty"`
	// Pack is query.Request.Shape: the pack's breadth pass in place of
	// query.DefaultShape, to measure the pack.
	Pack *query.Shape `json:"pack,omitempty"`
	// Merge is query.Request.Merge: how a query over several repositories
	// (an --org run) orders their files.
	Merge string `json:"merge,omitempty"`

	model, chunkModel *rank.Model
}

// loadModel reads a model file bound to the features names ("" is no
// model).
func loadModel(path string, names []string) (*rank.Model, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return rank.Parse(data, names)
}

// ReadConfigs reads a JSON array of configurations (the Config fields by
// their JSON names) and checks names, arms and scale keys.
func ReadConfigs(r io.Reader) ([]Config, error) {
	var cs []Config
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cs); err != nil {
		return nil, fmt.Errorf("eval: configs: %w", err)
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("eval: configs: none given")
	}
	seen := map[string]bool{}
	for i, c := range cs {
		switch {
		case c.Name == "":
			return nil, fmt.Errorf("eval: configs[%d]: no name", i)
		case seen[c.Name]:
			return nil, fmt.Errorf("eval: configs[%d]: name %q used twice", i, c.Name)
		}
		seen[c.Name] = true
		var err error
		if cs[i].model, err = loadModel(c.Model, query.FeatureNames); err != nil {
			return nil, fmt.Errorf("eval: config %q: %w", c.Name, err)
		}
		if cs[i].chunkModel, err = loadModel(c.ChunkModel, query.ChunkFeatureNames); err != nil {
			return nil, fmt.Errorf("eval: config %q: chunk model: %w", c.Name, err)
		}
		switch c.ChunkRanker {
		case "", query.RankRRF:
		case query.RankLearned:
			if c.ChunkModel == "" {
				return nil, fmt.Errorf("eval: config %q: chunk ranker %q needs a chunk_model (none is shipped)", c.Name, c.ChunkRanker)
			}
		default:
			return nil, fmt.Errorf("eval: config %q: unknown chunk ranker %q", c.Name, c.ChunkRanker)
		}
		for _, a := range c.Arms {
			if !slices.Contains(query.AllArms, a) {
				return nil, fmt.Errorf("eval: config %q: unknown arm %q", c.Name, a)
			}
		}
		for k, v := range c.Scale {
			if !query.IsList(k) {
				return nil, fmt.Errorf("eval: config %q: unknown ranking %q in scale", c.Name, k)
			}
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("eval: config %q: scale %s = %v, want a finite number >= 0", c.Name, k, v)
			}
		}
		if p := c.Pack; p != nil && (p.Lead < 0 || p.Deep < 0 || !(p.DeepShare >= 0 && p.DeepShare <= 1)) {
			return nil, fmt.Errorf("eval: config %q: pack: lead and deep must be >= 0 and deep_share in [0, 1]", c.Name)
		}
		if c.Depth < 0 || c.FileDepth < 0 {
			return nil, fmt.Errorf("eval: config %q: depth and file_depth must be >= 0", c.Name)
		}
		if err := query.CheckMerge(c.Merge); err != nil {
			return nil, fmt.Errorf("eval: config %q: %w", c.Name, err)
		}
		if c.Ranker != "" && c.Ranker != query.RankLearned && c.Ranker != query.RankRRF {
			return nil, fmt.Errorf("eval: config %q: unknown ranker %q", c.Name, c.Ranker)
		}
	}
	return cs, nil
}

// DefaultConfigs is the ablation table: the baseline, chunked BM25, arms
// added one by one, the full pipeline, and the full pipeline minus each arm.
func DefaultConfigs() []Config {
	return []Config{
		{Name: "baseline: bm25 whole files", Baseline: true},
		{Name: "bm25 chunks", Arms: []string{query.ArmBM25}},
		{Name: "+ graph", Arms: []string{query.ArmBM25, query.ArmGraph}},
		{Name: "+ symbol + routing", Arms: []string{query.ArmSymbol, query.ArmBM25, query.ArmGraph}, Route: true},
		{Name: "full", Arms: query.AllArms, Route: true},
		{Name: "full - symbol", Arms: without(query.AllArms, query.ArmSymbol), Route: true},
		{Name: "full - graph", Arms: without(query.AllArms, query.ArmGraph), Route: true},
		{Name: "full - history", Arms: without(query.AllArms, query.ArmHistory), Route: true},
		{Name: "full - routing", Arms: query.AllArms},
	}
}

// DenseConfigs are the rows that measure the dense arm (with an embedder):
// dense alone, BM25 with dense, and the full pipeline without dense (the
// default table's "full" includes it when an embedder is configured).
func DenseConfigs() []Config {
	return []Config{
		{Name: "dense", Arms: []string{query.ArmDense}, Route: true},
		{Name: "bm25 + dense", Arms: []string{query.ArmBM25, query.ArmDense}, Route: true},
		{Name: "bm25 + graph + dense", Arms: []string{query.ArmBM25, query.ArmGraph, query.ArmDense}, Route: true},
		{Name: "full - dense", Arms: without(query.AllArms, query.ArmDense), Route: true},
	}
}

func without(arms []string, drop string) []string {
	var out []string
	for _, a := range arms {
		if a != drop {
			out = append(out, a)
		}
	}
	return out
}

// Options configure a run.
type Options struct {
	GitDirs  map[string]string // repo (owner/name) -> git dir or clone
	Store    *blob.Bucket      // parse cache
	Budgets  []int
	RankOnly bool // file ranking only (R@k, MRR): no packing, no budgets
	Configs  []Config
	Progress io.Writer
	// Features, when set, receives one JSON line per task and
	// configuration: the learned ranker's candidate files with their
	// feature vectors and gold labels (FeatureDump), for offline training.
	Features io.Writer
	// ChunkFeatures, when set, receives one JSON line per task,
	// configuration and gold file among the top files: that file's chunks
	// with the chunk ranker's features and the task's changed lines in
	// each (ChunkDump), for scripts/train-chunks.py.
	ChunkFeatures io.Writer
	// Embedder, when set, embeds each task's snapshot (vectors cached in
	// Store by model and content) into an in-memory vector store and gives
	// the queries the dense arm.
	Embedder embed.Embedder
	// ShardBytes, when positive, indexes each snapshot as shards of this
	// many source bytes, joined as a query server loads them, instead of
	// one segment: the answers must be the same.
	ShardBytes int64
	// Org runs each task as an org-wide query: every other repository
	// with a git directory, indexed once at its HEAD, is searched beside
	// the task's and the rankings are fused as a query over several
	// repositories is (query.PackAll). A file of another repository above
	// the gold file costs its rank; recall counts the task repository's
	// chunks only. The baseline is one whole-file BM25 over all the
	// repositories' files.
	Org bool
}

// FeatureDump is one line of an --features file.
type FeatureDump struct {
	Task     string        `json:"task"`
	Repo     string        `json:"repo"`
	Language string        `json:"language"`
	Config   string        `json:"config"`
	Trigger  string        `json:"trigger"`
	Names    []string      `json:"names"`
	Gold     []string      `json:"gold"`
	Files    []FeatureFile `json:"files"`
	Missing  int           `json:"missing"` // gold files not among the candidates
	// Pool is the number of files of the fused ranking and GoldRanks each
	// gold file's rank in it (RRF order, before reranking; 1 is the top,
	// 0 absent): first-stage candidate recall. Deep holds the gold files'
	// ranks in each of query.DeepLists the same way.
	Pool      int              `json:"pool"`
	GoldRanks []int            `json:"gold_ranks"`
	Deep      map[string][]int `json:"deep"`
	// GoldNear is, per gold file, the best rank (1-based, RRF order) of a
	// file of the fused ranking's top 20 that the gold file is linked to
	// in the code graph, either way (0: none): whether a missing gold
	// file is a neighbour of the top files.
	GoldNear []int `json:"gold_near"`
	// Terms are the query's whole-file BM25 terms, their features and
	// their scores in each of Files (query.TermDump), to learn term
	// weights offline (scripts/term-weights.py).
	Terms *query.TermDump `json:"terms,omitempty"`
}

// FeatureFile is one candidate file of a FeatureDump, in RRF order.
type FeatureFile struct {
	Path string    `json:"path"`
	Gold bool      `json:"gold"`
	X    []float64 `json:"x"`
	// Out and In are the positions among the dump's files of the files
	// this one links to and is linked from in the code graph (imports,
	// calls, type references), so graph features can be tried offline.
	Out []int `json:"out,omitempty"`
	In  []int `json:"in,omitempty"`
}

// TaskResult is one task under one configuration.
type TaskResult struct {
	Task     string          `json:"task"`
	Repo     string          `json:"repo"`
	Language string          `json:"language"`
	Trigger  string          `json:"trigger,omitempty"`
	Recall   map[int]float64 `json:"recall"` // by budget
	// Lines is the share of the PR's changed lines that the pack emitted
	// whole, by budget (lines.go); nil when the task has none to count.
	Lines     map[int]float64 `json:"lines,omitempty"`
	Tokens    map[int]int     `json:"tokens"`
	PackFiles map[int]int     `json:"pack_files"`
	R1        float64         `json:"r1"`
	R5        float64         `json:"r5"`
	R10       float64         `json:"r10"`
	MRR       float64         `json:"mrr"`
	LatencyUS int             `json:"latency_us"`
	Top       []string        `json:"top"` // top 5 files
}

// Summary aggregates a configuration over tasks.
type Summary struct {
	Config    string          `json:"config"`
	Tasks     int             `json:"tasks"`
	Recall    map[int]float64 `json:"recall"`
	Lines     map[int]float64 `json:"lines,omitempty"` // mean over the LineTasks tasks with changed lines
	LineTasks int             `json:"line_tasks,omitempty"`
	TES       map[int]float64 `json:"tes"`
	Tokens    map[int]float64 `json:"tokens"`
	R1        float64         `json:"r1"`
	R5        float64         `json:"r5"`
	R10       float64         `json:"r10"`
	MRR       float64         `json:"mrr"`
	LatencyUS float64         `json:"latency_us_mean"`
}

// Report is the result of a run.
type Report struct {
	Budgets []int                   `json:"budgets"`
	Overall []Summary               `json:"overall"`
	ByGroup map[string][]Summary    `json:"by_group"`         // by language and by repo
	Tasks   map[string][]TaskResult `json:"tasks"`            // config -> per task
	Failed  []FailedTask            `json:"failed,omitempty"` // scored zero in every config
}

// Run evaluates every task under every configuration.
func Run(ctx context.Context, tasks []Task, opt Options) (*Report, error) {
	if opt.RankOnly {
		opt.Budgets = nil
	} else if len(opt.Budgets) == 0 {
		opt.Budgets = []int{2000, 4000, 8000, 16000}
	}
	if len(opt.Configs) == 0 {
		opt.Configs = DefaultConfigs()
	}
	rep := &Report{Budgets: opt.Budgets, ByGroup: map[string][]Summary{}, Tasks: map[string][]TaskResult{}}
	for _, t := range tasks {
		if _, ok := opt.GitDirs[t.Repo]; !ok {
			return nil, fmt.Errorf("eval: task %s: no --git-dir given for %s", t.ID, t.Repo)
		}
	}
	var o *org
	if opt.Org {
		var err error
		if o, err = loadOrg(ctx, opt); err != nil {
			return nil, err
		}
	}
	for i, t := range tasks {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := time.Now()
		results, files, err := runTask(ctx, t, opt, o)
		if err != nil {
			// One broken task (a commit missing from the clone, say) is
			// reported and scored zero; the run goes on.
			rep.Failed = append(rep.Failed, FailedTask{Task: t.ID, Error: err.Error()})
			if opt.Progress != nil {
				fmt.Fprintf(opt.Progress, "[%d/%d] %s FAILED: %v\n", i+1, len(tasks), t.ID, err)
			}
			for _, c := range opt.Configs {
				rep.Tasks[c.Name] = append(rep.Tasks[c.Name], zeroResult(t, opt.Budgets))
			}
			continue
		}
		for _, c := range opt.Configs {
			rep.Tasks[c.Name] = append(rep.Tasks[c.Name], results[c.Name])
		}
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "[%d/%d] %s (%d files, %.1fs)\n", i+1, len(tasks), t.ID, files, time.Since(start).Seconds())
		}
	}
	groups := map[string]bool{}
	for _, t := range tasks {
		groups["lang:"+t.Language] = true
		groups["repo:"+t.Repo] = true
	}
	for _, c := range opt.Configs {
		rs := rep.Tasks[c.Name]
		rep.Overall = append(rep.Overall, summarize(c.Name, rs, opt.Budgets))
		for g := range groups {
			var sub []TaskResult
			for _, r := range rs {
				if "lang:"+r.Language == g || "repo:"+r.Repo == g {
					sub = append(sub, r)
				}
			}
			rep.ByGroup[g] = append(rep.ByGroup[g], summarize(c.Name, sub, opt.Budgets))
		}
	}
	return rep, nil
}

// FailedTask is a task that could not be indexed or queried.
type FailedTask struct {
	Task  string `json:"task"`
	Error string `json:"error"`
}

func zeroResult(t Task, budgets []int) TaskResult {
	r := TaskResult{Task: t.ID, Repo: t.Repo, Language: t.Language, Recall: map[int]float64{}, Tokens: map[int]int{}, PackFiles: map[int]int{}}
	for _, b := range budgets {
		r.Recall[b] = 0
	}
	return r
}

// runTask indexes the task's repository at its base commit and runs every
// configuration, returning results by configuration name and the number of
// indexed files.
func runTask(ctx context.Context, t Task, opt Options, o *org) (map[string]TaskResult, int, error) {
	others, otherDocs := o.others(t.Repo)
	snap, err := source.Open(ctx, opt.GitDirs[t.Repo], source.Options{Rev: t.BaseCommit})
	if err != nil {
		return nil, 0, err
	}
	defer snap.Close()
	var changed map[string][]int
	if len(opt.Budgets) > 0 || opt.ChunkFeatures != nil {
		// A task whose merge commit cannot be read is scored without
		// changed lines, not failed: file figures do not need them.
		changed, _ = changedLines(opt.GitDirs[t.Repo], t)
	}
	var seg *segment.Segment
	if opt.ShardBytes > 0 {
		seg, _, err = index.BuildShardedSegment(ctx, opt.Store, blob.NewMem(), snap, t.Repo, index.Options{HistoryLimit: 500, ShardBytes: opt.ShardBytes})
	} else {
		seg, _, err = index.BuildSegment(ctx, opt.Store, snap, t.Repo, index.Options{HistoryLimit: 500})
	}
	if err != nil {
		return nil, 0, fmt.Errorf("index: %w", err)
	}
	var dn query.Dense
	if opt.Embedder != nil {
		vs := vlocal.New(blob.NewMem(), vlocal.Float32)
		if _, err := dense.IndexSegment(ctx, opt.Store, vs, opt.Embedder, seg); err != nil {
			return nil, 0, fmt.Errorf("dense: %w", err)
		}
		dn = &dense.Arm{Embedder: opt.Embedder, Store: vs}
	}
	out := map[string]TaskResult{}
	var base *baseline
	var sh *shown // what each chunk of a changed file shows, for every configuration
	if len(changed) > 0 {
		sh = newShown(seg, changed)
	}
	for _, c := range opt.Configs {
		if c.Baseline {
			if base == nil && o != nil {
				// One collection of the org's files: the idf and the
				// ranking across repositories are BM25's own.
				own, err := readDocs(snap, t.Repo, Candidate(t.Language))
				if err != nil {
					return nil, 0, fmt.Errorf("baseline: %w", err)
				}
				base = buildBaseline(append([]*docs{own}, otherDocs...), Candidate(t.Language))
			}
			if base == nil {
				if base, err = newBaseline(snap, t.Language); err != nil {
					return nil, 0, fmt.Errorf("baseline: %w", err)
				}
			}
			out[c.Name] = base.run(t, opt.Budgets, changed)
			continue
		}
		var r TaskResult
		var rk *query.Ranking
		if opt.Org {
			r, err = runOrgQuery(ctx, seg, others, t, c, opt.Budgets, changed, sh)
		} else {
			r, rk, err = runQuery(ctx, seg, dn, t, c, opt.Budgets, changed, sh, opt.Features != nil, opt.ChunkFeatures != nil)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", c.Name, err)
		}
		if opt.Features != nil {
			if err := dumpFeatures(opt.Features, seg, t, c, r.Trigger, rk); err != nil {
				return nil, 0, err
			}
		}
		if opt.ChunkFeatures != nil {
			if err := dumpChunks(opt.ChunkFeatures, seg, t, c, rk, changed, sh); err != nil {
				return nil, 0, err
			}
		}
		out[c.Name] = r
	}
	return out, len(seg.Files), nil
}

// Languages maps a task language to the index languages whose files count.
func Languages(lang string) []codectx.Language {
	switch lang {
	case "typescript":
		return []codectx.Language{codectx.TypeScript, codectx.TSX}
	case "":
		return nil
	}
	return []codectx.Language{codectx.Language(lang)}
}

// FeatureDepth is how many top files of the fused ranking a feature dump
// holds (more than the model reranks, so that training can try deeper
// reranking).
const FeatureDepth = 100

// goldRanks is the 1-based rank of each gold file in ranked, 0 if absent.
func goldRanks(gold, ranked []string) []int {
	at := make(map[string]int, len(ranked))
	for i, p := range ranked {
		if _, ok := at[p]; !ok {
			at[p] = i + 1
		}
	}
	out := make([]int, len(gold))
	for i, g := range gold {
		out[i] = at[g]
	}
	return out
}

func dumpFeatures(w io.Writer, seg *segment.Segment, t Task, c Config, trigger string, rk *query.Ranking) error {
	cands := rk.Candidates
	gold := map[string]bool{}
	for _, g := range t.GoldFiles {
		gold[g] = true
	}
	d := FeatureDump{Task: t.ID, Repo: t.Repo, Language: t.Language, Config: c.Name, Trigger: trigger, Names: query.FeatureNames, Gold: t.GoldFiles, Files: []FeatureFile{}}
	found := 0
	for _, cd := range cands {
		d.Files = append(d.Files, FeatureFile{Path: cd.Path, Gold: gold[cd.Path], X: cd.X})
		if gold[cd.Path] {
			found++
		}
	}
	d.Missing = len(gold) - found
	d.Pool, d.GoldRanks = len(rk.Pool), goldRanks(t.GoldFiles, rk.Pool)
	links(seg, d.Files)
	d.GoldNear = goldNear(seg, t.GoldFiles, rk.Pool)
	d.Terms = rk.Terms
	d.Deep = map[string][]int{}
	for name, l := range rk.Deep {
		d.Deep[name] = goldRanks(t.GoldFiles, l)
	}
	line, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if _, err := w.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("eval: features: %w", err)
	}
	return nil
}

// links sets each dumped file's graph links to the other dumped files.
func links(seg *segment.Segment, files []FeatureFile) {
	if seg.Graph == nil {
		return
	}
	at := make(map[string]int, len(files))
	for i, f := range files {
		at[f.Path] = i
	}
	for i := range files {
		out, in := map[int]bool{}, map[int]bool{}
		for _, nb := range seg.Graph.FileNeighbors(files[i].Path) {
			j, ok := at[nb.Path]
			if !ok || j == i {
				continue
			}
			if nb.Out && !out[j] {
				out[j] = true
				files[i].Out = append(files[i].Out, j)
			} else if !nb.Out && !in[j] {
				in[j] = true
				files[i].In = append(files[i].In, j)
			}
		}
	}
}

// ChunkDump is one line of a --chunk-features file: the chunks of one gold
// file among the top files, in fused order.
type ChunkDump struct {
	Task     string       `json:"task"`
	Repo     string       `json:"repo"`
	Language string       `json:"language"`
	Config   string       `json:"config"`
	Path     string       `json:"path"`
	Rank     int          `json:"rank"` // the file's rank, 1 the top
	Names    []string     `json:"names"`
	Changed  int          `json:"changed"` // the task's changed lines in the file
	Chunks   []ChunkEntry `json:"chunks"`
}

// ChunkEntry is one chunk of a ChunkDump: its lines, the changed lines it
// shows emitted whole (an outline shows none of its members') and its
// features.
type ChunkEntry struct {
	Start int       `json:"start"`
	End   int       `json:"end"`
	Hits  int       `json:"hits"`
	X     []float64 `json:"x"`
}

func dumpChunks(w io.Writer, seg *segment.Segment, t Task, c Config, rk *query.Ranking, changed map[string][]int, sh *shown) error {
	if len(changed) == 0 {
		return nil
	}
	rank := map[string]int{}
	for i, f := range rk.Files {
		if _, ok := rank[f.Path]; !ok {
			rank[f.Path] = i + 1
		}
	}
	by := map[string]*ChunkDump{}
	var order []string
	for _, cc := range rk.Chunks {
		lines := changed[cc.Path]
		if len(lines) == 0 {
			continue
		}
		d := by[cc.Path]
		if d == nil {
			d = &ChunkDump{Task: t.ID, Repo: t.Repo, Language: t.Language, Config: c.Name, Path: cc.Path, Rank: rank[cc.Path],
				Names: query.ChunkFeatureNames, Changed: len(lines)}
			by[cc.Path] = d
			order = append(order, cc.Path)
		}
		ch := seg.Chunks[cc.ID]
		e := ChunkEntry{Start: ch.StartLine, End: ch.EndLine, X: cc.X}
		for _, l := range lines {
			if sh.holds(cc.Path, ch.StartLine, ch.EndLine, l) {
				e.Hits++
			}
		}
		d.Chunks = append(d.Chunks, e)
	}
	enc := json.NewEncoder(w)
	for _, p := range order {
		if err := enc.Encode(by[p]); err != nil {
			return fmt.Errorf("eval: chunk features: %w", err)
		}
	}
	return nil
}

// goldNear is FeatureDump.GoldNear.
func goldNear(seg *segment.Segment, gold, pool []string) []int {
	out := make([]int, len(gold))
	if seg.Graph == nil {
		return out
	}
	rank := map[string]int{}
	for i, p := range pool[:min(20, len(pool))] {
		rank[p] = i + 1
	}
	for gi, g := range gold {
		for _, nb := range seg.Graph.FileNeighbors(g) {
			if r, ok := rank[nb.Path]; ok && nb.Path != g && (out[gi] == 0 || r < out[gi]) {
				out[gi] = r
			}
		}
	}
	return out
}

// request is the query of task t under configuration c.
func (c Config) request(t Task) query.Request {
	return query.Request{Query: t.Query, Arms: c.Arms, Route: c.Route, Languages: Languages(t.Language), Scale: c.Scale, Paths: Candidate(t.Language), Ranker: c.Ranker,
		Depth: c.Depth, FileDepth: c.FileDepth, ClassNames: c.ClassNames, Supertypes: c.Supertypes, ChunkRanker: c.ChunkRanker, Shape: c.Pack, Merge: c.Merge}
}

func runQuery(ctx context.Context, seg *segment.Segment, dn query.Dense, t Task, c Config, budgets []int, changed map[string][]int, sh *shown, features, chunkFeatures bool) (TaskResult, *query.Ranking, error) {
	eng := &query.Engine{Seg: seg, Dense: dn, Model: c.model, ChunkModel: c.chunkModel}
	res := TaskResult{Task: t.ID, Repo: t.Repo, Language: t.Language, Recall: map[int]float64{}, Tokens: map[int]int{}, PackFiles: map[int]int{}}
	start := time.Now()
	req := c.request(t)
	req.Features, req.ChunkFeatures = features, chunkFeatures
	if features {
		req.FeatureDepth = FeatureDepth
	}
	rk, err := eng.Search(ctx, req)
	if err != nil {
		return res, nil, err
	}
	res.Trigger = string(rk.Class.Trigger)
	for i, b := range budgets {
		req.Budget = b
		resp := eng.Pack(rk, req)
		if i == 0 { // one query: search and its first pack
			res.LatencyUS = int(time.Since(start).Microseconds())
		}
		files := map[string]bool{}
		for _, ch := range resp.Chunks {
			files[ch.Path] = true
		}
		res.Recall[b] = recall(t.GoldFiles, files)
		if l, ok := lineRecall(changed, resp.Chunks, sh); ok {
			if res.Lines == nil {
				res.Lines = map[int]float64{}
			}
			res.Lines[b] = l
		}
		res.Tokens[b] = resp.Tokens
		res.PackFiles[b] = len(files)
	}
	if len(budgets) == 0 { // --rank-only: search alone
		res.LatencyUS = int(time.Since(start).Microseconds())
	}
	ranked := make([]string, len(rk.Files))
	for i, f := range rk.Files {
		ranked[i] = f.Path
	}
	scoreRanking(&res, t.GoldFiles, ranked)
	return res, rk, nil
}

func recall(gold []string, got map[string]bool) float64 {
	n := 0
	for _, g := range gold {
		if got[g] {
			n++
		}
	}
	return float64(n) / float64(len(gold))
}

func scoreRanking(res *TaskResult, gold, ranked []string) {
	at := func(k int) float64 {
		top := map[string]bool{}
		for i := 0; i < k && i < len(ranked); i++ {
			top[ranked[i]] = true
		}
		return recall(gold, top)
	}
	res.R1, res.R5, res.R10 = at(1), at(5), at(10)
	g := map[string]bool{}
	for _, p := range gold {
		g[p] = true
	}
	for i, p := range ranked {
		if g[p] {
			res.MRR = 1 / float64(i+1)
			break
		}
	}
	if len(ranked) > 5 {
		ranked = ranked[:5]
	}
	res.Top = ranked
}

func summarize(name string, rs []TaskResult, budgets []int) Summary {
	s := Summary{Config: name, Tasks: len(rs), Recall: map[int]float64{}, Lines: map[int]float64{}, TES: map[int]float64{}, Tokens: map[int]float64{}}
	if len(rs) == 0 {
		return s
	}
	n := float64(len(rs))
	for _, r := range rs {
		for _, b := range budgets {
			s.Recall[b] += r.Recall[b] / n
			s.Tokens[b] += float64(r.Tokens[b]) / n
			if f := r.PackFiles[b]; f > 0 {
				s.TES[b] += r.Recall[b] / math.Log(1+float64(f)) / n
			}
		}
		if r.Lines != nil {
			s.LineTasks++
			for _, b := range budgets {
				s.Lines[b] += r.Lines[b]
			}
		}
		s.R1 += r.R1 / n
		s.R5 += r.R5 / n
		s.R10 += r.R10 / n
		s.MRR += r.MRR / n
		s.LatencyUS += float64(r.LatencyUS) / n
	}
	for _, b := range budgets {
		if s.LineTasks > 0 {
			s.Lines[b] /= float64(s.LineTasks)
		}
	}
	return s
}

// baseline is whole-file BM25 (k1=1.2, b=0.75) over identifier-aware path
// and content tokens of every file of the task's language, packed greedily
// at ceil(chars/4) tokens per file; a file that does not fit is skipped.
type baseline struct {
	paths []string
	sizes []int
	repos []string // each file's repository, in an org-wide run (else nil)
	ix    *bm25.Index
}

var langExt = map[string][]string{
	"python":     {".py"},
	"go":         {".go"},
	"typescript": {".ts", ".tsx"},
	"javascript": {".js", ".mjs", ".cjs"},
	"java":       {".java"},
	"rust":       {".rs"},
}

// LanguageFile reports whether path is a file of lang per the benchmark's rules.
func LanguageFile(lang, path string) bool {
	if strings.HasSuffix(path, ".d.ts") {
		return false
	}
	ok := false
	for _, e := range langExt[lang] {
		if strings.HasSuffix(path, e) {
			ok = true
		}
	}
	return ok
}

// Candidate returns the benchmark's rule for files that can be gold for a
// task of lang: the language's files, without .d.ts declarations and
// node_modules. Both the baseline and the pipeline rank only these. An
// unknown or empty language accepts every path.
func Candidate(lang string) func(string) bool {
	if _, ok := langExt[lang]; !ok {
		return nil
	}
	return func(p string) bool {
		return LanguageFile(lang, p) && !strings.Contains(p, "node_modules/")
	}
}

func newBaseline(snap *source.Snapshot, lang string) (*baseline, error) {
	own, err := readDocs(snap, "", Candidate(lang))
	if err != nil {
		return nil, err
	}
	return buildBaseline([]*docs{own}, nil), nil
}

// docs are a repository's files as the whole-file baseline indexes them:
// path and text as one field.
type docs struct {
	repo   string
	paths  []string
	tokens [][]string
	sizes  []int // o200k tokens, estimated as bytes / 4
}

// readDocs reads the files of snap that keep accepts (nil: all).
func readDocs(snap *source.Snapshot, repo string, keep func(string) bool) (*docs, error) {
	d := &docs{repo: repo}
	for _, f := range snap.Files {
		if keep != nil && !keep(f.Path) {
			continue
		}
		data, err := snap.Read(f)
		if err != nil {
			return nil, err
		}
		d.paths = append(d.paths, f.Path)
		d.tokens = append(d.tokens, append(tokenize.Tokens(f.Path), tokenize.Tokens(string(data))...))
		d.sizes = append(d.sizes, (len(data)+3)/4)
	}
	return d, nil
}

// buildBaseline indexes the files of ds that keep accepts (nil: all) as
// one collection. With more than one repository, files are named
// repo\x00path.
func buildBaseline(ds []*docs, keep func(string) bool) *baseline {
	b := &baseline{}
	bld := bm25.NewBuilder()
	for _, d := range ds {
		for i, p := range d.paths {
			if keep != nil && !keep(p) {
				continue
			}
			var fields [bm25.NumFields][]string
			fields[bm25.FieldBody] = d.tokens[i]
			bld.AddTokens(fields)
			b.paths = append(b.paths, p)
			b.sizes = append(b.sizes, d.sizes[i])
			if len(ds) > 1 {
				b.repos = append(b.repos, d.repo)
			}
		}
	}
	b.ix = bld.Build()
	return b
}

func (b *baseline) run(t Task, budgets []int, changed map[string][]int) TaskResult {
	start := time.Now()
	var p bm25.Params
	p.K1, p.B = 1.2, 0.75
	p.Weights[bm25.FieldBody] = 1
	hits := b.ix.Search(tokenize.QueryTokens(t.Query), len(b.paths), p)
	res := TaskResult{Task: t.ID, Repo: t.Repo, Language: t.Language, Recall: map[int]float64{}, Tokens: map[int]int{}, PackFiles: map[int]int{}, LatencyUS: int(time.Since(start).Microseconds())}
	own := func(d int) bool { return b.repos == nil || b.repos[d] == t.Repo }
	ranked := make([]string, len(hits))
	for i, h := range hits {
		ranked[i] = b.paths[h.Doc]
		if b.repos != nil {
			ranked[i] = b.repos[h.Doc] + "\x00" + ranked[i]
		}
	}
	for _, budget := range budgets {
		used := 0
		got := map[string]bool{}
		for _, h := range hits {
			if used+b.sizes[h.Doc] <= budget {
				used += b.sizes[h.Doc]
				if own(h.Doc) {
					got[b.paths[h.Doc]] = true
				}
			}
		}
		res.Recall[budget] = recall(t.GoldFiles, got)
		if l, ok := fileLineRecall(changed, got); ok {
			if res.Lines == nil {
				res.Lines = map[int]float64{}
			}
			res.Lines[budget] = l
		}
		res.Tokens[budget] = used
		res.PackFiles[budget] = len(got)
	}
	gold := t.GoldFiles
	if b.repos != nil {
		gold = orgKeys(t.Repo, gold)
	}
	scoreRanking(&res, gold, ranked)
	if b.repos != nil {
		for i := range res.Top {
			res.Top[i] = orgName(res.Top[i])
		}
	}
	return res
}

// FormatTable renders summaries as a Markdown table; with changed lines
// counted (lines.go), L@Nk columns follow the file recall's.
func FormatTable(rows []Summary, budgets []int) string {
	var b strings.Builder
	lines := hasLines(rows)
	b.WriteString("| config | R@1 | R@5 | R@10 | MRR |")
	for _, bu := range budgets {
		fmt.Fprintf(&b, " R@%dk |", bu/1000)
	}
	if lines {
		for _, bu := range budgets {
			fmt.Fprintf(&b, " L@%dk |", bu/1000)
		}
	}
	for _, bu := range budgets {
		fmt.Fprintf(&b, " TES@%dk |", bu/1000)
	}
	b.WriteString(" ms |\n|---|---|---|---|---|")
	for range budgets {
		b.WriteString("---|---|")
		if lines {
			b.WriteString("---|")
		}
	}
	b.WriteString("---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %.3f | %.3f | %.3f | %.3f |", r.Config, r.R1, r.R5, r.R10, r.MRR)
		for _, bu := range budgets {
			fmt.Fprintf(&b, " %.3f |", r.Recall[bu])
		}
		if lines {
			for _, bu := range budgets {
				fmt.Fprintf(&b, " %.3f |", r.Lines[bu])
			}
		}
		for _, bu := range budgets {
			fmt.Fprintf(&b, " %.3f |", r.TES[bu])
		}
		fmt.Fprintf(&b, " %.1f |\n", r.LatencyUS/1000)
	}
	return b.String()
}

// FormatGroups renders the groups whose key starts with prefix ("repo:",
// "lang:") as one Markdown table, a row per group and configuration, the
// configurations of a group side by side: tasks, MRR, R@1, R@5 and recall
// at each budget.
func FormatGroups(rep *Report, prefix string, budgets []int) string {
	var b strings.Builder
	lines := hasLines(rep.Overall)
	b.WriteString("| " + strings.TrimSuffix(prefix, ":") + " | config | tasks | MRR | R@1 | R@5 |")
	for _, bu := range budgets {
		fmt.Fprintf(&b, " R@%dk |", bu/1000)
	}
	if lines {
		for _, bu := range budgets {
			fmt.Fprintf(&b, " L@%dk |", bu/1000)
		}
	}
	b.WriteString("\n|---|---|---|---|---|---|")
	for range budgets {
		b.WriteString("---|")
		if lines {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, g := range rep.GroupNames() {
		if !strings.HasPrefix(g, prefix) {
			continue
		}
		for _, r := range rep.ByGroup[g] {
			fmt.Fprintf(&b, "| %s | %s | %d | %.3f | %.3f | %.3f |", strings.TrimPrefix(g, prefix), r.Config, r.Tasks, r.MRR, r.R1, r.R5)
			for _, bu := range budgets {
				fmt.Fprintf(&b, " %.3f |", r.Recall[bu])
			}
			if lines {
				for _, bu := range budgets {
					fmt.Fprintf(&b, " %.3f |", r.Lines[bu])
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// hasLines reports whether any row counted changed lines.
func hasLines(rows []Summary) bool {
	for _, r := range rows {
		if r.LineTasks > 0 {
			return true
		}
	}
	return false
}

// WriteReport writes a report as indented JSON.
func WriteReport(path string, rep *Report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// GroupNames returns the report's group keys sorted.
func (r *Report) GroupNames() []string {
	var out []string
	for g := range r.ByGroup {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}
