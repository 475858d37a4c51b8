package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
)

// A tenant names what the server clones: a repository larger than
// --clone-max-bytes fails its snapshot with the public cause, leaves no
// clone behind and publishes nothing, while the same server keeps
// serving. Through a running `up`, a tenant's key, and git's smart HTTP
// on loopback (on the allow-list, so the clone really dials it).
func TestSecurityCloneLimit(t *testing.T) {
	root := t.TempDir()
	noise := make([]byte, 150<<10)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	commitTree(t, filepath.Join(root, "big"), map[string]string{"big.go": "package big\n// " + hex.EncodeToString(noise) + "\n"})
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	srv := httptest.NewServer(&cgi.Handler{
		Path:   filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env:    []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
		Logger: log.New(io.Discard, "", 0), // the refused clone breaks its pipe
	})
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")

	s := startSecureUp(t, "--allow-hosts", addr, "--clone-max-bytes", "64KiB")
	b, _ := json.Marshal(api.IndexRequest{Tenant: tenantA, Repo: "big", Location: srv.URL + "/big/.git"})
	if code, body := s.do(t, "POST", "/v1/index", tenantA, string(b)); code != 202 {
		t.Fatalf("acme's index of a 300 KB repository = %d %s, want 202 (refused when cloned)", code, body)
	}
	st := s.waitSettled(t, tenantA, "big")
	if st == nil || st.Head != nil || !strings.Contains(st.LastError, "larger than the server's clone limit") {
		t.Errorf("status of a repository over the clone limit: %+v, want no head and the limit's cause", st)
	}
	clones, _ := os.ReadDir(filepath.Join(s.data, "clones"))
	for _, c := range clones {
		if strings.HasPrefix(c.Name(), strings.ReplaceAll(addr, ":", "_")) {
			t.Errorf("the refused clone left %s in the clone cache", c.Name())
		}
	}
	s.assertServes(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.client(tenantA).Query(ctx, api.QueryRequest{Tenant: tenantA, Repo: "big", Query: "big", Budget: 1000}); err == nil {
		t.Error("a query of the refused repository answered")
	}
}
