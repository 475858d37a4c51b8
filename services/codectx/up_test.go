package main

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/temporalserver"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// syncBuffer is an io.Writer safe for the goroutines of `up`.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// gitFixture commits files to a new repository named "shop" and returns
// its directory and commit hash.
func gitFixture(t *testing.T) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "shop")
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod": "module example.com/shop\n\ngo 1.22\n",
		"cart/cart.go": `package cart

// Cart holds the items a customer is about to buy.
type Cart struct{ Items []Item }

// Item is one line of a cart.
type Item struct {
	SKU   string
	Cents int
}

// Total returns the sum of the item prices in cents.
func (c *Cart) Total() int {
	n := 0
	for _, it := range c.Items {
		n += it.Cents
	}
	return n
}
`,
		"payment/refund.go": `package payment

import "errors"

// ErrTooLate is returned when a refund window has passed.
var ErrTooLate = errors.New("refund window closed")

// IssueRefund sends money back to the customer for an order.
func IssueRefund(orderID string, cents int) error {
	if cents <= 0 {
		return errors.New("nothing to refund")
	}
	return nil
}
`,
		"README.md": "# shop\n\nA tiny shop used as a test fixture.\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	h, err := wt.Commit("initial", &git.CommitOptions{Author: &object.Signature{Name: "A", Email: "a@example.com", When: time.Unix(1700000000, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	return dir, h.String()
}

// freeAddr returns a loopback address free when it looked, for a server
// the test starts next (temporalserver.FreePort: below the ephemeral
// range, which an outgoing connection cannot take before the server binds
// it; on CI a kernel-picked port was, "address already in use").
func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := temporalserver.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}

// upProc is one `codectx up` run in a goroutine.
type upProc struct {
	cancel context.CancelFunc
	done   chan error
	out    *syncBuffer
	errs   *syncBuffer
}

func startUp(t *testing.T, args ...string) *upProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &upProc{cancel: cancel, done: make(chan error, 1), out: &syncBuffer{}, errs: &syncBuffer{}}
	go func() { p.done <- run(ctx, append([]string{"up"}, args...), p.out, p.errs) }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop cancels the run and waits (bounded) for it to return.
func (p *upProc) stop(t *testing.T) {
	t.Helper()
	if p.cancel == nil {
		return
	}
	p.cancel()
	p.cancel = nil
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("up returned %v\nstderr:\n%s", err, p.errs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("up did not stop within 60s\nstderr:\n%s", p.errs.String())
	}
}

// waitFor polls cond every 100ms until it holds or the deadline passes.
func (p *upProc) waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		select {
		case err := <-p.done:
			p.cancel = nil
			t.Fatalf("up exited while waiting for %s: %v\nstdout:\n%s\nstderr:\n%s", what, err, p.out.String(), p.errs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v\nstdout:\n%s\nstderr:\n%s", what, limit, p.out.String(), p.errs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestUpIndexQueryRestart(t *testing.T) {
	repoDir, commit := gitFixture(t)
	data := t.TempDir()
	addr := freeAddr(t)
	base := "http://" + addr
	cl := &api.Client{BaseURL: base}

	// The first run has a process budget: it sets Go's soft memory limit
	// (what the mapped shards and the binary leave of it).
	t.Cleanup(func() { debug.SetMemoryLimit(math.MaxInt64) })
	const budget = 1 << 30
	up := startUp(t, "--data", data, "--listen", addr, "--index", repoDir, "--memory-bytes", strconv.Itoa(budget))
	up.waitFor(t, "indexed line", 3*time.Minute, func() bool { return strings.Contains(up.out.String(), "indexed shop@") })
	if lim := debug.SetMemoryLimit(-1); lim <= budget/4 || lim >= budget {
		t.Errorf("up --memory-bytes %d: Go memory limit %d, want within (budget/4, budget)", budget, lim)
	}
	if want := "indexed shop@" + commit[:12] + ": 4 files (4 parsed, 0 reused)"; !strings.Contains(up.out.String(), want) {
		t.Errorf("up output lacks %q:\n%s", want, up.out.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	check := func(when string) {
		t.Helper()
		resp, err := cl.Query(ctx, api.QueryRequest{Repo: "shop", Query: "how are refunds issued to the customer", Budget: 1000})
		if err != nil {
			t.Fatalf("%s: query: %v", when, err)
		}
		if resp.Commit != commit || len(resp.Chunks) == 0 || resp.Chunks[0].Path != "payment/refund.go" {
			t.Fatalf("%s: query answered commit %s with %d chunks (first %+v); want %s, first from payment/refund.go", when, resp.Commit, len(resp.Chunks), resp.Chunks, commit)
		}
	}
	check("first run")

	// A second `up` on the same data dir is refused.
	err := run(ctx, []string{"up", "--data", data, "--listen", freeAddr(t)}, &syncBuffer{}, &syncBuffer{})
	if !errors.Is(err, temporalserver.ErrLocked) || !strings.Contains(err.Error(), "data dir in use") {
		t.Errorf("second up on the same data dir: %v, want %v", err, temporalserver.ErrLocked)
	}

	// The CLI's --server mode: query over HTTP.
	var out syncBuffer
	if err := run(ctx, []string{"query", "--server", base, "--repo", "shop", "--json", "Cart Total"}, &out, &syncBuffer{}); err != nil {
		t.Fatalf("query --server: %v", err)
	}
	if !strings.Contains(out.String(), `"path": "cart/cart.go"`) {
		t.Errorf("query --server output lacks cart/cart.go:\n%s", out.String())
	}
	up.stop(t)

	// Restart on the same data dir: the index and the workflow state are there.
	up = startUp(t, "--data", data, "--listen", addr)
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	check("after restart")
	st, err := cl.Status(ctx, "default", "shop")
	if err != nil {
		t.Fatalf("status after restart: %v", err)
	}
	if st.LastCommit != commit || st.Received != 1 || st.Head == nil || st.Head.Commit != commit {
		t.Errorf("status after restart = %+v, want last commit %s, 1 push received, head at it", st, commit)
	}
	// index --server of the same commit: done, nothing to parse again.
	out = syncBuffer{}
	if err := run(ctx, []string{"index", "--server", base, "--timeout", "1m", repoDir}, &out, &syncBuffer{}); err != nil {
		t.Fatalf("index --server: %v", err)
	}
	if !strings.Contains(out.String(), "indexed shop@"+commit[:12]) {
		t.Errorf("index --server output = %q", out.String())
	}
	t.Logf("stdout of the restarted up:\n%s\nstderr:\n%s", up.out.String(), up.errs.String())
}
