package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/testrepo"
)

// A location is bounded (api.MaxLocation) wherever a tenant gives one. A
// signed webhook delivery may be 25 MiB, and its clone URL was taken
// whole: one of 1 MiB was accepted (202), went into the workflow's
// history with the push, and was recorded in the store as the
// repository's location; one of 20 MiB was refused by the orchestrator
// (503, naming its gRPC limit) after the 20 MiB were recorded, and the
// new repository registered. A tenant could leave that much for each of
// the repositories it may hold. On a running up: an over-long clone URL
// and an over-long index request location get 400, and nothing is
// recorded or registered; a push of an ordinary clone URL of the same
// repository still records it.
func TestSecurityLocationBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	root := t.TempDir()
	commitTree(t, filepath.Join(root, "lib"), map[string]string{"a/a.go": "package a\n\n// A does nothing.\nfunc A() {}\n"})
	first := gitRun(t, filepath.Join(root, "lib"), "rev-parse", "HEAD")
	base := testrepo.SmartHTTP(t, root)
	s := startSecureUp(t, "--allow-hosts", strings.TrimPrefix(base, "http://"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := openStore(s.data)
	if err != nil {
		t.Fatal(err)
	}
	recorded := func(tenant, repo string) (string, bool) {
		t.Helper()
		b, err := st.Get(ctx, "repos/"+tenant+"/"+repo+"/@/LOCATION")
		if errors.Is(err, blob.ErrNotFound) {
			return "", false
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(b), true
	}

	// A signed delivery whose clone URL is 1 MiB: a valid URL of an
	// allowed host, only long.
	huge := base + "/lib/" + strings.Repeat("a", 1<<20) + ".git"
	code, body := tryWebhook(ctx, s, tenantB, githubPush("hook", huge, first))
	if code != http.StatusBadRequest || !strings.Contains(body, "limit") {
		t.Errorf("webhook with a %d-byte clone URL: HTTP %d %.200s, want 400 naming the limit", len(huge), code, body)
	}
	if loc, ok := recorded(tenantB, "hook"); ok {
		t.Errorf("a refused delivery's clone URL was recorded (%d bytes)", len(loc))
	}
	if ok, err := st.Exists(ctx, "repos/"+tenantB+"/hook/@/REPO"); err != nil || ok {
		t.Errorf("a refused delivery registered its repository (%v, %v)", ok, err)
	}

	// An index request's location is bounded by its body (16 KiB), and
	// by the same bound below that.
	long := base + "/lib/" + strings.Repeat("b", 12<<10) + ".git"
	code, body = tryIndex(ctx, s, tenantA, "long", long)
	if code != http.StatusBadRequest || !strings.Contains(body, "limit") {
		t.Errorf("index request with a %d-byte location: HTTP %d %.200s, want 400 naming the limit", len(long), code, body)
	}
	if loc, ok := recorded(tenantA, "long"); ok {
		t.Errorf("a refused index request's location was recorded (%d bytes)", len(loc))
	}

	// The ordinary clone URL of the same repository is taken and recorded.
	loc := base + "/lib/.git"
	code, body = tryWebhook(ctx, s, tenantB, githubPush("hook", loc, first))
	if code != http.StatusAccepted {
		t.Fatalf("webhook with its ordinary clone URL: HTTP %d %s, want 202", code, body)
	}
	var resp api.WebhookResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Repo != "hook" {
		t.Fatalf("webhook answer %s: %v", body, err)
	}
	if got, _ := recorded(tenantB, "hook"); got != loc {
		t.Errorf("recorded location %q, want %q", got, loc)
	}
}
