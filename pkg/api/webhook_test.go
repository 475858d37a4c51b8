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
	req := fake.reqs[0]
	if req.Tenant != "acme" || req.Repo != "acme/shop" || req.Location != "https://git.example/acme/shop.git" || req.Commit != after {
		t.Errorf("index request = %+v", req)
	}
	// The verified push recorded its clone URL with the repository, for a
	// reindex after the orchestrator's state is lost; the refused ones
	// recorded nothing.
	if keys, err := store.List(context.Background(), "repos/"); err != nil || !slices.Equal(keys, []string{"repos/acme/acme/shop/@/LOCATION"}) {
		t.Errorf("records after the pushes: %v, %v; want acme/shop's location only", keys, err)
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

func TestBodyPool(t *testing.T) {
	ctx := context.Background()
	p := newBodyPool(2)
	a, err := p.get(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.get(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Both lent: a third waits its time out, or ends with its request.
	if _, err := p.get(ctx, 20*time.Millisecond); !errors.Is(err, errBusy) {
		t.Fatalf("third get with both lent = %v, want errBusy", err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.get(gone, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("get on an ended request = %v, want context.Canceled", err)
	}

	// A buffer given back while another is lent goes to the next delivery
	// as it is: big bodies reuse the same memory instead of new buffers.
	a.Grow(1 << 20)
	grown := a.Cap()
	p.put(a)
	c, err := p.get(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if c != a || c.Cap() != grown || c.Len() != 0 {
		t.Fatalf("under load got buffer %p (cap %d, len %d), want the one given back, %p, emptied with its %d bytes", c, c.Cap(), c.Len(), a, grown)
	}

	// Once nothing is lent, every buffer is cut back.
	b.Grow(1 << 20)
	p.put(c)
	p.put(b)
	for range p.size() {
		f, err := p.get(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if f.Cap() > keepBuffer {
			t.Errorf("idle pool kept a buffer of %d bytes, want at most %d", f.Cap(), keepBuffer)
		}
		defer p.put(f)
	}
}

// A delivery that trickles its body holds its read slot only for
// Limits.WebhookRead, not the server's read timeout: with one slot, a
// signed ping sent behind a slow sender is answered, not refused 503.
func TestWebhookSlowBodyFreesSlot(t *testing.T) {
	ts, _ := newServer(t, &Server{Store: blob.NewMem(), Indexer: &fakeIndexer{}, Routes: AllRoutes,
		Limits:   Limits{Webhooks: 1, WebhookRead: 300 * time.Millisecond},
		Webhooks: WebhookConfig{Secrets: map[string]string{"acme": "a-secret"}}})
	addr := strings.TrimPrefix(ts.URL, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/webhooks/github/acme HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\nX-Hub-Signature-256: %s\r\nContent-Length: 1000\r\n\r\n", addr, signed("a-secret", "x"))
	stop := make(chan struct{})
	defer close(stop)
	go func() { // a byte every 100 ms: 100 s for the body
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
	time.Sleep(200 * time.Millisecond) // the slow delivery holds the slot
	if code := ping(t, ts.URL, "a-secret"); code != http.StatusOK {
		t.Errorf("a ping behind a trickling delivery = %d, want 200 (the slow one cut after 300 ms)", code)
	}
}

// A delivery that holds a read slot must keep pace: past the grace, a
// sender slower than Limits.WebhookRate is cut with 408 (and a delivery
// waiting for the slot gets it), while one at twice the rate finishes
// though it takes several times the grace.
func TestWebhookPace(t *testing.T) {
	ts, _ := newServer(t, &Server{Store: blob.NewMem(), Indexer: &fakeIndexer{}, Routes: AllRoutes,
		Limits:   Limits{Webhooks: 1, WebhookRead: time.Minute, WebhookGrace: 300 * time.Millisecond, WebhookRate: 1000},
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
	time.Sleep(100 * time.Millisecond) // the trickler holds the only slot
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
