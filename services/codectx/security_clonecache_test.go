package main

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/api"
)

// TestSecurityCloneCachePerTenant: the clone cache is per tenant. Acme
// indexes a repository by URL, then beta indexes the same URL: beta's
// index must clone it (the host sees an upload-pack of its own) into a
// directory of beta's. With one clone per URL for every tenant, beta's
// index found acme's clone and fetched nothing (no upload-pack, a faster
// index), which told beta that another tenant had fetched the URL.
func TestSecurityCloneCachePerTenant(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	root := t.TempDir()
	commitTree(t, filepath.Join(root, "lib"), map[string]string{"lib/lib.go": "package lib\n\n// Lib is shared code.\nfunc Lib() int { return 1 }\n"})
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skipf("git --exec-path: %v", err)
	}
	var packs atomic.Int64 // upload-packs: objects sent to a clone or fetch
	cgiH := &cgi.Handler{
		Path:   filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env:    []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
		Logger: log.New(io.Discard, "", 0),
	}
	git := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			packs.Add(1)
		}
		cgiH.ServeHTTP(w, r)
	}))
	t.Cleanup(git.Close)
	addr := strings.TrimPrefix(git.URL, "http://")
	url := git.URL + "/lib/.git"

	s := startSecureUp(t, "--allow-hosts", addr)
	indexURL := func(tenant string) *api.RepoStatus {
		t.Helper()
		b, _ := json.Marshal(api.IndexRequest{Tenant: tenant, Repo: "lib", Location: url})
		if code, body := s.do(t, "POST", "/v1/index", tenant, string(b)); code != 202 {
			t.Fatalf("%s's index of %s = %d %s, want 202", tenant, url, code, body)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st, err := s.client(tenant).WaitIndexed(ctx, tenant, "lib", "")
		if err != nil {
			t.Fatalf("%s's index of %s: %v", tenant, url, err)
		}
		return st
	}
	indexURL(tenantA)
	before := packs.Load()
	if before == 0 {
		t.Fatal("acme's index sent no upload-pack")
	}
	indexURL(tenantB)
	if packs.Load() == before {
		t.Errorf("beta's index of the URL acme indexed fetched no objects: it read acme's clone")
	}

	ents, err := os.ReadDir(filepath.Join(s.data, "clones"))
	if err != nil {
		t.Fatal(err)
	}
	host := strings.ReplaceAll(addr, ":", "_")
	var dirs []string
	for _, e := range ents {
		if strings.Contains(e.Name(), host) {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) != 2 || !strings.HasPrefix(dirs[0], tenantA+"@") || !strings.HasPrefix(dirs[1], tenantB+"@") {
		t.Errorf("clones of %s: %v, want one of acme's and one of beta's", url, dirs)
	}
	s.assertServes(t)
}
