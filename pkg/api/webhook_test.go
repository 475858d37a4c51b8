package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"codectx/pkg/blob"
)

func signed(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// ping sends acme's signed GitHub ping to the server at base.
func ping(t *testing.T, base, secret string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/webhooks/github/acme", strings.NewReader(`{}`))
	req.Header.Set("X-GitHub-Event", "ping")
	req.Header.Set("X-Hub-Signature-256", signed(secret, `{}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestWebhook(t *testing.T) {
	const after = "2222222222222222222222222222222222222222"
	push := `{"ref":"refs/heads/main","before":"1111111111111111111111111111111111111111","after":"` + after +
		`","repository":{"full_name":"acme/shop","clone_url":"https://git.example/acme/shop.git","default_branch":"main"}}`
	localPush := strings.Replace(push, "https://git.example/acme/shop.git", "/etc", 1)
	filePush := strings.Replace(push, "https://git.example/acme/shop.git", "file:///etc", 1)
	fake := &fakeIndexer{}
	store := blob.NewMem()
	ts, _ := newServer(t, &Server{Store: store, Indexer: fake, Routes: AllRoutes,
		Webhooks: WebhookConfig{Secrets: map[string]string{"acme": "a-secret", "other": "o-secret"}}})

	post := func(path, event, sig, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+path, bytes.NewBufferString(body))
		req.Header.Set("X-GitHub-Event", event)
		if sig != "" {
			req.Header.Set("X-Hub-Signature-256", sig)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}

	tests := []struct {
		name      string
		path      string
		event     string
		sig       string
		body      string
		code      int
		wantIndex bool
	}{
		{"push", "/v1/webhooks/github/acme", "push", signed("a-secret", push), push, http.StatusAccepted, true},
		{"another tenant's secret", "/v1/webhooks/github/other", "push", signed("a-secret", push), push, http.StatusUnauthorized, false},
		{"unsigned", "/v1/webhooks/github/acme", "push", "", push, http.StatusUnauthorized, false},
		{"tenant without webhooks", "/v1/webhooks/github/nobody", "push", signed("a-secret", push), push, http.StatusUnauthorized, false},
		{"invalid tenant", "/v1/webhooks/github/a..b", "push", signed("a-secret", push), push, http.StatusBadRequest, false},
		{"malformed", "/v1/webhooks/github/acme", "push", signed("a-secret", `{"ref":`), `{"ref":`, http.StatusBadRequest, false},
		{"ping", "/v1/webhooks/github/acme", "ping", signed("a-secret", `{}`), `{}`, http.StatusOK, false},
		{"unknown host", "/v1/webhooks/svn/acme", "push", signed("a-secret", push), push, http.StatusNotFound, false},
		{"local clone URL", "/v1/webhooks/github/acme", "push", signed("a-secret", localPush), localPush, http.StatusForbidden, false},
		{"file clone URL", "/v1/webhooks/github/acme", "push", signed("a-secret", filePush), filePush, http.StatusForbidden, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(fake.reqs)
			code, body := post(tt.path, tt.event, tt.sig, tt.body)
			if code != tt.code {
				t.Errorf("status = %d (%v), want %d", code, body, tt.code)
			}
			if got := len(fake.reqs) > before; got != tt.wantIndex {
				t.Errorf("index requested = %v, want %v", got, tt.wantIndex)
			}
		})
	}
	// A path is refused in the words of its switch: no key is involved.
	for _, body := range []string{localPush, filePush} {
		if _, m := post("/v1/webhooks/github/acme", "push", signed("a-secret", body), body); !strings.Contains(fmt.Sprint(m["error"]), "CODECTX_WEBHOOK_ALLOW_LOCAL") || strings.Contains(fmt.Sprint(m["error"]), "key") {
			t.Errorf("local clone URL refused with %v, want CODECTX_WEBHOOK_ALLOW_LOCAL named", m["error"])
		}
	}
	req := fake.reqs[0]
	if req.Tenant != "acme" || req.Repo != "acme/shop" || req.Location != "https://git.example/acme/shop.git" || req.Commit != after {
		t.Errorf("index request = %+v", req)
	}
	// The verified push recorded its clone URL and branch with the
	// repository, for a reindex after the orchestrator's state is lost;
	// the refused ones recorded nothing.
	if keys, err := store.List(context.Background(), "repos/"); err != nil || !slices.Equal(keys, []string{"repos/acme/acme/shop/@/LOCATION", "repos/acme/acme/shop/@/REVISION"}) {
		t.Errorf("records after the pushes: %v, %v; want acme/shop's location and revision only", keys, err)
	}
	if rev, err := store.Get(context.Background(), "repos/acme/acme/shop/@/REVISION"); err != nil || string(rev) != "refs/heads/main" {
		t.Errorf("recorded revision of acme/shop = %q, %v; want the pushed branch", rev, err)
	}
	if loc, err := store.Get(context.Background(), "repos/acme/acme/shop/@/LOCATION"); err != nil || string(loc) != "https://git.example/acme/shop.git" {
		t.Errorf("recorded location of acme/shop = %q, %v", loc, err)
	}
	if _, body := post("/v1/webhooks/github/acme", "ping", signed("a-secret", `{}`), `{}`); body["ignored"] != "event ping" {
		t.Errorf("ping answer = %v, want the reason", body)
	}

	if code, body := post("/v1/webhooks/github/acme", "push", signed("a-secret", push), push); code != http.StatusOK || body["ignored"] != "duplicate delivery" {
		t.Errorf("replayed push = %d %v, want 200 duplicate delivery", code, body)
	}
	// The same signed body sent to the Gitea route (same HMAC-SHA256 hex) is
	// the same delivery, not a new push.
	{
		r, _ := http.NewRequest("POST", ts.URL+"/v1/webhooks/gitea/acme", bytes.NewBufferString(push))
		r.Header.Set("X-Gitea-Event", "push")
		r.Header.Set("X-Gitea-Signature", strings.TrimPrefix(signed("a-secret", push), "sha256="))
		before := len(fake.reqs)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(fake.reqs) != before {
			t.Errorf("GitHub delivery replayed on the Gitea route = %d (index requested: %v), want 200 duplicate", resp.StatusCode, len(fake.reqs) != before)
		}
	}
	if !req.Forward {
		t.Errorf("a push's index request may move HEAD back: %+v", req)
	}
	if req.Branch != "main" {
		t.Errorf("index request's branch = %q, want main (an older commit is published when it is the branch's tip)", req.Branch)
	}

	push2 := strings.Replace(push, after, "3333333333333333333333333333333333333333", 1)
	fake.fail = errors.New("temporal down")
	if code, _ := post("/v1/webhooks/github/acme", "push", signed("a-secret", push2), push2); code != http.StatusServiceUnavailable {
		t.Errorf("push with the orchestrator down = %d, want 503 (the host retries)", code)
	}
	fake.fail = nil
	if code, _ := post("/v1/webhooks/github/acme", "push", signed("a-secret", push2), push2); code != http.StatusAccepted {
		t.Errorf("the host's retry of a delivery that failed = %d, want 202", code)
	}
}

func TestBodyBudget(t *testing.T) {
	ctx := context.Background()
	// take reserves d's next chunk and marks it full (its bytes arrived).
	take := func(d *bodyRead, wait time.Duration) error {
		c, _, err := d.reserve(ctx, wait)
		if err == nil {
			d.chunks = append(d.chunks, c[:cap(c)])
		}
		return err
	}
	bounded := func(b *bodyBudget) {
		t.Helper()
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.held+b.idleBytes > b.size {
			t.Fatalf("lent %d and idle %d bytes: more than the budget of %d", b.held, b.idleBytes, b.size)
		}
	}
	b := newBodyBudget(64 << 10)
	// Chunks grow with the body: 4, 8, 16, 32 KiB (60 KiB), then 64.
	d1 := b.start()
	for range 4 {
		if err := take(d1, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if d1.held != 60<<10 {
		t.Fatalf("a body of four chunks holds %d bytes, want 60 KiB", d1.held)
	}
	d2 := b.start()
	if err := take(d2, time.Second); err != nil {
		t.Fatal(err)
	}
	// The budget is lent: a third waits its time out, or ends with its
	// request. d1 and d2 are being read (not waiting): no standstill.
	d3 := b.start()
	if err := take(d3, 20*time.Millisecond); !errors.Is(err, errBusy) {
		t.Fatalf("a chunk with the budget lent = %v, want errBusy", err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := d3.reserve(gone, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("reserve on an ended request = %v, want context.Canceled", err)
	}
	bounded(b)

	// A chunk given back goes to the next body as it is.
	first := &d2.chunks[0][0]
	d2.release()
	if err := take(d3, time.Second); err != nil {
		t.Fatal(err)
	}
	if &d3.chunks[0][0] != first {
		t.Error("a chunk given back under load was not reused")
	}
	d3.release()
	d1.release()
	bounded(b)
	b.mu.Lock()
	if b.held != 0 || b.idleBytes > keepBuffer || b.holders != 0 || len(b.queue) != 0 {
		t.Errorf("idle budget: %d lent, %d idle (want at most %d), %d holders, %d waiting", b.held, b.idleBytes, keepBuffer, b.holders, len(b.queue))
	}
	b.mu.Unlock()

	// Bodies arriving together fill the budget part way each and all wait
	// for more: the youngest is refused at once, not after the wait, and
	// the older one goes on with what it gives back.
	b = newBodyBudget(128 << 10)
	old, young := b.start(), b.start()
	for range 4 {
		if err := take(old, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := take(young, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	oldDone := make(chan error, 1)
	go func() { oldDone <- take(old, 10*time.Second) }()
	for b.waiting() == 0 {
		time.Sleep(time.Millisecond)
	}
	t0 := time.Now()
	if err := take(young, 10*time.Second); !errors.Is(err, errBusy) || time.Since(t0) > 5*time.Second {
		t.Fatalf("the youngest of two bodies waiting for each other = %v after %v, want errBusy at once", err, time.Since(t0))
	}
	young.release()
	if err := <-oldDone; err != nil {
		t.Fatalf("the older body after the youngest was refused = %v", err)
	}
	bounded(b)

	// A waiter never needs more than a chunk of 64 KiB, and one that
	// cannot be served at all does not hold up those behind it.
	other := b.start()
	if err := take(other, time.Second); err != nil { // 4 of the 4 KiB left
		t.Fatal(err)
	}
	big := make(chan error, 1)
	go func() { big <- take(old, 10*time.Second) }() // 64 KiB
	for b.waiting() < 1 {
		time.Sleep(time.Millisecond)
	}
	small := b.start()
	smallDone := make(chan error, 1)
	go func() { smallDone <- take(small, 10*time.Second) }() // 4 KiB, behind it
	for b.waiting() < 2 {
		time.Sleep(time.Millisecond)
	}
	// other's end frees 4 KiB, not the head's 64; old is then the only
	// body holding budget and it waits for more than is left beside it:
	// it is refused at once, and the small waiter behind it goes on.
	other.release()
	if err := <-big; !errors.Is(err, errBusy) {
		t.Fatalf("a body that cannot fit beside nothing else = %v, want errBusy", err)
	}
	old.release()
	if err := <-smallDone; err != nil {
		t.Fatalf("the small waiter = %v", err)
	}
	small.release()
	bounded(b)
}

// A delivery that trickles its body holds its share of the budget only
// for Limits.WebhookRead, not the server's read timeout: with a budget of
// 64 KiB, a sender that sent 28 KiB (holding 60 KiB) and then trickles
// leaves a signed ping of 6 KB (4 + 8 KiB of chunks) waiting for its
// second chunk, which it gets once the slow one is cut, not a 503.
func TestWebhookSlowBodyFreesSlot(t *testing.T) {
	srv := &Server{Store: blob.NewMem(), Indexer: &fakeIndexer{}, Routes: AllRoutes,
		Limits:   Limits{WebhookBytes: 64 << 10, WebhookBody: 64 << 10, WebhookRead: 300 * time.Millisecond},
		Webhooks: WebhookConfig{Secrets: map[string]string{"acme": "a-secret"}}}
	ts, _ := newServer(t, srv)
	addr := strings.TrimPrefix(ts.URL, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/webhooks/github/acme HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\nX-Hub-Signature-256: %s\r\nContent-Length: 60000\r\n\r\n", addr, signed("a-secret", "x"))
	conn.Write(bytes.Repeat([]byte(" "), 28<<10+1))
	stop := make(chan struct{})
	defer close(stop)
	go func() { // then a byte every 100 ms
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	for lent(srv) < 60<<10 { // the slow delivery holds its 60 KiB
		time.Sleep(5 * time.Millisecond)
	}
	body := `{"zen":"` + strings.Repeat("x", 6000) + `"}`
	req, _ := http.NewRequest("POST", ts.URL+"/v1/webhooks/github/acme", strings.NewReader(body))
	req.Header.Set("X-GitHub-Event", "ping")
	req.Header.Set("X-Hub-Signature-256", signed("a-secret", body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a ping behind a trickling delivery = %d, want 200 (the slow one cut after 300 ms)", resp.StatusCode)
	}
}

// A delivery must keep pace: past the grace, a sender slower than
// Limits.WebhookRate is cut with 408 (and a ping sent meanwhile is
// answered), while one at twice the rate finishes though it takes several
// times the grace.
func TestWebhookPace(t *testing.T) {
	ts, _ := newServer(t, &Server{Store: blob.NewMem(), Indexer: &fakeIndexer{}, Routes: AllRoutes,
		Limits:   Limits{WebhookRead: time.Minute, WebhookGrace: 300 * time.Millisecond, WebhookRate: 1000},
		Webhooks: WebhookConfig{Secrets: map[string]string{"acme": "a-secret"}}})
	addr := strings.TrimPrefix(ts.URL, "http://")
	// send writes a delivery's headers, then its body n bytes every
	// 50 ms, and returns the status line's code.
	send := func(body string, n int) (int, time.Duration) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Error(err)
			return 0, 0
		}
		defer conn.Close()
		start := time.Now()
		fmt.Fprintf(conn, "POST /v1/webhooks/github/acme HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-GitHub-Event: ping\r\nX-Hub-Signature-256: %s\r\nContent-Length: %d\r\n\r\n", addr, signed("a-secret", body), len(body))
		go func() {
			for i := 0; i < len(body); i += n {
				time.Sleep(50 * time.Millisecond)
				if _, err := conn.Write([]byte(body[i:min(i+n, len(body))])); err != nil {
					return
				}
			}
		}()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Error(err)
			return 0, 0
		}
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	body := `{"zen":"` + strings.Repeat("x", 2990) + `"}`

	// 20 bytes a second (1 byte every 50 ms) against a floor of 1000.
	slow := make(chan int, 1)
	go func() { code, _ := send(body, 1); slow <- code }()
	time.Sleep(100 * time.Millisecond) // the trickler is being read
	if code := ping(t, ts.URL, "a-secret"); code != http.StatusOK {
		t.Errorf("a ping behind a trickling delivery = %d, want 200 (the trickler cut after the grace)", code)
	}
	if code := <-slow; code != http.StatusRequestTimeout {
		t.Errorf("the trickling delivery = %d, want 408", code)
	}

	// 2000 bytes a second: 3000 bytes take 1.5 s, five times the grace.
	if code, took := send(body, 100); code != http.StatusOK || took < time.Second {
		t.Errorf("a delivery at twice the floor = %d after %v, want 200 after about 1.5 s", code, took)
	}
}

// A delivery reserves the budget as its body arrives: a connection that
// sends headers and nothing holds none of it, one that sent a byte holds
// a first chunk (4 KiB), one that sent 100 KiB at most 64 KiB more.
func TestWebhookBudgetFollowsBody(t *testing.T) {
	srv := &Server{Store: blob.NewMem(), Indexer: &fakeIndexer{}, Routes: AllRoutes,
		Limits:   Limits{WebhookGrace: time.Minute},
		Webhooks: WebhookConfig{Secrets: map[string]string{"acme": "a-secret"}}}
	ts, _ := newServer(t, srv)
	addr := strings.TrimPrefix(ts.URL, "http://")
	var conns []net.Conn
	for range 16 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/webhooks/github/acme HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\nX-Hub-Signature-256: %s\r\nContent-Length: 25000000\r\n\r\n", addr, signed("not-the-secret", "x"))
		conns = append(conns, conn)
	}
	time.Sleep(200 * time.Millisecond) // the handlers wait for bodies
	if n := lent(srv); n != 0 {
		t.Errorf("16 deliveries declaring 25 MB and sending nothing hold %d bytes, want 0", n)
	}
	// wait polls the lent budget until it is want (or 5 s passed).
	wait := func(want int64) int64 {
		deadline := time.Now().Add(5 * time.Second)
		for lent(srv) != want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		return lent(srv)
	}
	conns[0].Write([]byte(" "))
	if n := wait(firstStep); n != firstStep {
		t.Errorf("a delivery that sent a byte: %d bytes lent, want %d", n, firstStep)
	}
	conns[1].Write(bytes.Repeat([]byte(" "), 100<<10))
	if n := wait(firstStep + 124<<10); n != firstStep+124<<10 {
		t.Errorf("and one that sent 100 KiB: %d bytes lent, want %d (chunks of 4, 8, 16, 32 and 64 KiB)", n, firstStep+124<<10)
	}
	// A signed ping beside them is answered at once.
	t0 := time.Now()
	if code := ping(t, ts.URL, "a-secret"); code != http.StatusOK || time.Since(t0) > time.Second {
		t.Errorf("a ping beside them = %d after %v, want 200 at once", code, time.Since(t0))
	}
	for _, c := range conns {
		c.Close()
	}
	if n := wait(0); n != 0 {
		t.Errorf("all senders gone: %d bytes still lent", n)
	}
}
