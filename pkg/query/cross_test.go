package query_test

import (
	"context"
	"slices"
	"testing"

	"codectx/pkg/codectx"
	"codectx/pkg/query"
	"codectx/pkg/segment"
	"codectx/pkg/testrepo"
)

func segOf(t *testing.T, name string, files map[string]string) *segment.Segment {
	t.Helper()
	r := testrepo.New(t)
	r.Commit("initial", files)
	return headSeg(t, r, name)
}

// searchParts searches each segment for req: the parts of a query over
// several repositories.
func searchParts(t *testing.T, req query.Request, segs ...*segment.Segment) []query.Part {
	t.Helper()
	var parts []query.Part
	for _, seg := range segs {
		rk, err := (&query.Engine{Seg: seg}).Search(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, query.Part{Seg: seg, Ranking: rk})
	}
	return parts
}

// TestExpandAcross: the top file of one repository's ranking pulls in
// the files of another it is linked to, as their module chunks with the
// graph signal, at half the seed's score for a file it imports and a
// quarter for one that imports it; the arms and the languages of the
// request can leave them out; a file already ranked keeps its score.
func TestExpandAcross(t *testing.T) {
	app := segOf(t, "app", map[string]string{"pay/charge.go": "package pay\n\n// ChargeCustomer charges a customer.\nfunc ChargeCustomer() {}\n"})
	lib := segOf(t, "lib", map[string]string{
		"round/round.go": "package round\n\n// HalfEven rounds.\nfunc HalfEven() {}\n",
		"notes.md":       "# Notes\n\nnothing here\n",
	})
	links := func(repo, path string) []query.FileRef {
		if repo == "app" && path == "pay/charge.go" {
			return []query.FileRef{{Repo: "lib", Path: "round/round.go"}, {Repo: "lib", Path: "notes.md", Importer: true}, {Repo: "other", Path: "x.go"}, {Repo: "lib", Path: "missing.go"}}
		}
		return nil
	}
	search := func(req query.Request) []query.Part {
		t.Helper()
		return searchParts(t, req, app, lib)
	}
	req := query.Request{Query: "charge customer", Route: true}
	parts := search(req)
	if len(parts[1].Ranking.Files) != 0 || len(parts[0].Ranking.Files) == 0 || parts[0].Ranking.Files[0].Path != "pay/charge.go" {
		t.Fatalf("rankings before: app %+v, lib %+v", parts[0].Ranking.Files, parts[1].Ranking.Files)
	}
	before := parts[1].Ranking
	query.ExpandAcross(parts, req, links)
	if len(before.Files) != 0 {
		t.Fatal("ExpandAcross changed the ranking it was given")
	}
	got := parts[1].Ranking.Files
	var paths []string
	for _, f := range got {
		paths = append(paths, f.Path)
	}
	slices.Sort(paths)
	if !slices.Equal(paths, []string{"notes.md", "round/round.go"}) {
		t.Fatalf("lib's files after = %v, want notes.md and round/round.go", paths)
	}
	seed := parts[0].Ranking.Files[0].Score
	for _, f := range got {
		want := seed / 2 // a file the seed imports
		if f.Path == "notes.md" {
			want = seed / 4 // a file that imports the seed
		}
		if f.Score != want || !slices.Equal(f.Signals, []string{"graph"}) {
			t.Errorf("lib file %+v, want score %v and signal graph", f, want)
		}
	}
	resp := query.PackAll(parts, req, nil)
	found := false
	for _, c := range resp.Chunks {
		if c.Repo == "lib" && c.Path == "round/round.go" {
			found = true
		}
	}
	if !found {
		t.Errorf("packed answer has no lib:round/round.go: %+v", resp.Chunks)
	}

	// Only Go: the Markdown file stays out.
	req.Languages = []codectx.Language{codectx.Go}
	parts = search(req)
	query.ExpandAcross(parts, req, links)
	if fs := parts[1].Ranking.Files; len(fs) != 1 || fs[0].Path != "round/round.go" {
		t.Errorf("with languages [go]: lib's files %+v", fs)
	}
	// A file lib ranks itself keeps its own score.
	req = query.Request{Query: "charge customer, half even rounds", Route: true}
	parts = search(req)
	own := map[string]float64{}
	for _, f := range parts[1].Ranking.Files {
		own[f.Path] = f.Score
	}
	if _, ok := own["round/round.go"]; !ok {
		t.Fatalf("lib does not rank round/round.go itself: %+v", parts[1].Ranking.Files)
	}
	query.ExpandAcross(parts, req, links)
	for _, f := range parts[1].Ranking.Files {
		if s, ok := own[f.Path]; ok && s != f.Score {
			t.Errorf("lib's own %s moved from %v to %v", f.Path, s, f.Score)
		}
	}
	// Without the graph arm nothing is added.
	req = query.Request{Query: "charge customer", Route: true, Arms: []string{query.ArmBM25}}
	parts = search(req)
	query.ExpandAcross(parts, req, links)
	if fs := parts[1].Ranking.Files; len(fs) != 0 {
		t.Errorf("without the graph arm: lib's files %+v", fs)
	}
}
