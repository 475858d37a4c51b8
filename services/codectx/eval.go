package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"codectx/pkg/eval"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", dataDir(), "data directory (parse cache) ($"+envData+")")
	tasksFile := fs.String("tasks", "", "tasks JSONL file (required)")
	var gitDirs multiFlag
	fs.Var(&gitDirs, "git-dir", "owner/name=PATH of a git directory or clone (repeatable)")
	budgetList := fs.String("budgets", "2000,4000,8000,16000", "comma-separated token budgets")
	armList := fs.String("arms", "", "evaluate only this arm set (plus the baseline) instead of the ablation table")
	configFile := fs.String("configs", "", "evaluate the configurations of this JSON file (plus the baseline): [{name, arms, route, scale, ranker, model}], see docs/benchmarks.md")
	rankOnly := fs.Bool("rank-only", false, "score the file ranking only (R@k, MRR), without packing: fast, for weight sweeps")
	out := fs.String("json", "", "write the full report (per task) as JSON to this file")
	only := fs.String("only", "", "only tasks whose id contains this string")
	featureFile := fs.String("features", "", "write each task's top 100 files with their features, where the first stage ranks each gold file and gold labels (JSONL) to this file, for scripts/train-rank.py")
	chunkFile := fs.String("chunk-features", "", "write, per task and gold file among the top 20, the file's chunks with the chunk ranker's features and their changed lines (JSONL) to this file, for scripts/train-chunks.py")
	shardBytes := bytesFlag(fs, "shard-bytes", 0, "index each snapshot as shards of this many source `bytes`, joined as a server loads them (0: one segment); the figures must not change")
	org := fs.Bool("org", false, "run each task as an org-wide query: every other --git-dir repository, indexed at its HEAD, is searched beside the task's and the rankings fused as a query over several repositories is")
	byRepo := fs.Bool("by-repo", false, "print compact tables by repository and by language: every configuration side by side")
	var df denseFlags
	df.register(fs, false)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: codectx eval --tasks FILE.jsonl --git-dir OWNER/NAME=PATH ... [flags]\n\n"+
			"Indexes each task's repository at its base commit and measures retrieval on it beside the whole-file BM25 baseline:\n"+
			"file ranking (R@1, R@5, R@10, MRR) and, unless --rank-only, the gold files' recall in the packed context at each budget.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tasksFile == "" {
		fs.Usage()
		return fmt.Errorf("eval: --tasks is required")
	}
	f, err := os.Open(*tasksFile)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	tasks, err := eval.ReadTasks(f)
	f.Close()
	if err != nil {
		return err
	}
	if *only != "" {
		var keep []eval.Task
		for _, t := range tasks {
			if strings.Contains(t.ID, *only) {
				keep = append(keep, t)
			}
		}
		tasks = keep
	}
	dirs := map[string]string{}
	for _, g := range gitDirs {
		name, path, ok := strings.Cut(g, "=")
		if !ok {
			return fmt.Errorf("eval: --git-dir %q: want owner/name=PATH", g)
		}
		dirs[name] = path
	}
	// A mistyped path failed every task, each scored zero, and eval
	// printed an all-zero table as a result: check the paths first.
	checked := map[string]bool{}
	for _, t := range tasks {
		path, ok := dirs[t.Repo]
		if !ok || checked[t.Repo] {
			continue // a missing --git-dir is eval.Run's error
		}
		checked[t.Repo] = true
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("eval: --git-dir %s=%s: %w", t.Repo, path, err)
		}
	}
	var budgets []int
	for _, s := range strings.Split(*budgetList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("eval: bad budget %q", s)
		}
		budgets = append(budgets, n)
	}
	configs := eval.DefaultConfigs()
	if *armList != "" && *configFile != "" {
		return fmt.Errorf("eval: --arms and --configs exclude each other")
	}
	if *configFile != "" {
		f, err := os.Open(*configFile)
		if err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		cs, err := eval.ReadConfigs(f)
		f.Close()
		if err != nil {
			return err
		}
		configs = append(configs[:1], cs...)
	}
	if *armList != "" {
		arms, err := parseArms(*armList)
		if err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		configs = []eval.Config{configs[0], {Name: *armList, Arms: arms, Route: true}}
	}
	store, err := openStore(*data)
	if err != nil {
		return err
	}
	kit, err := df.open(ctx, store)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	defer kit.close()
	if kit.emb != nil && *armList == "" && *configFile == "" {
		configs = append(configs, eval.DenseConfigs()...)
	}
	// Arms asked for by name must run; the default table's rows that
	// include dense run without it when there is no embedder.
	for _, c := range configs[1:] {
		if *armList == "" && *configFile == "" {
			break
		}
		if err := checkArms(c.Arms, kit); err != nil {
			return fmt.Errorf("eval: config %q: %w", c.Name, err)
		}
	}
	opt := eval.Options{GitDirs: dirs, Store: store, Budgets: budgets, RankOnly: *rankOnly, Configs: configs, Progress: stderr, Embedder: kit.emb, ShardBytes: *shardBytes, Org: *org}
	var dumps []*dumpFile
	for _, d := range []struct {
		path string
		to   *io.Writer
	}{{*featureFile, &opt.Features}, {*chunkFile, &opt.ChunkFeatures}} {
		if d.path == "" {
			continue
		}
		df, err := createDump(d.path)
		if err != nil {
			return errors.Join(err, finishDumps(dumps))
		}
		dumps = append(dumps, df)
		*d.to = df.w
	}
	rep, err := eval.Run(ctx, tasks, opt)
	// The dumps keep every whole line written, also when the run failed
	// or was interrupted.
	if err := errors.Join(err, finishDumps(dumps)); err != nil {
		return err
	}
	if n := len(rep.Failed); n > 0 && n == len(tasks) {
		// Nothing was measured: an all-zero table (or --json report)
		// would pass for results.
		return fmt.Errorf("eval: all %d tasks failed, nothing was measured (no table or report written); the first: %s: %s", n, rep.Failed[0].Task, rep.Failed[0].Error)
	}
	budgets = rep.Budgets
	fmt.Fprintf(stdout, "## overall (%d tasks)\n\n%s\n", len(tasks), eval.FormatTable(rep.Overall, budgets))
	if len(rep.Failed) > 0 {
		fmt.Fprintf(stdout, "%d tasks failed and are scored zero:\n", len(rep.Failed))
		for _, f := range rep.Failed {
			fmt.Fprintf(stdout, "- %s: %s\n", f.Task, f.Error)
		}
		fmt.Fprintln(stdout)
	}
	if *byRepo {
		fmt.Fprintf(stdout, "## by repository\n\n%s\n## by language\n\n%s\n", eval.FormatGroups(rep, "repo:", budgets), eval.FormatGroups(rep, "lang:", budgets))
	} else {
		for _, g := range rep.GroupNames() {
			fmt.Fprintf(stdout, "## %s\n\n%s\n", g, eval.FormatTable(rep.ByGroup[g], budgets))
		}
	}
	if *out != "" {
		if err := eval.WriteReport(*out, rep); err != nil {
			return fmt.Errorf("eval: write report: %w", err)
		}
	}
	return nil
}

// dumpFile is a JSONL dump of an eval run (--features, --chunk-features).
type dumpFile struct {
	f *os.File
	w *bufio.Writer
}

func createDump(path string) (*dumpFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	return &dumpFile{f: f, w: bufio.NewWriter(f)}, nil
}

// finishDumps finishes every dump and reports their errors.
func finishDumps(dumps []*dumpFile) error {
	var errs []error
	for _, d := range dumps {
		errs = append(errs, d.finish())
	}
	return errors.Join(errs...)
}

// finish flushes and closes the dump: a failed write is an error, not a
// short file.
func (d *dumpFile) finish() error {
	err := d.w.Flush()
	if cerr := d.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	return nil
}
