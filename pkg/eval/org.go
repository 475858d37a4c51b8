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

// orgSegments indexes every repository with a git directory at its HEAD:
// the other repositories of an org-wide query (Options.Org).
func orgSegments(ctx context.Context, opt Options) (map[string]*segment.Segment, error) {
	if opt.Features != nil || opt.ChunkFeatures != nil || opt.Embedder != nil {
		return nil, fmt.Errorf("eval: an org-wide run takes no feature dumps and no embedder")
	}
	repos := make([]string, 0, len(opt.GitDirs))
	for r := range opt.GitDirs {
		repos = append(repos, r)
	}
	slices.Sort(repos)
	out := map[string]*segment.Segment{}
	for i, r := range repos {
		start := time.Now()
		snap, err := source.Open(ctx, opt.GitDirs[r], source.Options{})
		if err != nil {
			return nil, fmt.Errorf("eval: org: %s: %w", r, err)
		}
		seg, _, err := index.BuildSegment(ctx, opt.Store, snap, r, index.Options{HistoryLimit: 500})
		snap.Close()
		if err != nil {
			return nil, fmt.Errorf("eval: org: index %s: %w", r, err)
		}
		out[r] = seg
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "org [%d/%d] %s at HEAD (%d files, %.1fs)\n", i+1, len(repos), r, len(seg.Files), time.Since(start).Seconds())
		}
	}
	return out, nil
}

// others are the org's segments but the one of repo, by name.
func others(org map[string]*segment.Segment, repo string) []*segment.Segment {
	var out []*segment.Segment
	for r, s := range org {
		if r != repo {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *segment.Segment) int { return strings.Compare(a.Meta.Repo, b.Meta.Repo) })
	return out
}

// runOrgQuery is runQuery over the task's segment and the org's others,
// fused and packed as the API fuses a query over several repositories.
// A file is named by repository and path, so another repository's file of
// the same path is no gold file.
func runOrgQuery(ctx context.Context, seg *segment.Segment, others []*segment.Segment, t Task, c Config, budgets []int, changed map[string][]int, sh *shown) (TaskResult, error) {
	res := TaskResult{Task: t.ID, Repo: t.Repo, Language: t.Language, Recall: map[int]float64{}, Tokens: map[int]int{}, PackFiles: map[int]int{}}
	start := time.Now()
	req := query.Request{Query: t.Query, Arms: c.Arms, Route: c.Route, Languages: Languages(t.Language), Scale: c.Scale, Paths: Candidate(t.Language), Ranker: c.Ranker,
		Depth: c.Depth, FileDepth: c.FileDepth, ClassNames: c.ClassNames, Supertypes: c.Supertypes, Shape: c.Pack, Merge: c.Merge}
	parts := make([]query.Part, 0, 1+len(others))
	for _, s := range append([]*segment.Segment{seg}, others...) {
		rk, err := (&query.Engine{Seg: s, Model: c.model}).Search(ctx, req)
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
	gold := make([]string, len(t.GoldFiles))
	for i, g := range t.GoldFiles {
		gold[i] = t.Repo + "\x00" + g
	}
	scoreRanking(&res, gold, ranked)
	for i := range res.Top {
		res.Top[i] = orgName(res.Top[i])
	}
	return res, nil
}

// orgName shows a file of an org-wide ranking as repo:path.
func orgName(key string) string {
	return strings.Replace(key, "\x00", ":", 1)
}
