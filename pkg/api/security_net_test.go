package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"codectx/pkg/blob"
)

// A request refused before its body is read (no key: 401; not JSON: 415;
// a declared length past the route's limit: 413) gets its answer at once
// and its connection closed. net/http used to read up to 256 KiB of the
// unread body first, to reuse the connection: a client that declared
// 100,000 bytes and sent one got no answer, and held the connection, until
// the server's read timeout (60 s; here, with none, for ever).
func TestSecurityRefusalClosesConnection(t *testing.T) {
	store := blob.NewMem()
	ts, _ := newServer(t, &Server{Store: store, Indexer: &fakeIndexer{}, Routes: AllRoutes,
		Keys: Keys{HashKey("acme-key"): "acme"}})
	addr := strings.TrimPrefix(ts.URL, "http://")
	for _, c := range []struct {
		name, path, ctype, key string
		want                   int
	}{
		{"query without a key", "/v1/query", "application/json", "", http.StatusUnauthorized},
		{"mcp without a key", "/v1/mcp", "application/json", "", http.StatusUnauthorized},
		{"index without a key", "/v1/index", "application/json", "", http.StatusUnauthorized},
		{"query not JSON", "/v1/query", "text/plain", "acme-key", http.StatusUnsupportedMediaType},
		{"query too large", "/v1/query", "application/json", "acme-key", http.StatusRequestEntityTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			hdr := "POST " + c.path + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: " + c.ctype + "\r\nContent-Length: 100000\r\n"
			if c.key != "" {
				hdr += "Authorization: Bearer " + c.key + "\r\n"
			}
			// The headers and one byte of the 100,000 declared.
			if _, err := io.WriteString(conn, hdr+"\r\n{"); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			conn.SetReadDeadline(start.Add(3 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer within 3 s to a refused request with an unsent body: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("status = %d %s, want %d", resp.StatusCode, b, c.want)
			}
			if !resp.Close {
				t.Errorf("answer without Connection: close (header %q): the connection stays to read the unsent body", resp.Header.Get("Connection"))
			}
			// The server closes its side: the next read ends, well before
			// the deadline.
			if n, err := br.Read(make([]byte, 1)); err == nil {
				t.Errorf("the connection stays open after the refusal (read %d bytes)", n)
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Errorf("the connection stays open after the refusal: %v", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("answer and close took %v", d)
			}
		})
	}
	// A request whose body was read keeps its connection: two requests
	// on one.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	for i := range 2 {
		req, _ := http.NewRequest("POST", ts.URL+"/v1/index", strings.NewReader(`{"repo":"x","location":"https://`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer acme-key")
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Close {
			t.Errorf("malformed index request %d, its body read: %d, close %v; want 400 on a kept connection", i, resp.StatusCode, resp.Close)
		}
	}
}

// A signed delivery's values are echoed bounded: a multi-MB after, ref or
// full_name got back 5 bytes of JSON for each DEL byte (%q's \x7f, then
// JSON's \\x7f), 120 MB for a 24 MB delivery and 500 MB of the server's
// memory; the reasons of ignored pushes echoed a ref of U+2028 at twice
// its size.
func TestSecurityWebhookEchoBounded(t *testing.T) {
	const (
		secret = "a-secret"
		sha    = "2222222222222222222222222222222222222222"
		size   = 4 << 20
	)
	fake := &fakeIndexer{}
	store := blob.NewMem()
	ts, _ := newServer(t, &Server{Store: store, Indexer: fake, Routes: AllRoutes,
		Webhooks: WebhookConfig{Secrets: map[string]string{"acme": secret}}})
	del := strings.Repeat("\x7f", size)
	sep := strings.Repeat("\u2028", size/3)
	push := func(ref, after, name string) string {
		b, _ := json.Marshal(map[string]any{"ref": ref, "after": after, "before": sha,
			"repository": map[string]string{"full_name": name, "clone_url": "https://git.example/acme/shop.git", "default_branch": "main"}})
		return string(b)
	}
	for _, c := range []struct {
		name, body string
		want       int
	}{
		{"after", push("refs/heads/main", del, "acme/shop"), http.StatusBadRequest},
		{"after, 64 bytes", push("refs/heads/main", strings.Repeat("\x7f", 64), "acme/shop"), http.StatusBadRequest},
		{"full_name", push("refs/heads/main", sha, del), http.StatusBadRequest},
		{"full_name, 200 bytes", push("refs/heads/main", sha, strings.Repeat("\x7f", 200)), http.StatusBadRequest},
		{"ref not a branch", push(sep, sha, "acme/shop"), http.StatusOK},
		{"ref, a branch not indexed", push("refs/heads/"+sep, sha, "acme/shop"), http.StatusOK},
		{"ref, a branch deleted", push("refs/heads/"+sep, strings.Repeat("0", 40), "acme/shop"), http.StatusOK},
		{"ref, at the limit", push("refs/heads/"+strings.Repeat("\u2028", 81), sha, "acme/shop"), http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", ts.URL+"/v1/webhooks/github/acme", strings.NewReader(c.body))
			req.Header.Set("X-GitHub-Event", "push")
			req.Header.Set("X-Hub-Signature-256", signed(secret, c.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("status = %d, want %d: %.300s", resp.StatusCode, c.want, b)
			}
			if len(b) >= 1<<10 {
				t.Errorf("a delivery of %d bytes got an answer of %d bytes, want under 1 KiB: %.300s...", len(c.body), len(b), b)
			}
		})
	}
	if len(fake.reqs) != 0 {
		t.Errorf("refused deliveries requested indexes: %+v", fake.reqs)
	}
}

// Hosts that end in a number are IPv4 addresses to the resolver, in
// inet_aton's forms (127.1, 0177.0.0.1, 0x7f.1): the API refuses them
// with 400 naming the reason, before a repository is registered or a
// workflow started. They used to pass and be refused only when the clone
// dialed.
func TestSecurityNumericHostLocation(t *testing.T) {
	const secret = "a-secret"
	fake := &fakeIndexer{}
	store := blob.NewMem()
	ts, _ := newServer(t, &Server{Store: store, Indexer: fake, Routes: AllRoutes,
		Keys:     Keys{HashKey("acme-key"): "acme", HashKey("operator-key"): AllTenants},
		Webhooks: WebhookConfig{Secrets: map[string]string{"acme": secret}}})
	for _, loc := range []string{
		"https://0177.0.0.1/acme/x.git", "https://127.1/acme/x.git", "git://0x7f.1/acme/x",
		"https://2130706433/acme/x.git", "https://169.254.169.254./x.git", "git@0177.1:acme/x.git",
	} {
		for _, key := range []string{"acme-key", "operator-key"} {
			body, _ := json.Marshal(IndexRequest{Tenant: "acme", Repo: "x", Location: loc})
			code, _, resp := do(t, "POST", ts.URL+"/v1/index", "application/json", string(body), map[string]string{"Authorization": "Bearer " + key})
			if code != http.StatusBadRequest || !strings.Contains(resp, "ends in a number") {
				t.Errorf("index %s with %s = %d %s; want 400 naming the reason", loc, key, code, resp)
			}
		}
		push := fmt.Sprintf(`{"ref":"refs/heads/main","after":"%s","repository":{"full_name":"acme/x","clone_url":%q,"default_branch":"main"}}`,
			strings.Repeat("2", 40), loc)
		code, _, resp := do(t, "POST", ts.URL+"/v1/webhooks/github/acme", "application/json", push,
			map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": signed(secret, push)})
		if code != http.StatusBadRequest || !strings.Contains(resp, "ends in a number") {
			t.Errorf("webhook clone_url %s = %d %s; want 400 naming the reason", loc, code, resp)
		}
	}
	if len(fake.reqs) != 0 {
		t.Errorf("refused locations requested indexes: %+v", fake.reqs)
	}
	if keys, err := store.List(context.Background(), "repos/"); err != nil || len(keys) != 0 {
		t.Errorf("refused locations recorded %v, %v", keys, err)
	}
}
