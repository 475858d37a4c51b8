package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/testrepo"
	"codectx/pkg/tlsfile/tlstest"
)

// e2eBin is where scripts/e2e-deps.sh caches the servers of the
// distributed end-to-end test (and scripts/minio.sh the MinIO server).
func e2eBin(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", ".cache", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"temporal", "nats-server", "minio"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not built (scripts/e2e-deps.sh, scripts/minio.sh): %v", b, err)
			}
			t.Skipf("%s not built (run scripts/e2e-deps.sh and scripts/minio.sh install)", b)
		}
	}
	return dir
}

// proc is a server process of the test.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *syncBuffer
}

func startProc(t *testing.T, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, log: &syncBuffer{}}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { p.kill(syscall.SIGKILL) })
	return p
}

// kill sends sig and waits for the process to exit.
func (p *proc) kill(sig syscall.Signal) {
	if p.cmd.Process == nil || p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

func waitTCP(t *testing.T, what, addr string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening on %s after %v", what, addr, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func httpOK(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// metric reads one sample of a Prometheus text page ("" if absent).
func metric(url, sample string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, sample+" "); ok {
			return rest
		}
	}
	return ""
}

// bigRepo makes a bare repository of n Go files under root/name.git and
// returns the working copy it was cloned from.
func bigRepo(t *testing.T, root, name string, n int) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), name)
	files := map[string]string{"go.mod": "module example.com/" + name + "\n\ngo 1.22\n"}
	for i := range n {
		files[fmt.Sprintf("pkg%02d/f%03d.go", i%20, i)] = fmt.Sprintf(
			"package pkg%02d\n\n// Compute%d folds the values of stage %d.\nfunc Compute%d(xs []int) int {\n\tn := 0\n\tfor _, x := range xs {\n\t\tn += x * %d\n\t}\n\treturn n\n}\n", i%20, i, i, i, i)
	}
	files["ledger/ledger.go"] = "package ledger\n\n// Reconcile matches the bank statement against the ledger entries.\nfunc Reconcile(statement, entries []int) bool { return len(statement) == len(entries) }\n"
	gitRun(t, "", "init", "-q", "-b", "main", src)
	for p, body := range files {
		full := filepath.Join(src, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitRun(t, src, "add", "-A")
	gitRun(t, src, "-c", "user.name=A", "-c", "user.email=a@example.com", "commit", "-q", "-m", "initial")
	gitRun(t, "", "clone", "-q", "--bare", src, filepath.Join(root, name+".git"))
	return src
}

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestDistributedEndToEnd runs every role as its own process of the built
// binary against a Temporal dev server, nats-server and MinIO on loopback
// (issue 14): a repository served over git smart HTTP is indexed and
// queried through the query service; then a parse worker is killed with
// SIGKILL mid-snapshot and restarted (the snapshot completes, nothing
// failed), MinIO is stopped for 15 s while querying (answers keep coming
// from the last HEAD, marked stale), and the orchestrator is restarted
// mid-snapshot (it completes). It prints its timings.
func TestDistributedEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	bin := e2eBin(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	t0 := time.Now()
	timing := func(what string, since time.Time) {
		t.Logf("timing: %-44s %6.1fs", what, time.Since(since).Seconds())
	}

	codectx := filepath.Join(t.TempDir(), "codectx")
	build := exec.Command("go", "build", "-o", codectx, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	timing("build codectx", t0)

	// Git over smart HTTP on loopback.
	gitRoot := t.TempDir()
	src := bigRepo(t, gitRoot, "ledger", 600)
	gitBase := testrepo.SmartHTTP(t, gitRoot)
	gitHost := strings.TrimPrefix(gitBase, "http://")
	cloneURL := gitBase + "/ledger.git"

	// Temporal, NATS, MinIO.
	tStart := time.Now()
	tAddr, nAddr, mAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	tHost, tPort, _ := net.SplitHostPort(tAddr)
	startProc(t, "temporal", nil, filepath.Join(bin, "temporal"), "server", "start-dev", "--headless", "--ip", tHost, "--port", tPort,
		"--http-port", portOf(t), "--metrics-port", portOf(t), "--db-filename", filepath.Join(t.TempDir(), "temporal.db"), "--log-level", "error")
	_, nPort, _ := net.SplitHostPort(nAddr)
	// NATS requires mutual TLS of the run's CA: the roles reach it with
	// the files CODECTX_NATS_TLS_* name, as the chart mounts them.
	certs := t.TempDir()
	ca := tlstest.NewCA(t, certs, "e2e")
	natsCert, roleCert := ca.Issue(t, certs, "nats"), ca.Issue(t, certs, "role")
	natsData := t.TempDir()
	startNATS := func() *proc {
		return startProc(t, "nats", nil, filepath.Join(bin, "nats-server"), "-a", "127.0.0.1", "-p", nPort, "-js", "-sd", natsData,
			"--tlsverify", "--tlscert", natsCert.CertFile, "--tlskey", natsCert.KeyFile, "--tlscacert", ca.File)
	}
	nats := startNATS()
	minioData := t.TempDir()
	minioEnv := []string{"MINIO_ROOT_USER=codectx-e2e", "MINIO_ROOT_PASSWORD=codectx-e2e-secret", "MINIO_BROWSER=off", "MINIO_UPDATE=off"}
	startMinio := func() *proc {
		return startProc(t, "minio", minioEnv, filepath.Join(bin, "minio"), "server", "--quiet", "--address", mAddr, "--console-address", freeAddr(t), minioData)
	}
	minio := startMinio()
	waitTCP(t, "temporal", tAddr, 2*time.Minute)
	waitTCP(t, "nats", nAddr, time.Minute)
	waitTCP(t, "minio", mAddr, time.Minute)
	timing("start temporal, nats, minio", tStart)

	// The roles, each its own process, configured by CODECTX_* only.
	common := []string{
		"CODECTX_TEMPORAL=" + tAddr, "CODECTX_TEMPORAL_NAMESPACE=codectx-e2e", "CODECTX_NATS=tls://" + nAddr,
		"CODECTX_NATS_TLS_CA=" + ca.File, "CODECTX_NATS_TLS_CERT=" + roleCert.CertFile, "CODECTX_NATS_TLS_KEY=" + roleCert.KeyFile,
		"CODECTX_S3_ENDPOINT=" + mAddr, "CODECTX_S3_ACCESS_KEY=codectx-e2e", "CODECTX_S3_SECRET_KEY=codectx-e2e-secret",
		"CODECTX_ALLOW_HOSTS=" + gitHost,
	}
	addrs := map[string]string{}
	role := func(name string) *proc {
		if addrs[name] == "" {
			addrs[name] = freeAddr(t)
		}
		env := append(append([]string(nil), common...), "CODECTX_LISTEN="+addrs[name], "CODECTX_DATA="+filepath.Join(t.TempDir(), name))
		if name == "orchestrator" {
			// The dev server has only "default": the orchestrator registers
			// the run's namespace, as the chart has it do; the other roles
			// are ready once it exists.
			env = append(env, "CODECTX_TEMPORAL_CREATE_NAMESPACE=true")
		}
		return startProc(t, name, env, codectx, name)
	}
	rStart := time.Now()
	procs := map[string]*proc{}
	for _, name := range []string{"orchestrator", "parse-worker", "graph-worker", "embed-worker", "query-service", "gateway"} {
		procs[name] = role(name)
	}
	for name, addr := range addrs {
		deadline := time.Now().Add(2 * time.Minute)
		for code, _ := readyz(t, "http://"+addr); code != 200; code, _ = readyz(t, "http://"+addr) {
			if time.Now().After(deadline) {
				_, r := readyz(t, "http://"+addr)
				t.Fatalf("%s not ready: %+v\n%s", name, r, procs[name].log.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	timing("start six roles until ready", rStart)

	// A gateway pointed at a namespace that does not exist is not ready.
	{
		addr := freeAddr(t)
		env := append(append([]string(nil), common...), "CODECTX_LISTEN="+addr, "CODECTX_DATA="+t.TempDir(), "CODECTX_TEMPORAL_NAMESPACE=no-such-namespace")
		bad := startProc(t, "gateway-bad-namespace", env, codectx, "gateway")
		deadline := time.Now().Add(time.Minute)
		for {
			code, r := readyz(t, "http://"+addr)
			if code == 503 && strings.Contains(r.Checks["temporal"], "no-such-namespace") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("gateway with a missing namespace: /readyz %d %+v\n%s", code, r, bad.log.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
		bad.kill(syscall.SIGTERM)
	}
	defer func() {
		if t.Failed() {
			for name, p := range procs {
				t.Logf("--- %s log:\n%s", name, tail(p.log.String(), 3000))
			}
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	gw := &api.Client{BaseURL: "http://" + addrs["gateway"]}
	qs := &api.Client{BaseURL: "http://" + addrs["query-service"]}
	pushes := 0
	push := func(commit string) {
		t.Helper()
		pushes++
		if _, err := gw.Index(ctx, api.IndexRequest{Repo: "ledger", Location: cloneURL, Commit: commit}); err != nil {
			t.Fatalf("index %s: %v", commit, err)
		}
	}
	status := func() *api.RepoStatus {
		st, err := gw.Status(ctx, "default", "ledger")
		if err != nil {
			return &api.RepoStatus{}
		}
		return st
	}
	waitDone := func(what string, limit time.Duration) *api.RepoStatus {
		t.Helper()
		deadline := time.Now().Add(limit)
		for {
			st := status()
			if st.Done() && st.Covered >= pushes {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not done within %v: %+v", what, limit, st)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	parsedBy := func() float64 {
		var v float64
		fmt.Sscan(metric("http://"+addrs["parse-worker"]+"/metrics", `codectx_items_total{stage="parse"}`), &v)
		return v
	}

	// 1. Index from the clone URL while a parse worker is killed mid-snapshot.
	iStart := time.Now()
	c1 := gitRun(t, src, "rev-parse", "HEAD")
	push(c1)
	for parsedBy() < 1 {
		if time.Since(iStart) > 3*time.Minute {
			t.Fatalf("the parse worker never finished a batch; status %+v", status())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := status(); st.State != api.StateIndexing {
		t.Fatalf("snapshot 1 not running when the parse worker is killed: %+v", st)
	}
	procs["parse-worker"].kill(syscall.SIGKILL)
	killed := time.Now()
	t.Logf("parse worker killed with SIGKILL after %.1fs of indexing", time.Since(iStart).Seconds())
	procs["parse-worker"] = role("parse-worker")
	st := waitDone("snapshot 1", 5*time.Minute)
	timing("index 601 files, one parse worker SIGKILLed", iStart)
	timing("  recovery after the SIGKILL", killed)
	if st.LastError != "" || st.Failed != 0 || st.LastCommit != c1 || st.Files != 602 {
		t.Fatalf("snapshot with a killed worker = %+v, want %s, 602 files, nothing failed", st, c1)
	}
	q := api.QueryRequest{Repo: "ledger", Query: "reconcile the bank statement against the ledger", Budget: 1000}
	resp, err := qs.Query(ctx, q)
	if err != nil || resp.Commit != c1 || len(resp.Chunks) == 0 || resp.Chunks[0].Path != "ledger/ledger.go" {
		t.Fatalf("query through the query service: %v %+v", err, resp)
	}

	// 2. MinIO down for 15 s: queries keep answering from the last HEAD.
	oStart := time.Now()
	minio.kill(syscall.SIGKILL)
	stale, answered, failed := 0, 0, 0
	var slowest time.Duration
	for time.Since(oStart) < 15*time.Second {
		qStart := time.Now()
		r, err := qs.Query(ctx, q)
		if d := time.Since(qStart); d > slowest {
			slowest = d
		}
		switch {
		case err != nil:
			failed++
			t.Logf("query during the outage: %v", err)
		case r.Commit != c1 || len(r.Chunks) == 0:
			failed++
		default:
			answered++
			if r.Stale {
				stale++
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	minio = startMinio()
	waitTCP(t, "minio", mAddr, time.Minute)
	back := time.Now()
	for {
		r, err := qs.Query(ctx, q)
		if err == nil && !r.Stale {
			break
		}
		if time.Since(back) > time.Minute {
			t.Fatalf("queries still stale a minute after MinIO came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("timing: MinIO outage %.1fs: %d queries answered (%d marked stale), %d failed, slowest %v", back.Sub(oStart).Seconds(), answered, stale, failed, slowest.Round(time.Millisecond))
	timing("  fresh answers after MinIO came back", back)
	if failed > 0 || stale == 0 {
		t.Errorf("during the MinIO outage: %d answered, %d stale, %d failed; want all answered, marked stale", answered, stale, failed)
	}
	if v := metric("http://"+addrs["query-service"]+"/metrics", "codectx_stale_head_answers_total"); v == "" || v == "0" {
		t.Errorf("codectx_stale_head_answers_total = %q after the outage", v)
	}

	// 3. Restart the orchestrator mid-snapshot: the snapshot completes.
	for i := range 200 {
		p := filepath.Join(src, fmt.Sprintf("pkg%02d/f%03d.go", i%20, i))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, append(b, []byte(fmt.Sprintf("\n// Revised%d notes the second revision.\nfunc Revised%d() {}\n", i, i))...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitRun(t, src, "-c", "user.name=A", "-c", "user.email=a@example.com", "commit", "-q", "-am", "revise")
	gitRun(t, src, "push", "-q", filepath.Join(gitRoot, "ledger.git"), "main")
	c2 := gitRun(t, src, "rev-parse", "HEAD")
	rsStart := time.Now()
	before := parsedBy()
	push(c2)
	for parsedBy() <= before {
		if time.Since(rsStart) > 3*time.Minute {
			t.Fatalf("snapshot 2 never started parsing; status %+v", status())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := status(); st.State != api.StateIndexing {
		t.Fatalf("snapshot 2 not running when the orchestrator is restarted: %+v", st)
	}
	procs["orchestrator"].kill(syscall.SIGTERM)
	restarted := time.Now()
	procs["orchestrator"] = role("orchestrator")
	st = waitDone("snapshot 2", 5*time.Minute)
	timing("index 200 changed files, orchestrator restarted", rsStart)
	timing("  recovery after the orchestrator restart", restarted)
	if st.LastError != "" || st.Failed != 0 || st.LastCommit != c2 {
		t.Fatalf("snapshot with a restarted orchestrator = %+v, want %s, nothing failed", st, c2)
	}
	resp, err = qs.Query(ctx, api.QueryRequest{Repo: "ledger", Query: "Revised7 second revision", Budget: 1000})
	if err != nil || resp.Commit != c2 {
		t.Fatalf("query after snapshot 2: %v %+v", err, resp)
	}

	// 4. NATS down: the query service cannot hear a DELETE on the
	// gateway, so with MinIO down too it does not answer from the last
	// HEAD it read (step 2's stale answer), it says the store is
	// unavailable. Both come back.
	nats.kill(syscall.SIGKILL)
	minio.kill(syscall.SIGKILL)
	if r, err := qs.Query(ctx, q); err == nil {
		t.Errorf("with NATS and MinIO down, the query service answered from its last HEAD: stale %v, commit %.12s", r.Stale, r.Commit)
	}
	nats, minio = startNATS(), startMinio()
	waitTCP(t, "nats", nAddr, time.Minute)
	waitTCP(t, "minio", mAddr, time.Minute)
	back = time.Now()
	for {
		r, err := qs.Query(ctx, q)
		if err == nil && !r.Stale && r.Commit == c2 {
			break
		}
		if time.Since(back) > time.Minute {
			t.Fatalf("queries not answered a minute after NATS and MinIO came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// 5. DELETE on the gateway: the query service forgets the HEAD it
	// read, so with MinIO down it does not answer the deleted repository
	// from it (stale), it says the store is unavailable (whether it heard
	// the DELETE's notice, or NATS, just back, was not heard yet).
	req, err := http.NewRequestWithContext(ctx, "DELETE", "http://"+addrs["gateway"]+"/v1/repos/default/ledger", nil)
	if err != nil {
		t.Fatal(err)
	}
	dresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dresp.Body.Close()
	if dresp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE on the gateway: %d", dresp.StatusCode)
	}
	minio.kill(syscall.SIGKILL)
	if r, err := qs.Query(ctx, q); err == nil {
		t.Errorf("after a DELETE on the gateway, with MinIO down, the query service answered the deleted repository: stale %v, commit %.12s, %d chunks", r.Stale, r.Commit, len(r.Chunks))
	}
	timing("whole test", t0)
}

// portOf is a free loopback port number.
func portOf(t *testing.T) string {
	_, p, _ := net.SplitHostPort(freeAddr(t))
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
