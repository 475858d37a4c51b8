package main

import (
	"encoding/json"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/query"
	"codectx/pkg/testrepo"
)

// bench-query drives a real server over HTTP and reports what it saw; a
// repository it does not serve is an error, not a report.
func TestBenchQuery(t *testing.T) {
	r := testrepo.New(t)
	r.Commit("initial", testrepo.Small)
	data := t.TempDir()
	if _, err := runCLI(t, "index", "--data", data, "--name", "acme/shop", r.Bare()); err != nil {
		t.Fatal(err)
	}
	store, err := openStore(data)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer((&api.Server{Store: store, Routes: api.QueryRoutes}).Handler())
	defer ts.Close()
	queries := filepath.Join(t.TempDir(), "q.txt")
	if err := os.WriteFile(queries, []byte("Cart.Total\n\nwhere are carts totalled\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "bench-query", "--server", ts.URL, "--repo", "acme/shop", "--clients", "3",
		"--requests", "30", "--warmup", "2", "--queries", queries, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep BenchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	if rep.Requests != 30 || rep.Errors != 0 || rep.Clients != 3 || rep.P50ms <= 0 || rep.P95ms < rep.P50ms || rep.EngineMs <= 0 {
		t.Errorf("report = %+v", rep)
	}
	if _, err := runCLI(t, "bench-query", "--server", ts.URL, "--repo", "nope", "--requests", "5"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("bench-query of an unknown repo: %v, want a 404 error", err)
	}
}

// bench-push commits, posts signed webhooks to a running up and waits for
// a query to serve each commit's new content; a server that refuses the
// delivery (another secret) is an error, not a report.
func TestBenchPush(t *testing.T) {
	const secret = "bench-push-secret-for-tests"
	t.Setenv(envWebhookSecret, secret)
	t.Setenv(envWebhookLocal, "true") // the fixture's clone URL is a local path
	repoDir, _ := gitFixture(t)
	addr := freeAddr(t)
	up := startUp(t, "--data", t.TempDir(), "--listen", addr)
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	out, err := runCLI(t, "bench-push", "--server", "http://"+addr, "--dir", repoDir, "--repo", "acme/shop",
		"--pushes", "2", "--timeout", "1m", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep PushReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	if len(rep.Targets) != 1 || rep.Targets[0].Pushes != 2 || len(rep.Targets[0].Each) != 2 {
		t.Fatalf("report = %+v", rep)
	}
	tg := rep.Targets[0]
	head, err := exec.Command("git", "-C", repoDir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	if e := tg.Each; e[0].Commit == e[1].Commit || e[1].Commit != strings.TrimSpace(string(head)) {
		t.Errorf("pushed commits %s, %s; the work tree's HEAD is %s", e[0].Commit, e[1].Commit, head)
	}
	for _, e := range tg.Each {
		if e.AcceptedMs <= 0 || e.QueryableMs < e.AcceptedMs || e.Queries < 1 {
			t.Errorf("push %+v", e)
		}
	}
	if tg.P50ms <= 0 || tg.P95ms < tg.P50ms || tg.MaxMs < tg.MinMs {
		t.Errorf("summary %+v", tg)
	}
	t.Setenv(envWebhookSecret, "not-the-servers-secret")
	if _, err := runCLI(t, "bench-push", "--server", "http://"+addr, "--dir", repoDir, "--repo", "acme/shop", "--pushes", "1"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("bench-push with another secret: %v, want a 401 error", err)
	}
}

// TestReadServed checks the load generator's reading of timings against
// decoding the whole answer, on answers whose texts hold the key itself.
func TestReadServed(t *testing.T) {
	texts := []string{"", `,"timings_us":{"total":999}`, "\",\"timings_us\":{\"x\":1}", "}\n", `\`}
	for i, text := range texts {
		resp := &query.Response{Query: text, Context: text, Timings: map[string]int{"total": 12, "pack": 3},
			Chunks: []query.Chunk{{Text: text, Path: text}}}
		data, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, '\n')
		got, err := readServed(data)
		if err != nil {
			t.Fatal(err)
		}
		var want served
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got.Timings, want.Timings) {
			t.Errorf("case %d: timings %v, want %v", i, got.Timings, want.Timings)
		}
	}
	if _, err := readServed([]byte(`{"timings_us":`)); err == nil {
		t.Error("a cut answer read without error")
	}
}
