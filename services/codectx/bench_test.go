package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"codectx/pkg/api"
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
