package eval

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"codectx/pkg/index"
	"codectx/pkg/query"
	"codectx/pkg/segment"
	"codectx/pkg/source"
)

// org is the other repositories of an org-wide run (Options.Org), each
// at its HEAD: indexed, and read as the whole-file baseline reads files.
type org struct {
	segs map[string]*segment.Segment
	docs map[string]*docs
}

// loadOrg indexes and reads every repository with a git directory at
// its HEAD.
func loadOrg(ctx context.Context, opt Options) (*org, error) {
	if opt.Features != nil || opt.ChunkFeatures != nil || opt.Embedder != nil {
		return nil, fmt.Errorf("eval: an org-wide run takes no feature dumps and no embedder")
	}
	repos := make([]string, 0, len(opt.GitDirs))
	for r := range opt.GitDirs {
		repos = append(repos, r)
	}
	slices.Sort(repos)
	o := &org{segs: map[string]*segment.Segment{}, docs: map[string]*docs{}}
	for i, r := range repos {
		start := time.Now()
		snap, err := source.Open(ctx, opt.GitDirs[r], source.Options{})
		if err != nil {
			return nil, fmt.Errorf("eval: org: %s: %w", r, err)
		}
		seg, _, err := index.BuildSegment(ctx, opt.Store, snap, r, index.Options{HistoryLimit: 500})
		if err == nil && hasBaseline(opt.Configs) {
			o.docs[r], err = readDocs(snap, r, nil)
		}
		snap.Close()
		if err != nil {
			return nil, fmt.Errorf("eval: org: index %s: %w", r, err)
		}
		o.segs[r] = seg
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "org [%d/%d] %s at HEAD (%d files, %.1fs)\n", i+1, len(repos), r, len(seg.Files), time.Since(start).Seconds())
		}
	}
	return o, nil
}

func hasBaseline(cs []Config) bool {
	return slices.ContainsFunc(cs, func(c Config) bool { return c.Baseline })
}

// others are the org's repositories but repo, by name: their segments
// and baseline files.
func (o *org) others(repo string) ([]*segment.Segment, []*docs) {
	if o == nil {
		return nil, nil
	}
	names := make([]string, 0, len(o.segs))
	for r := range o.segs {
		if r != repo {
			names = append(names, r)
		}
	}
	slices.Sort(names)
	segs := make([]*segment.Segment, len(names))
	var ds []*docs
	for i, r := range names {
		segs[i] = o.segs[r]
		if d := o.docs[r]; d != nil {
			ds = append(ds, d)
		}
	}
	return segs, ds
}

// orgKeys names repo's paths as an org-wide ranking does: repo\x00path.
func orgKeys(repo string, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = repo + "\x00" + p
	}
	return out
}

// runOrgQuery is runQuery over the task's segment and the org's others,
// fused and packed as the API fuses a query over several repositories.
// A file is named by repository and path, so another repository's file of
// the same path is no gold file.
func runOrgQuery(ctx context.Context, seg *segment.Segment, others []*segment.Segment, t Task, c Config, budgets []int, changed map[string][]int, sh *shown) (TaskResult, error) {
	res := TaskResult{Task: t.ID, Repo: t.Repo, Language: t.Language, Recall: map[int]float64{}, Tokens: map[int]int{}, PackFiles: map[int]int{}}
	start := time.Now()
	req := c.request(t)
	parts := make([]query.Part, 0, 1+len(others))
	for _, s := range append([]*segment.Segment{seg}, others...) {
		rk, err := (&query.Engine{Seg: s, Model: c.model, ChunkModel: c.chunkModel}).Search(ctx, req)
		if err != nil {
			return res, err
		}
		parts = append(parts, query.Part{Seg: s, Ranking: rk})
	}
	res.Trigger = string(parts[0].Ranking.Class.Trigger)
	var files []query.File
	for i, b := range budgets {
		req.Budget = b
		resp := query.PackAll(parts, req, nil)
		if i == 0 {
			res.LatencyUS = int(time.Since(start).Microseconds())
		}
		files = resp.Files
		got := map[string]bool{}
		var own []query.Chunk
		for _, ch := range resp.Chunks {
			if ch.Repo == t.Repo {
				got[ch.Path] = true
				own = append(own, ch)
			}
		}
		res.Recall[b] = recall(t.GoldFiles, got)
		if l, ok := lineRecall(changed, own, sh); ok {
			if res.Lines == nil {
				res.Lines = map[int]float64{}
			}
			res.Lines[b] = l
		}
		res.Tokens[b] = resp.Tokens
		res.PackFiles[b] = len(got)
	}
	if len(budgets) == 0 {
		files = query.PackAll(parts, req, nil).Files
		res.LatencyUS = int(time.Since(start).Microseconds())
	}
	ranked := make([]string, len(files))
	for i, f := range files {
		ranked[i] = f.Repo + "\x00" + f.Path
	}
	scoreRanking(&res, orgKeys(t.Repo, t.GoldFiles), ranked)
	for i := range res.Top {
		res.Top[i] = orgName(res.Top[i])
	}
	return res, nil
}

// orgName shows a file of an org-wide ranking as repo:path.
func orgName(key string) string {
	return strings.Replace(key, "\x00", ":", 1)
}
