package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/dense"
	"codectx/pkg/embed/embedtest"
	"codectx/pkg/query"
	"codectx/pkg/testrepo"
	"codectx/pkg/tokens"
	"codectx/pkg/vector"
)

// runCLI runs the command in-process and returns stdout.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	if err != nil {
		t.Logf("stderr: %s", errOut.String())
	}
	return out.String(), err
}

func TestIndexAndQueryJSON(t *testing.T) {
	r := testrepo.New(t)
	commit := r.Commit("initial", testrepo.Small)
	data := t.TempDir()
	out, err := runCLI(t, "index", "--data", data, "--name", "acme/shop", "--json", r.Bare())
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Repo, Commit string
		Files        int
		Parsed       int
		Skipped      map[string]int
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("index --json output is not JSON: %v\n%s", err, out)
	}
	if sum.Repo != "acme/shop" || sum.Commit != commit || sum.Files == 0 || sum.Parsed == 0 {
		t.Errorf("summary = %+v", sum)
	}

	out, err = runCLI(t, "query", "--data", data, "--repo", "acme/shop", "--budget", "1500", "--json", "Cart.Total")
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Query   string `json:"query"`
		Trigger string `json:"trigger"`
		Budget  int    `json:"budget"`
		Tokens  int    `json:"tokens"`
		Chunks  []struct {
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
			Text        string   `json:"text"`
		} `json:"chunks"`
		Context string `json:"context"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("query --json output is not JSON: %v", err)
	}
	if resp.Query != "Cart.Total" || resp.Trigger != "EXPLICIT_SYMBOL" || resp.Budget != 1500 {
		t.Errorf("response header = %+v", resp)
	}
	// Count the context ourselves: the answer's own count is not evidence.
	if n := tokens.Count(resp.Context); n > 1500 || n == 0 || n != resp.Tokens {
		t.Errorf("context counts %d tokens (answer says %d), want 1..1500", n, resp.Tokens)
	}
	if len(resp.Chunks) == 0 || resp.Chunks[0].Path != "cart/cart.go" {
		t.Fatalf("chunks = %+v, want cart/cart.go first", resp.Chunks)
	}
	c := resp.Chunks[0]
	if c.Commit != commit || c.StartLine < 1 || c.Granularity == "" || c.Text == "" || len(c.Signals) == 0 {
		t.Errorf("first chunk = %+v", c)
	}

	out, err = runCLI(t, "query", "--data", data, "--repo", "acme/shop", "how is the cart total computed")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"trigger", "cart/cart.go", "context:"} {
		if !strings.Contains(out, want) {
			t.Errorf("human output lacks %q:\n%s", want, out)
		}
	}
}

func TestCLIErrors(t *testing.T) {
	data := t.TempDir()
	for _, args := range [][]string{
		{},
		{"nope"},
		{"index", "--data", data},
		{"index", "--data", data, t.TempDir() + "/missing"},
		{"query", "--data", data, "text"},
		{"query", "--data", data, "--repo", "unknown", "text"},
		{"query", "--data", data, "--repo", "x", "--arms", "bm25,bogus", "text"},
		{"eval", "--data", data},
	} {
		if _, err := runCLI(t, args...); err == nil {
			t.Errorf("codectx %s succeeded, want an error", strings.Join(args, " "))
		}
	}
}

func TestGC(t *testing.T) {
	r := testrepo.New(t)
	r.Commit("initial", testrepo.Small)
	data := t.TempDir()
	if _, err := runCLI(t, "index", "--data", data, "--name", "shop", r.Bare()); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "gc", "--data", data, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ Roots, Cached, Kept, Deleted int }
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("gc --json: %v\n%s", err, out)
	}
	if st.Roots != 1 || st.Kept == 0 || st.Deleted != 0 {
		t.Errorf("gc = %+v, want 1 root and everything it references kept", st)
	}
	if _, err := runCLI(t, "query", "--data", data, "--repo", "shop", "Cart.Total"); err != nil {
		t.Errorf("query after gc: %v", err)
	}
	// With an embedder: the vectors HEAD needs stay, a stale one goes.
	srv := embedtest.NewServer(64, "gc-embed")
	t.Cleanup(srv.Close)
	if _, err := runCLI(t, "index", "--data", data, "--name", "shop", "--embedder", "openai:"+srv.URL+"#gc-embed", r.Bare()); err != nil {
		t.Fatal(err)
	}
	bs, err := openStore(data)
	if err != nil {
		t.Fatal(err)
	}
	stale := dense.CacheKey(vector.Collection{Model: "gc-embed", Dim: 64}, "default", strings.Repeat("ab", 32))
	if err := bs.Put(context.Background(), stale, make([]byte, 4*64)); err != nil {
		t.Fatal(err)
	}
	if out, err = runCLI(t, "gc", "--data", data, "--json"); err != nil {
		t.Fatal(err)
	}
	var est struct {
		Embeddings struct{ Roots, Cached, Kept, Deleted int }
	}
	if err := json.Unmarshal([]byte(out), &est); err != nil {
		t.Fatalf("gc --json: %v\n%s", err, out)
	}
	if e := est.Embeddings; e.Roots != 1 || e.Kept == 0 || e.Deleted != 1 || e.Cached != e.Kept+1 {
		t.Errorf("gc of the embedding cache = %+v, want the stale vector deleted and every other kept", e)
	}
	if ok, _ := bs.Exists(context.Background(), stale); ok {
		t.Error("stale vector kept")
	}
	if out, err := runCLI(t, "index", "--data", data, "--name", "shop", "--embedder", "openai:"+srv.URL+"#gc-embed", r.Bare()); err != nil || !strings.Contains(out, " 0 embedded") {
		t.Errorf("index after gc printed %q (%v), want nothing embedded", out, err)
	}
	// A cache with no roots (codectx eval's) is only emptied on request.
	empty := t.TempDir()
	st2, err := openStore(empty)
	if err != nil {
		t.Fatal(err)
	}
	if err := st2.Put(context.Background(), "parse/v1/go/ab/abcdef", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "gc", "--data", empty); err == nil {
		t.Error("gc emptied a cache with no roots without --all")
	}
	if out, err := runCLI(t, "gc", "--data", empty, "--all"); err != nil || !strings.Contains(out, "deleted 1") {
		t.Errorf("gc --all = %q, %v; want 1 deleted", out, err)
	}
}

// TestGCVectors: after a model switch, gc --vectors drops the vector
// collection and the cached embeddings of the old model and keeps the
// embedder's; without an embedder named it refuses, and a dry run only
// lists. Before, the old model's vectors stayed for good.
func TestGCVectors(t *testing.T) {
	ctx := context.Background()
	r := testrepo.New(t)
	r.Commit("initial", testrepo.Small)
	data := t.TempDir()
	oldSrv, newSrv := embedtest.NewServer(64, "gc-old"), embedtest.NewServer(32, "gc-new")
	t.Cleanup(oldSrv.Close)
	t.Cleanup(newSrv.Close)
	oldSpec, newSpec := "openai:"+oldSrv.URL+"#gc-old", "openai:"+newSrv.URL+"#gc-new"
	for _, spec := range []string{oldSpec, newSpec} {
		if _, err := runCLI(t, "index", "--data", data, "--name", "shop", "--embedder", spec, r.Bare()); err != nil {
			t.Fatal(err)
		}
	}
	bs, err := openStore(data)
	if err != nil {
		t.Fatal(err)
	}
	oldC, newC := vector.Collection{Model: "gc-old", Dim: 64}, vector.Collection{Model: "gc-new", Dim: 32}
	count := func(prefix, suffix string) int {
		keys, err := bs.List(ctx, prefix)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, k := range keys {
			if strings.HasSuffix(k, suffix) {
				n++
			}
		}
		return n
	}
	oldCache, newCache := "embeddings/"+oldC.Name()+"/", "embeddings/"+newC.Name()+"/"
	if count("vectors/", oldC.Name()+".vec") != 1 || count("vectors/", newC.Name()+".vec") != 1 || count(oldCache, "") == 0 || count(newCache, "") == 0 {
		t.Fatalf("fixture: vectors %d/%d, cached %d/%d; want both models' vectors and caches", count("vectors/", oldC.Name()+".vec"), count("vectors/", newC.Name()+".vec"), count(oldCache, ""), count(newCache, ""))
	}
	t.Setenv("CODECTX_EMBEDDER", "")
	if _, err := runCLI(t, "gc", "--data", data, "--vectors"); err == nil || !strings.Contains(err.Error(), "name the embedder the servers use") {
		t.Errorf("gc --vectors without an embedder: %v", err)
	}
	// An embedder whose collection the store does not hold (another
	// dim=, model directory or name) is likely not the servers': it is
	// refused, and nothing goes; --all drops the others anyway. It kept
	// a collection that did not exist and dropped the one in use.
	wrong := newSpec + "?dim=16"
	if _, err := runCLI(t, "gc", "--data", data, "--vectors", "--embedder", wrong); err == nil || !strings.Contains(err.Error(), "holds no collection") {
		t.Errorf("gc --vectors with an embedder of no collection: %v", err)
	}
	if count("vectors/", oldC.Name()+".vec") != 1 || count("vectors/", newC.Name()+".vec") != 1 || count(oldCache, "") == 0 || count(newCache, "") == 0 {
		t.Fatalf("gc --vectors refused dropped vectors or cached embeddings")
	}
	var rep struct {
		Embeddings struct{ Kept, Deleted int }
		Vectors    struct {
			Kept    string
			Dropped []string
		}
	}
	out, err := runCLI(t, "gc", "--data", data, "--vectors", "--embedder", wrong, "--all", "--dry-run", "--json")
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Vectors.Dropped) != 2 {
		t.Fatalf("gc --vectors --all --dry-run with an embedder of no collection = %s (%v); want both listed", out, err)
	}
	out, err = runCLI(t, "gc", "--data", data, "--vectors", "--embedder", newSpec, "--dry-run", "--json")
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || !slices.Equal(rep.Vectors.Dropped, []string{oldC.Name()}) || count("vectors/", oldC.Name()+".vec") != 1 {
		t.Fatalf("gc --vectors --dry-run = %s (%v); want the old collection listed and kept", out, err)
	}
	out, err = runCLI(t, "gc", "--data", data, "--vectors", "--embedder", newSpec, "--json")
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.Vectors.Kept != newC.Name() || !slices.Equal(rep.Vectors.Dropped, []string{oldC.Name()}) {
		t.Fatalf("gc --vectors = %s (%v)", out, err)
	}
	if n := count("vectors/", oldC.Name()+".vec") + count(oldCache, ""); n != 0 {
		t.Errorf("the old model's vectors and cache: %d objects left", n)
	}
	if count("vectors/", newC.Name()+".vec") != 1 || count(newCache, "") == 0 || rep.Embeddings.Kept == 0 {
		t.Errorf("the embedder's vectors or cache went: %s", out)
	}
	if out, err := runCLI(t, "query", "--data", data, "--repo", "shop", "--embedder", newSpec, "--arms", "dense", "cart total"); err != nil || !strings.Contains(out, "cart") {
		t.Errorf("dense query after gc --vectors: %v\n%s", err, out)
	}
}

// TestGCRefusesMissingStore: gc (a cron job) given a mistyped --data or
// --s3-bucket fails; it neither creates the directory or bucket nor
// reports an empty collection.
func TestGCRefusesMissingStore(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo")
	if out, err := runCLI(t, "gc", "--data", missing); err == nil || !strings.Contains(err.Error(), "no codectx data at") {
		t.Errorf("gc --data of a missing directory = %q, %v; want no codectx data", out, err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gc --data created the missing directory: %v", err)
	}
	// An S3 server without the bucket: it is not made (PUT /bucket).
	var mu sync.Mutex
	var reqs []string
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, r.Method+" "+r.URL.Path)
		mu.Unlock()
		if r.Method == http.MethodPut && strings.Count(strings.Trim(r.URL.Path, "/"), "/") == 0 {
			w.WriteHeader(http.StatusOK) // a bucket made
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message><BucketName>typo</BucketName></Error>`)
	}))
	t.Cleanup(s3.Close)
	out, err := runCLI(t, "gc", "--s3-endpoint", strings.TrimPrefix(s3.URL, "http://"), "--s3-bucket", "typo", "--s3-access-key", "k", "--s3-secret-key", "s")
	if err == nil || !strings.Contains(err.Error(), `no S3 bucket "typo"`) {
		t.Errorf("gc --s3-bucket of a missing bucket = %q, %v; want no S3 bucket", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range reqs {
		if strings.HasPrefix(r, "PUT ") {
			t.Errorf("gc --s3-bucket of a missing bucket made it: %v", reqs)
		}
	}
}

// With an API key file, `codectx up` refuses queries without a key of the
// tenant, and the CLI's --server mode sends $CODECTX_API_KEY.
func TestUpAPIKeys(t *testing.T) {
	repoDir, _ := gitFixture(t)
	keys := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keys, []byte(`{"`+api.HashKey("secret-key-default")+`": "default"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envAPIKey, "secret-key-default")
	addr := freeAddr(t)
	up := startUp(t, "--data", t.TempDir(), "--listen", addr, "--api-keys", keys, "--index", repoDir)
	up.waitFor(t, "indexed line", 3*time.Minute, func() bool { return strings.Contains(up.out.String(), "indexed shop@") })
	ctx := context.Background()
	if _, err := (&api.Client{BaseURL: "http://" + addr}).Query(ctx, api.QueryRequest{Repo: "shop", Query: "Cart"}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("query without a key: %v, want 401", err)
	}
	if _, err := (&api.Client{BaseURL: "http://" + addr, Key: "secret-key-default"}).Query(ctx, api.QueryRequest{Tenant: "other", Repo: "shop", Query: "Cart"}); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("query of another tenant: %v, want 403", err)
	}
	out, err := runCLI(t, "query", "--server", "http://"+addr, "--repo", "shop", "--json", "Cart Total")
	if err != nil || !strings.Contains(out, "cart/cart.go") {
		t.Errorf("query --server with $%s: %v\n%s", envAPIKey, err, out)
	}
}

// TestEvalAllFailed: a --git-dir path that does not exist is refused
// before indexing, and a run whose every task failed (a commit the clone
// lacks) exits non-zero without an all-zero table or report: a script
// took those zeros for results.
func TestEvalAllFailed(t *testing.T) {
	r := testrepo.New(t)
	base := r.Commit("initial", testrepo.Small)
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.jsonl")
	line := func(id, commit string) string {
		return `{"id":"` + id + `","repo":"acme/shop","base_commit":"` + commit + `","query":"Fix Cart.Total","gold_files":["cart/cart.go"],"language":"go"}` + "\n"
	}
	write := func(text string) {
		if err := os.WriteFile(tasks, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(line("shop-1", base))
	report := filepath.Join(dir, "report.json")
	missing := filepath.Join(dir, "nothere")
	out, err := runCLI(t, "eval", "--data", t.TempDir(), "--tasks", tasks, "--rank-only", "--git-dir", "acme/shop="+missing)
	if err == nil || !strings.Contains(err.Error(), "--git-dir acme/shop=") || out != "" {
		t.Errorf("eval with a missing --git-dir = %q, %v; want it refused up front", out, err)
	}
	bad := strings.Repeat("0", 40)
	write(line("shop-1", bad) + line("shop-2", bad))
	out, err = runCLI(t, "eval", "--data", t.TempDir(), "--tasks", tasks, "--rank-only", "--git-dir", "acme/shop="+r.Bare(), "--json", report)
	if err == nil || !strings.Contains(err.Error(), "all 2 tasks failed") || strings.Contains(out, "| baseline") {
		t.Errorf("eval with every task failed = %q, %v; want an error and no table", out, err)
	}
	if _, err := os.Stat(report); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("eval with every task failed wrote its report: %v", err)
	}
	// One of two failed: scored zero, the run stands.
	write(line("shop-1", base) + line("shop-2", bad))
	if out, err := runCLI(t, "eval", "--data", t.TempDir(), "--tasks", tasks, "--rank-only", "--git-dir", "acme/shop="+r.Bare()); err != nil || !strings.Contains(out, "1 tasks failed") {
		t.Errorf("eval with one task of two failed = %q, %v", out, err)
	}
}

func TestEvalConfigs(t *testing.T) {
	r := testrepo.New(t)
	base := r.Commit("initial", testrepo.Small)
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.jsonl")
	task := `{"id":"shop-1","repo":"acme/shop","base_commit":"` + base + `","query":"Fix Cart.Total for empty carts","gold_files":["cart/cart.go"],"language":"go"}`
	configs := filepath.Join(dir, "configs.json")
	for name, text := range map[string]string{tasks: task + "\n", configs: `[{"name":"plain","route":true},{"name":"no symbol","route":true,"scale":{"symbol":0}}]`} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	report := filepath.Join(dir, "report.json")
	args := []string{"eval", "--data", t.TempDir(), "--tasks", tasks, "--git-dir", "acme/shop=" + r.Bare()}
	out, err := runCLI(t, append(args, "--rank-only", "--configs", configs, "--json", report)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| plain |", "| no symbol |", "baseline"} {
		if !strings.Contains(out, want) {
			t.Errorf("eval output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "R@2k") {
		t.Errorf("--rank-only output has budget columns:\n%s", out)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Budgets []int                        `json:"budgets"`
		Tasks   map[string][]json.RawMessage `json:"tasks"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Budgets) != 0 || len(rep.Tasks["plain"]) != 1 || len(rep.Tasks["no symbol"]) != 1 {
		t.Errorf("report budgets %v, tasks %v", rep.Budgets, rep.Tasks)
	}
	// --features dumps each task's candidates with gold labels; --by-repo
	// prints the configurations side by side per repository and language.
	feats := filepath.Join(dir, "features.jsonl")
	out, err = runCLI(t, append(args, "--configs", configs, "--features", feats, "--by-repo")...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## by repository", "| acme/shop | plain | 1 |", "| acme/shop | baseline: bm25 whole files | 1 |", "## by language", "| go | no symbol | 1 |", " R@2k |"} {
		if !strings.Contains(out, want) {
			t.Errorf("--by-repo output lacks %q:\n%s", want, out)
		}
	}
	b, err = os.ReadFile(feats)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 { // one task, two configurations
		t.Fatalf("features file has %d lines, want 2:\n%s", len(lines), b)
	}
	var dump struct {
		Task  string   `json:"task"`
		Names []string `json:"names"`
		Files []struct {
			Path string    `json:"path"`
			Gold bool      `json:"gold"`
			X    []float64 `json:"x"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &dump); err != nil {
		t.Fatal(err)
	}
	gold := false
	for _, f := range dump.Files {
		gold = gold || (f.Path == "cart/cart.go" && f.Gold)
		if len(f.X) != len(dump.Names) {
			t.Errorf("%s: %d features, %d names", f.Path, len(f.X), len(dump.Names))
		}
	}
	if dump.Task != "shop-1" || !gold {
		t.Errorf("dump = %+v, want task shop-1 with cart/cart.go labelled gold", dump)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`[{"name":"x","scale":{"grpah":2}}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	unknownRanker := filepath.Join(dir, "ranker.json")
	if err := os.WriteFile(unknownRanker, []byte(`[{"name":"x","ranker":"magic"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{
		{"--configs", bad},
		{"--configs", filepath.Join(dir, "missing.json")},
		{"--configs", configs, "--arms", "bm25"},
		{"--configs", unknownRanker},
	} {
		if _, err := runCLI(t, append(args, extra...)...); err == nil {
			t.Errorf("eval %v succeeded, want an error", extra)
		}
	}
}

func TestHelpOfEveryCommand(t *testing.T) {
	var top bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &top, io.Discard); err != nil {
		t.Fatalf("codectx --help: %v", err)
	}
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			if c.desc == "" || strings.Contains(c.desc, "\n") {
				t.Errorf("description %q, want one line", c.desc)
			}
			if !strings.Contains(top.String(), "  "+c.name+" ") || !strings.Contains(top.String(), c.desc) {
				t.Errorf("codectx --help does not list %s with its description", c.name)
			}
			var out, errOut bytes.Buffer
			if err := run(context.Background(), []string{c.name, "--help"}, &out, &errOut); err != nil {
				t.Fatalf("codectx %s --help: %v, want success", c.name, err)
			}
			// Its own usage line, not the flag package's bare "Usage of X:".
			if !strings.Contains(out.String()+errOut.String(), "usage: codectx "+c.name) {
				t.Errorf("codectx %s --help printed no usage line of its own:\n%s%s", c.name, out.String(), errOut.String())
			}
			// A flag's backquoted word would become its value name
			// ("-server codectx up"): none may have one.
			if strings.Contains(errOut.String(), " codectx up\n") || strings.Contains(errOut.String(), "string codectx") {
				t.Errorf("codectx %s --help has a backquote artefact:\n%s", c.name, errOut.String())
			}
			// Every --data defaults to $CODECTX_DATA, which a shell or
			// container may have set: the help says so.
			if strings.Contains(errOut.String(), "  -data string") && !strings.Contains(errOut.String(), "($"+envData+")") {
				t.Errorf("codectx %s --help does not say that --data is read from $%s", c.name, envData)
			}
			// A webhook naming a local path is refused unless this
			// variable is set, and it has no flag: the help names it.
			if (c.name == "up" || c.name == "gateway") && !strings.Contains(errOut.String(), envWebhookLocal) {
				t.Errorf("codectx %s --help does not name $%s", c.name, envWebhookLocal)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version"} {
		out, err := runCLI(t, arg)
		if err != nil {
			t.Errorf("codectx %s: %v", arg, err)
			continue
		}
		if f := strings.Fields(out); len(f) < 3 || f[0] != "codectx" || !strings.HasPrefix(f[len(f)-1], "go") {
			t.Errorf("codectx %s = %q, want \"codectx VERSION [REVISION] GOVERSION\"", arg, out)
		}
	}
}

func TestQueryFlags(t *testing.T) {
	r := testrepo.New(t)
	r.Commit("initial", testrepo.Small)
	data := t.TempDir()
	if _, err := runCLI(t, "index", "--data", data, "--name", "acme/shop", r.Bare()); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"0", "-5"} {
		if _, err := runCLI(t, "query", "--data", data, "--repo", "acme/shop", "--budget", b, "session"); err == nil || !strings.Contains(err.Error(), "budget") {
			t.Errorf("--budget %s: err = %v, want a budget error", b, err)
		}
	}
	if _, err := runCLI(t, "query", "--data", data, "--repo", "acme/shop", "--languages", "go,cobol", "session"); err == nil || !strings.Contains(err.Error(), "cobol") {
		t.Errorf("--languages go,cobol: err = %v, want an unknown-language error", err)
	}
	paths := func(args ...string) map[string]bool {
		t.Helper()
		out, err := runCLI(t, append([]string{"query", "--data", data, "--repo", "acme/shop", "--json"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var resp struct {
			Chunks []struct{ Path string } `json:"chunks"`
		}
		if err := json.Unmarshal([]byte(out), &resp); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, c := range resp.Chunks {
			got[c.Path] = true
		}
		return got
	}
	// The query names both a Python session and Go code: unfiltered, both
	// languages come back; filtered, only the one asked for.
	all := paths("session handling and cart total price")
	if !all["auth/session.py"] || !all["cart/cart.go"] {
		t.Fatalf("unfiltered query returned %v, want both auth/session.py and cart/cart.go", all)
	}
	for _, lang := range []string{"go", "python"} {
		got := paths("--languages", lang, "session handling and cart total price")
		if len(got) == 0 {
			t.Errorf("--languages %s: no chunks", lang)
		}
		for p := range got {
			if isPy := strings.HasSuffix(p, ".py"); (lang == "python") != isPy || !(isPy || strings.HasSuffix(p, ".go")) {
				t.Errorf("--languages %s returned %s", lang, p)
			}
		}
	}
}

// refuseIndexer is an orchestrator that must not be reached.
type refuseIndexer struct{ t *testing.T }

func (r refuseIndexer) Index(context.Context, api.IndexRequest) (string, error) {
	r.t.Error("index request reached the orchestrator")
	return "", errors.New("not reached")
}

func (r refuseIndexer) Status(context.Context, string, string) (api.RepoStatus, error) {
	return api.RepoStatus{}, errors.New("not reached")
}

func TestErrorsUnderJSON(t *testing.T) {
	srv := httptest.NewServer((&api.Server{Store: blob.NewMem(), Indexer: refuseIndexer{t}, Routes: api.AllRoutes, LocalPaths: true}).Handler())
	defer srv.Close()
	missing := filepath.Join(t.TempDir(), "not-there")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"index --server, path not on the server", []string{"index", "--server", srv.URL, "--json", missing}, "is not a directory on the server"},
		{"query, nothing indexed", []string{"query", "--data", t.TempDir(), "--repo", "nope", "--json", "x"}, "codectx index"},
		{"query, bad budget", []string{"query", "--repo", "r", "--budget", "0", "--json", "x"}, "budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tc.args, &out, &errOut)
			if err == nil || !errors.As(err, new(reported)) {
				t.Fatalf("err = %v, want a reported error", err)
			}
			if out.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", out.String())
			}
			lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
			var e struct{ Error string }
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &e); err != nil || !strings.Contains(e.Error, tc.want) || strings.Contains(e.Error, "\n") {
				t.Errorf("last stderr line %q (%v), want {\"error\": ...%s...}", lines[len(lines)-1], err, tc.want)
			}
		})
	}
	// Without --json the same failure is a plain error, one line.
	_, err := runCLI(t, "index", "--server", srv.URL, missing)
	if err == nil || errors.As(err, new(reported)) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "not a directory on the server") {
		t.Errorf("index --server of a missing path: err = %v, want one plain line", err)
	}
}

// TestReadOnlyDataMustExist: query and mcp --data only read a data
// directory; a mistyped one is an error naming it, and is not created
// (it was, and the repository was then said not to be indexed).
func TestReadOnlyDataMustExist(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo")
	for _, args := range [][]string{
		{"query", "--data", missing, "--repo", "shop", "text"},
		{"mcp", "--data", missing},
	} {
		_, err := runCLI(t, args...)
		if err == nil || !strings.Contains(err.Error(), "no codectx data at "+missing) {
			t.Errorf("codectx %s: %v, want an error naming the missing data directory", strings.Join(args, " "), err)
		}
		if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("codectx %s created %s (%v)", strings.Join(args, " "), missing, err)
		}
	}
}

// TestQueryManyRepos: --repo takes several names or *, fused into one
// answer, with --data as with --server, and the files of the answer name
// their repository. With --data it failed ("default/* has no published
// index"), and with --server a list was refused as a name.
func TestQueryManyRepos(t *testing.T) {
	data := t.TempDir()
	for name, files := range map[string]map[string]string{
		"shop": testrepo.Small,
		"web":  {"web/checkout.ts": "export function checkoutTotal(prices: number[]): number {\n  return prices.reduce((a, b) => a + b, 0)\n}\n"},
	} {
		r := testrepo.New(t)
		r.Commit("initial", files)
		if _, err := runCLI(t, "index", "--data", data, "--tenant", "acme", "--name", name, r.Dir); err != nil {
			t.Fatal(err)
		}
	}
	store, err := openStore(data)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&api.Server{Store: store, Routes: api.QueryRoutes}).Handler())
	defer srv.Close()
	for _, where := range [][]string{{"--data", data}, {"--server", srv.URL}} {
		for _, repos := range []string{"*", "shop, web"} {
			args := append([]string{"query", "--tenant", "acme", "--repo", repos, "--budget", "4000"}, where...)
			out, err := runCLI(t, append(args, "--json", "cart total of prices at checkout")...)
			if err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			var resp query.Response
			if err := json.Unmarshal([]byte(out), &resp); err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, c := range resp.Chunks {
				got[c.Repo] = true
			}
			if !got["shop"] || !got["web"] || resp.Repo != "" {
				t.Errorf("%v: chunks of %v, repo %q; want both repositories in one answer", args, got, resp.Repo)
			}
			human, err := runCLI(t, append(args, "cart total of prices at checkout")...)
			if err != nil || !strings.Contains(human, "repos    shop, web") || !strings.Contains(human, "web:web/checkout.ts") {
				t.Errorf("%v: %v\n%s", args, err, human)
			}
		}
	}
}

// TestIndexNameFromLocation: a directory whose name is no repository
// name ("dir with space") is refused saying the name came from the
// location and to give one; the message blamed a tenant the user never
// gave.
func TestIndexNameFromLocation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dir with space")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	_, err := runCLI(t, "index", "--data", data, dir)
	if err == nil || !strings.Contains(err.Error(), `"dir with space", taken from the location, is not usable`) || !strings.Contains(err.Error(), "--name") || strings.Contains(err.Error(), "tenant") {
		t.Errorf("index of %q: %v", filepath.Base(dir), err)
	}
	if _, err := runCLI(t, "index", "--data", data, "--name", "a b", dir); err == nil || !strings.Contains(err.Error(), `invalid repository name "a b"`) {
		t.Errorf("--name 'a b': %v", err)
	}
	if _, err := runCLI(t, "index", "--data", data, "--name", "dir-with-space", dir); err != nil {
		t.Errorf("--name dir-with-space: %v", err)
	}
}

// TestAbsLocation: a relative path is made absolute for the server when
// it exists here, and is refused in those words when it does not (the
// server answered "want a clone URL or an absolute path" of a typo, for
// index --server and up --index); URLs and absolute paths, which only
// the server can judge, pass unchanged.
func TestAbsLocation(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "repo"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	real, err := filepath.Abs("repo")
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"./repo": real, "repo": real,
		"https://git.example/a/b.git": "https://git.example/a/b.git",
		"git@git.example:a/b.git":     "git@git.example:a/b.git",
		"/srv/on/the/server":          "/srv/on/the/server",
	} {
		if got, err := absLocation(in); err != nil || got != want {
			t.Errorf("absLocation(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, err := absLocation("./nope"); err == nil || !strings.Contains(err.Error(), "./nope: no such file or directory") {
		t.Errorf("absLocation(./nope) = %q, %v; want no such file", got, err)
	}
	// Refused before any request: the server is not even reachable.
	if _, err := runCLI(t, "index", "--server", "http://127.0.0.1:1", "./nope"); err == nil || !strings.Contains(err.Error(), "./nope: no such file or directory") {
		t.Errorf("index --server ./nope: %v, want no such file", err)
	}
}

// TestJSONUsageErrors: under --json a usage error is one line of JSON on
// stderr, without the usage text before it; --help still prints it.
func TestJSONUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"query", "--json", "--repo", "shop"},
		{"index", "--json"},
		{"query", "--json", "--no-such-flag", "x"},
		{"repos", "status", "--json"},
		{"gc", "--json", "extra"},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, &out, &errOut)
		if err == nil {
			t.Errorf("%q: no error", args)
			continue
		}
		lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
		var e map[string]string
		if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &e) != nil || e["error"] == "" {
			t.Errorf("%q: stderr %q, want one line of JSON", args, errOut.String())
		}
	}
	var errOut bytes.Buffer
	if err := run(context.Background(), []string{"query", "--json", "--help"}, io.Discard, &errOut); err != nil || !strings.Contains(errOut.String(), "usage: codectx query") {
		t.Errorf("query --json --help: %v, %q; want the usage text", err, errOut.String())
	}
}
