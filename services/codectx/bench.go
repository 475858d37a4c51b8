package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/index"
)

// defaultBenchQueries are asked in rotation when no --queries file is given:
// questions about a compiler (the benchmark repository is Go's cmd/compile).
var defaultBenchQueries = []string{
	"escape analysis of closures",
	"inline small functions cost budget",
	"(*Func).newValue",
	"how are phi nodes placed during ssa construction",
	"dead code elimination pass",
	"what depends on types2.Checker",
	"register allocation spill",
	"bounds check elimination",
	"typecheck generic instantiation",
	"write export data",
	"loop rotation",
	"devirtualize interface calls",
	"nil check elimination",
	"stack frame layout",
	"fix miscompilation in rewrite rules",
	"what changed recently in the inliner",
	"constant folding of shifts",
	"ir.Name escapes",
	"debug line numbers for statements",
	"walk range loops",
}

// BenchReport is what `codectx bench-query --json` prints.
type BenchReport struct {
	Clients  int     `json:"clients"`
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	Seconds  float64 `json:"seconds"`
	QPS      float64 `json:"qps"`
	P50ms    float64 `json:"p50_ms"`
	P95ms    float64 `json:"p95_ms"`
	P99ms    float64 `json:"p99_ms"`
	MeanMs   float64 `json:"mean_ms"`
	// EngineMs is the mean of the server's own timings_us.total (classify,
	// retrieve, fuse) and PackMs of its timings_us.pack: the rest of the
	// latency is HTTP, JSON, the segment cache and the load generator.
	EngineMs float64 `json:"engine_ms"`
	PackMs   float64 `json:"pack_ms"`
}

// runBenchQuery is a load generator: --clients goroutines post queries to a
// running server over HTTP until --requests answers or --duration passed,
// and the latencies seen by the clients are summarised.
func runBenchQuery(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench-query", flag.ContinueOnError)
	fs.SetOutput(usageOut("bench-query", stderr, args))
	server := fs.String("server", env(envServer, ""), "server URL (required) ($"+envServer+")")
	tenant := fs.String("tenant", index.DefaultTenant, "tenant")
	repos := fs.String("repo", "", "repository name, or several separated by commas, queried round-robin (required)")
	clients := fs.Int("clients", 8, "concurrent clients")
	requests := fs.Int("requests", 2000, "stop after this many answers")
	duration := fs.Duration("duration", time.Minute, "stop after this long")
	warmup := fs.Int("warmup", 40, "answers before measuring (each query once at least, to load the segment)")
	budget := fs.Int("budget", 8000, "token budget of each query")
	qfile := fs.String("queries", "", "file of queries, one a line (default: built-in questions about a compiler)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	org := fs.Bool("org", false, "each query asks all the --repo repositories at once, fused into one ranking (--repo '*' = all of the tenant's)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: codectx bench-query --server URL --repo NAME[,NAME...] [flags]\n\nLoad-tests a running query API: concurrent clients post queries until --requests answers or --duration, and the latencies they saw are summarised.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *server == "" || *repos == "" {
		fs.Usage()
		return errors.New("bench-query: --server and --repo are required")
	}
	if *clients < 1 || *requests < 1 {
		return errors.New("bench-query: --clients and --requests must be positive")
	}
	queries := defaultBenchQueries
	if *qfile != "" {
		var err error
		if queries, err = readLines(*qfile); err != nil {
			return fmt.Errorf("bench-query: %w", err)
		}
	}
	b := &bencher{
		url:     strings.TrimRight(*server, "/") + "/v1/query",
		key:     os.Getenv(envAPIKey),
		tenant:  *tenant,
		repos:   strings.Split(*repos, ","),
		queries: queries,
		budget:  *budget,
		org:     *org,
		http:    &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *clients}},
	}
	for i := 0; i < *warmup; i++ {
		if _, err := b.one(ctx, i); err != nil {
			return fmt.Errorf("bench-query: warmup: %w", err)
		}
	}
	rep, err := b.run(ctx, *clients, *requests, *duration)
	if err != nil {
		return fmt.Errorf("bench-query: %w", err)
	}
	if *asJSON {
		return writeIndented(stdout, rep)
	}
	fmt.Fprintf(stdout, "%d clients, %d answers (%d errors) in %.1fs: %.0f queries/s\n", rep.Clients, rep.Requests, rep.Errors, rep.Seconds, rep.QPS)
	fmt.Fprintf(stdout, "latency p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, mean %.1f ms (server: engine %.1f ms, pack %.1f ms)\n",
		rep.P50ms, rep.P95ms, rep.P99ms, rep.MeanMs, rep.EngineMs, rep.PackMs)
	return nil
}

type bencher struct {
	url, key, tenant string
	repos, queries   []string
	budget           int
	org              bool // one query over all repos instead of round-robin
	http             *http.Client
}

// served is the part of a response the load generator reads.
type served struct {
	Timings map[string]int `json:"timings_us"`
}

// one asks query number i (round-robin over queries and repositories).
func (b *bencher) one(ctx context.Context, i int) (served, error) {
	q := api.QueryRequest{
		Tenant: b.tenant, Repo: b.repos[i%len(b.repos)],
		Query: b.queries[(i/len(b.repos))%len(b.queries)], Budget: b.budget,
	}
	if b.org {
		q.Repo, q.Repos, q.Query = "", b.repos, b.queries[i%len(b.queries)]
	}
	body, _ := json.Marshal(q)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url, bytes.NewReader(body))
	if err != nil {
		return served{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if b.key != "" {
		req.Header.Set("Authorization", "Bearer "+b.key)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return served{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return served{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return served{}, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(data))
	}
	return readServed(data)
}

// timingsKey opens the answer's timings_us object. It cannot occur inside
// a JSON string, whose quotes are escaped, so its first occurrence is the
// answer's own key (no object inside an answer has one).
var timingsKey = []byte(`,"timings_us":{`)

// readServed reads the timings of an answer without decoding the rest,
// whose texts are most of its bytes: on the 2 cores the load generator
// shares with the server, decoding all of each answer cost the clients
// a fifth of the server's CPU. An answer of another shape is decoded.
func readServed(data []byte) (served, error) {
	var s served
	if i := bytes.Index(data, timingsKey); i >= 0 && data[0] == '{' && bytes.HasSuffix(data, []byte("}\n")) {
		obj := data[i+len(timingsKey)-1:]
		if j := bytes.IndexByte(obj, '}'); j >= 0 && json.Unmarshal(obj[:j+1], &s.Timings) == nil {
			return s, nil
		}
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return served{}, fmt.Errorf("decode answer: %w", err)
	}
	return s, nil
}

func (b *bencher) run(ctx context.Context, clients, requests int, duration time.Duration) (BenchReport, error) {
	ctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	var (
		next     atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		engine   int64
		packed   int64
		errs     int
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= requests || ctx.Err() != nil {
					return
				}
				t := time.Now()
				s, err := b.one(ctx, i)
				d := time.Since(t)
				mu.Lock()
				if err != nil {
					if ctx.Err() == nil {
						errs++
						if firstErr == nil {
							firstErr = err
						}
					}
				} else {
					lat = append(lat, d)
					engine += int64(s.Timings["total"])
					packed += int64(s.Timings["pack"])
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	if len(lat) == 0 {
		if firstErr != nil {
			return BenchReport{}, firstErr
		}
		return BenchReport{}, errors.New("no answers")
	}
	if errs > len(lat)/100 {
		return BenchReport{}, fmt.Errorf("%d of %d queries failed, first: %w", errs, errs+len(lat), firstErr)
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	pct := func(p float64) float64 { return ms(lat[min(len(lat)-1, int(p*float64(len(lat))))]) }
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	n := float64(len(lat))
	return BenchReport{
		Clients: clients, Requests: len(lat), Errors: errs, Seconds: secs, QPS: n / secs,
		P50ms: pct(0.50), P95ms: pct(0.95), P99ms: pct(0.99), MeanMs: ms(sum) / n,
		EngineMs: float64(engine) / n / 1000, PackMs: float64(packed) / n / 1000,
	}, nil
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no queries", path)
	}
	return out, nil
}
