package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
)

// TestSecuritySourceBoundOnUp: a tenant's repository names one file's
// text under many paths (git keeps it once), past the server's source
// bound. On a running up, the snapshot fails before anything is parsed
// with the public reason, and no path of the server is in the tenant's
// status;
// beta's repository and queries are untouched.
func TestSecuritySourceBoundOnUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	s := startSecureUp(t, "--source-max-bytes", "64KiB")
	var b strings.Builder
	b.WriteString("package bomb\n")
	for i := 0; b.Len() < 4<<10; i++ {
		fmt.Fprintf(&b, "func a%d() {}\n", i)
	}
	files := map[string]string{}
	for i := range 40 { // 160 KiB of source in one blob
		files[fmt.Sprintf("p%02d/bomb.go", i)] = b.String()
	}
	bomb := commitTree(t, filepath.Join(t.TempDir(), "bomb"), files)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	op := s.client(api.AllTenants)
	if _, err := op.Index(ctx, api.IndexRequest{Tenant: tenantA, Repo: "bomb", Location: bomb}); err != nil {
		t.Fatal(err)
	}
	// acme's own key sees the public reason only (an operator's sees the
	// full cause).
	st, err := s.client(tenantA).WaitIndexed(ctx, tenantA, "bomb", "")
	if err == nil || st == nil || st.LastError != "the repository's files are larger in all than the server's source limit" {
		t.Fatalf("acme/bomb: %+v, %v; want it failed at the source limit", st, err)
	}
	for _, leak := range []string{s.data, bomb} {
		if strings.Contains(st.LastError, leak) {
			t.Errorf("last_error names a server path: %q", st.LastError)
		}
	}
	if st.LastCommit != "" {
		t.Errorf("acme/bomb published %s past the source limit", st.LastCommit)
	}
	// beta is untouched.
	if code, body := s.do(t, "POST", "/v1/query", tenantB, `{"tenant":"beta","repo":"vault","query":"MasterToken"}`); code != http.StatusOK || !strings.Contains(body, betaSecret) {
		t.Errorf("beta's query after acme's failed snapshot = %d %.200s", code, body)
	}
}
