package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/testrepo"
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
	base := testrepo.SmartHTTP(t, root)
	addr := strings.TrimPrefix(base, "http://")

	s := startSecureUp(t, "--allow-hosts", addr, "--clone-max-bytes", "64KiB")
	b, _ := json.Marshal(api.IndexRequest{Tenant: tenantA, Repo: "big", Location: base + "/big/.git"})
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
