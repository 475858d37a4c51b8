package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/index"
	"codectx/pkg/query"
)

// PushReport is what `codectx bench-push --json` prints: one entry per
// target, in the order of --server.
type PushReport struct {
	Targets []PushTarget `json:"targets"`
}

// PushTarget is the outcome of the pushes to one server.
type PushTarget struct {
	Server string  `json:"server"`
	Dir    string  `json:"dir"`
	Pushes int     `json:"pushes"`
	P50ms  float64 `json:"p50_ms"`
	P95ms  float64 `json:"p95_ms"`
	MeanMs float64 `json:"mean_ms"`
	MinMs  float64 `json:"min_ms"`
	MaxMs  float64 `json:"max_ms"`
	// AcceptedMs is the mean time the webhook took to answer 202.
	AcceptedMs float64 `json:"accepted_ms"`
	// Queries is the mean number of queries a push needed before one
	// answered from the new commit with the new content.
	Queries float64      `json:"queries"`
	Each    []PushTiming `json:"each"`
}

// PushTiming is one push: the time from the webhook POST to its 202, and
// to the first query that returned the pushed content.
type PushTiming struct {
	Commit      string  `json:"commit"`
	AcceptedMs  float64 `json:"accepted_ms"`
	QueryableMs float64 `json:"queryable_ms"`
	Queries     int     `json:"queries"`
	// ServedMs is when the first query answered from the new commit was
	// sent (HEAD had moved), and LoadMs how long it took: the new index
	// loaded and searched.
	ServedMs float64 `json:"served_ms"`
	LoadMs   float64 `json:"load_ms"`
}

// runBenchPush measures one-file push to queryable on running servers:
// for each push it commits a one-file change in the server's repository
// work tree, posts a signed GitHub push webhook for it and queries until
// an answer comes from the new commit and holds the new content. With
// several servers (each with its own work tree) the pushes alternate
// between them, so that the servers share the machine's load alike.
func runBenchPush(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench-push", flag.ContinueOnError)
	fs.SetOutput(usageOut("bench-push", stderr, args))
	servers := fs.String("server", env(envServer, ""), "server URL, or several separated by commas (required) ($"+envServer+")")
	dirs := fs.String("dir", "", "git work tree the server indexes, one per server, separated by commas (required); the bench commits in it")
	tenant := fs.String("tenant", index.DefaultTenant, "tenant of the webhook route")
	repo := fs.String("repo", "", "repository name the webhook names (full_name; required)")
	branch := fs.String("branch", "master", "branch the commits go to (the work tree's checked-out branch)")
	file := fs.String("file", "codectx_bench_push.go", "file of the work tree each push changes (created if missing); a marker function is appended to its original content")
	pushes := fs.Int("pushes", 20, "pushes per server")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up on a push not queryable after this long")
	duration := fs.Duration("duration", 30*time.Minute, "stop after this long in all")
	poll := fs.Duration("poll", 5*time.Millisecond, "pause between the queries of a push (run the servers with --rate-limit -1: 200 queries a second are above the default tenant rate)")
	initial := fs.Duration("initial-timeout", 30*time.Minute, "how long the first push (indexing the work tree's HEAD) may take")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: codectx bench-push --server URL[,URL...] --dir WORKTREE[,...] --repo NAME [flags]\n\nMeasures one-file push to queryable on running servers: commits to the work tree, sends a signed webhook, and times until a query answers from the new commit.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	urls, trees := splitList(*servers), splitList(*dirs)
	if len(urls) == 0 || *repo == "" || len(trees) != len(urls) {
		fs.Usage()
		return errors.New("bench-push: --server, --repo and one --dir per server are required")
	}
	secret := os.Getenv(envWebhookSecret)
	if secret == "" {
		return fmt.Errorf("bench-push: $%s must hold the servers' webhook secret", envWebhookSecret)
	}
	if *pushes < 1 {
		return errors.New("bench-push: --pushes must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	ps := make([]*pusher, len(urls))
	for i, u := range urls {
		abs, err := filepath.Abs(trees[i])
		if err != nil {
			return fmt.Errorf("bench-push: %w", err)
		}
		p := &pusher{
			url: strings.TrimRight(u, "/"), dir: abs, tenant: *tenant, repo: *repo, branch: *branch, file: *file,
			secret: secret, poll: *poll, http: &http.Client{},
			cl: &api.Client{BaseURL: strings.TrimRight(u, "/"), Key: os.Getenv(envAPIKey)},
		}
		if p.orig, err = os.ReadFile(filepath.Join(abs, *file)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("bench-push: %w", err)
		}
		if len(p.orig) == 0 && strings.HasSuffix(*file, ".go") {
			p.orig = []byte("package benchpush\n")
		}
		ps[i] = p
	}
	// The first push of each server indexes its work tree (and the
	// benchmark's file) without being measured.
	for _, p := range ps {
		p.poll = max(*poll, 100*time.Millisecond) // indexing a whole tree takes a while
		_, err := p.push(ctx, *initial)
		p.poll = *poll
		if err != nil {
			return fmt.Errorf("bench-push: first push to %s: %w", p.url, err)
		}
	}
	rep := PushReport{}
	for i := 0; i < *pushes && ctx.Err() == nil; i++ {
		for _, p := range ps {
			t, err := p.push(ctx, *timeout)
			if err != nil {
				return fmt.Errorf("bench-push: push %d to %s: %w", i+1, p.url, err)
			}
			p.each = append(p.each, t)
		}
	}
	for _, p := range ps {
		rep.Targets = append(rep.Targets, summarisePushes(p.url, p.dir, p.each))
	}
	if *asJSON {
		return writeIndented(stdout, rep)
	}
	for _, t := range rep.Targets {
		fmt.Fprintf(stdout, "%s: %d pushes, push to queryable p50 %.0f ms, p95 %.0f ms, mean %.0f ms (min %.0f, max %.0f); webhook answered in %.1f ms, %.1f queries a push\n",
			t.Server, t.Pushes, t.P50ms, t.P95ms, t.MeanMs, t.MinMs, t.MaxMs, t.AcceptedMs, t.Queries)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// summarisePushes is the target's percentiles over its pushes.
func summarisePushes(server, dir string, each []PushTiming) PushTarget {
	t := PushTarget{Server: server, Dir: dir, Pushes: len(each), Each: each}
	if len(each) == 0 {
		return t
	}
	lat := make([]float64, len(each))
	var sum, acc, q float64
	for i, e := range each {
		lat[i] = e.QueryableMs
		sum += e.QueryableMs
		acc += e.AcceptedMs
		q += float64(e.Queries)
	}
	slices.Sort(lat)
	n := float64(len(lat))
	pct := func(p float64) float64 { return lat[min(len(lat)-1, int(p*n))] }
	t.P50ms, t.P95ms, t.MeanMs, t.MinMs, t.MaxMs = pct(0.5), pct(0.95), sum/n, lat[0], lat[len(lat)-1]
	t.AcceptedMs, t.Queries = acc/n, q/n
	return t
}

// pusher pushes to one server.
type pusher struct {
	url, dir, tenant, repo, branch, file, secret string
	orig                                         []byte // the file's content before the first push
	poll                                         time.Duration
	http                                         *http.Client
	cl                                           *api.Client
	head                                         string // the commit last pushed
	each                                         []PushTiming
}

// push commits a change of the file, posts its webhook and queries until
// the change is served.
func (p *pusher) push(ctx context.Context, limit time.Duration) (PushTiming, error) {
	marker := "CodectxBenchPush" + strings.ToLower(rand.Text()[:12])
	body := append(slices.Clip(p.orig), []byte("\n// "+marker+" marks one push of codectx bench-push.\nfunc "+marker+"() {}\n")...)
	path := filepath.Join(p.dir, p.file)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return PushTiming{}, err
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		return PushTiming{}, err
	}
	if err := p.git(ctx, "add", "--", p.file); err != nil {
		return PushTiming{}, err
	}
	if err := p.git(ctx, "-c", "user.name=codectx bench", "-c", "user.email=bench@codectx.invalid", "commit", "-q", "--no-verify", "-m", "bench-push "+marker); err != nil {
		return PushTiming{}, err
	}
	out, err := exec.CommandContext(ctx, "git", "-C", p.dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return PushTiming{}, fmt.Errorf("git rev-parse: %w", err)
	}
	commit := strings.TrimSpace(string(out))
	before := p.head
	if before == "" {
		before = strings.Repeat("0", 40)
	}
	hook, err := json.Marshal(map[string]any{
		"ref": "refs/heads/" + p.branch, "before": before, "after": commit,
		"repository": map[string]any{"full_name": p.repo, "clone_url": p.dir, "default_branch": p.branch},
	})
	if err != nil {
		return PushTiming{}, err
	}
	pctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodPost, p.url+"/v1/webhooks/github/"+p.tenant, bytes.NewReader(hook))
	if err != nil {
		return PushTiming{}, err
	}
	m := hmac.New(sha256.New, []byte(p.secret))
	m.Write(hook)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", rand.Text())
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	start := time.Now()
	resp, err := p.http.Do(req)
	if err != nil {
		return PushTiming{}, fmt.Errorf("webhook: %w", err)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	accepted := time.Since(start)
	if resp.StatusCode != http.StatusAccepted {
		return PushTiming{}, fmt.Errorf("webhook: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	p.head = commit
	t := PushTiming{Commit: commit, AcceptedMs: ms(accepted)}
	for {
		t.Queries++
		sent := time.Now()
		r, err := p.cl.Query(pctx, api.QueryRequest{Tenant: p.tenant, Repo: p.repo, Query: marker, Budget: 500})
		if err == nil && r.Commit == commit && t.ServedMs == 0 {
			t.ServedMs, t.LoadMs = ms(sent.Sub(start)), ms(time.Since(sent))
		}
		if err == nil && r.Commit == commit && slices.ContainsFunc(r.Chunks, func(c query.Chunk) bool { return strings.Contains(c.Text, marker) }) {
			t.QueryableMs = ms(time.Since(start))
			return t, nil
		}
		if pctx.Err() != nil {
			st, _ := p.cl.Status(context.WithoutCancel(ctx), p.tenant, p.repo)
			return t, fmt.Errorf("commit %.12s not served within %v (last query error: %v; status: %+v)", commit, limit, err, st)
		}
		select {
		case <-pctx.Done():
		case <-time.After(p.poll):
		}
	}
}

func (p *pusher) git(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "git", append([]string{"-C", p.dir}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("git %s: %w: %s", args[0], err, bytes.TrimSpace(out))
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
