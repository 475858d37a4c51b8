package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// A signed push webhook reindexes the repository at the pushed commit,
// incrementally: the second push re-parses only the changed file.
func TestUpWebhookPush(t *testing.T) {
	const secret = "webhook-secret-for-tests"
	t.Setenv(envWebhookSecret, secret)
	t.Setenv(envWebhookLocal, "true") // the fixture's clone URL is a local path
	repoDir, first := gitFixture(t)
	addr := freeAddr(t)
	base := "http://" + addr
	cl := &api.Client{BaseURL: base, PollInterval: 100 * time.Millisecond}
	up := startUp(t, "--data", t.TempDir(), "--listen", addr)
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	push := func(before, after string, sign bool) int {
		t.Helper()
		body := `{"ref":"refs/heads/master","before":"` + before + `","after":"` + after +
			`","repository":{"full_name":"acme/shop","clone_url":"` + repoDir + `","default_branch":"master"}}`
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/webhooks/github/default", bytes.NewBufferString(body))
		req.Header.Set("X-GitHub-Event", "push")
		key := secret
		if !sign {
			key = "not the secret"
		}
		m := hmac.New(sha256.New, []byte(key))
		m.Write([]byte(body))
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	zero := strings.Repeat("0", 40)
	if code := push(zero, first, false); code != http.StatusUnauthorized {
		t.Fatalf("forged push = %d, want 401", code)
	}
	if _, err := cl.Status(ctx, "default", "acme/shop"); !api.IsNotFound(err) {
		t.Fatalf("a forged push started indexing: status err = %v", err)
	}
	if code := push(zero, first, true); code != http.StatusAccepted {
		t.Fatalf("push = %d, want 202", code)
	}
	st, err := cl.WaitIndexed(ctx, "default", "acme/shop", first)
	if err != nil {
		t.Fatal(err)
	}
	if st.Head == nil || st.Head.Commit != first || st.Parsed != st.Files {
		t.Fatalf("after the first push: %+v", st)
	}

	// Commit a change and push it.
	if err := os.WriteFile(filepath.Join(repoDir, "cart", "discount.go"), []byte("package cart\n\n// ApplyDiscount takes a percentage off the cart total.\nfunc ApplyDiscount(total, percent int) int {\n\treturn total * (100 - percent) / 100\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repo, err := git.PlainOpen(repoDir)
	if err != nil {
		t.Fatal(err)
	}
	wt, _ := repo.Worktree()
	if _, err := wt.Add("cart/discount.go"); err != nil {
		t.Fatal(err)
	}
	h, err := wt.Commit("add discounts", &git.CommitOptions{Author: &object.Signature{Name: "A", Email: "a@example.com", When: time.Unix(1700000100, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	second := h.String()
	if code := push(first, second, true); code != http.StatusAccepted {
		t.Fatalf("second push = %d, want 202", code)
	}
	st, err = cl.WaitIndexed(ctx, "default", "acme/shop", second)
	if err != nil {
		t.Fatal(err)
	}
	if st.Head == nil || st.Head.Commit != second || st.Parsed != 1 || st.Reused != st.Files-1 {
		t.Errorf("after the second push: %+v, want head at %s with 1 file parsed, the rest reused", st, second)
	}
	resp, err := cl.Query(ctx, api.QueryRequest{Repo: "acme/shop", Query: "ApplyDiscount", Budget: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Commit != second || len(resp.Chunks) == 0 || resp.Chunks[0].Path != "cart/discount.go" {
		t.Errorf("query after the push answered %s with %+v", resp.Commit, resp.Chunks)
	}
}

func TestWebhookConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"acme": "0123456789abcdef", "beta": "fedcba9876543210"}`)
	t.Setenv(envWebhookSecret, "default-tenant-secret")
	w := webhookFlags{secretsFile: good, branches: "main, release"}
	cfg, err := w.config()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Secrets) != 3 || cfg.Secrets["default"] != "default-tenant-secret" || cfg.Secrets["acme"] != "0123456789abcdef" {
		t.Errorf("secrets = %v", cfg.Secrets)
	}
	if len(cfg.Branches) != 2 || cfg.Branches[1] != "release" {
		t.Errorf("branches = %v", cfg.Branches)
	}
	for name, body := range map[string]string{
		"notjson.json": `{"acme":`,
		"short.json":   `{"acme": "short"}`,
		"tenant.json":  `{"../x": "0123456789abcdef"}`,
	} {
		w := webhookFlags{secretsFile: write(name, body)}
		if _, err := w.config(); err == nil {
			t.Errorf("%s: accepted %s", name, body)
		}
	}
	if _, err := (&webhookFlags{secretsFile: filepath.Join(dir, "missing.json")}).config(); err == nil {
		t.Error("accepted a missing secrets file")
	}
}

func TestReadKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "keys.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if k, err := openKeys(""); err != nil || k != nil {
		t.Errorf("openKeys(\"\") = %v, %v; want an open API", k, err)
	}
	good := `{"` + api.HashKey("k1") + `": "acme", "` + api.HashKey("k2") + `": "*"}`
	k, err := openKeys(write(good))
	if err != nil || k.Len() != 2 {
		t.Fatalf("openKeys = %v, %v", k, err)
	}
	if got, ok := k.Lookup("k1"); !ok || got.Tenant != "acme" {
		t.Errorf("k1 = %+v, %v", got, ok)
	}
	upper := `{"` + strings.ToUpper(api.HashKey("k1")) + `": "acme"}`
	if k, err := openKeys(write(upper)); err != nil {
		t.Errorf("a hash in upper-case hex: %v", err)
	} else if got, ok := k.Lookup("k1"); !ok || got.Tenant != "acme" {
		t.Errorf("a hash in upper-case hex: k1 = %+v, %v; want it found", got, ok)
	}
	dup := `{"` + strings.ToUpper(api.HashKey("k1")) + `": "acme", "` + api.HashKey("k1") + `": "beta"}`
	if _, err := openKeys(write(dup)); err == nil {
		t.Error("one key listed for two tenants was accepted")
	}
	for _, bad := range []string{`{`, `{}`, `{"k1": "acme"}`, `{"` + api.HashKey("k") + `": "../x"}`} {
		if _, err := openKeys(write(bad)); err == nil {
			t.Errorf("openKeys accepted %s", bad)
		}
	}
}
