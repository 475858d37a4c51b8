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
	"codectx/pkg/blob"
	"codectx/pkg/index"
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
	failsOnUp(t, s, bomb, "the repository's files are larger in all than the server's source limit")
}

// failsOnUp indexes the repository at dir as acme's "bomb" on s, through
// an operator's key, and checks that acme's own key sees its snapshot
// fail with the public reason want and no server path, that nothing is
// published or answered for it, and that beta's queries are untouched.
func failsOnUp(t *testing.T, s *secureStack, dir, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	op := s.client(api.AllTenants)
	if _, err := op.Index(ctx, api.IndexRequest{Tenant: tenantA, Repo: "bomb", Location: dir}); err != nil {
		t.Fatal(err)
	}
	// acme's own key sees the public reason only (an operator's sees the
	// full cause).
	st, err := s.client(tenantA).WaitIndexed(ctx, tenantA, "bomb", "")
	if err == nil || st == nil || st.LastError != want {
		t.Fatalf("acme/bomb: %+v, %v; want it failed with %q", st, err, want)
	}
	for _, leak := range []string{s.data, dir} {
		if strings.Contains(st.LastError, leak) {
			t.Errorf("last_error names a server path: %q", st.LastError)
		}
	}
	if st.LastCommit != "" || st.Head != nil {
		t.Errorf("acme/bomb published %s past the bound", st.LastCommit)
	}
	if code, body := s.do(t, "POST", "/v1/query", tenantA, `{"tenant":"acme","repo":"bomb","query":"a1"}`); code != http.StatusNotFound {
		t.Errorf("query of acme/bomb past the bound = %d %.200s, want 404", code, body)
	}
	// beta is untouched.
	if code, body := s.do(t, "POST", "/v1/query", tenantB, `{"tenant":"beta","repo":"vault","query":"MasterToken"}`); code != http.StatusOK || !strings.Contains(body, betaSecret) {
		t.Errorf("beta's query after acme's failed snapshot = %d %.200s", code, body)
	}
}

// TestSecurityChunkBoundOnUp: a tenant's repository of tiny functions,
// well under the source bound, makes more chunks than --max-chunks. On a
// running up the graph stage refuses to build it: the snapshot fails with
// the public reason, publishes nothing, and beta's queries are untouched.
// The same repository under the default bound indexes (the bound is what
// refused it).
func TestSecurityChunkBoundOnUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	s := startSecureUp(t, "--max-chunks", "300")
	var b strings.Builder
	b.WriteString("package bomb\n")
	for i := range 400 { // 400 functions: 401 chunks in 6 KiB
		fmt.Fprintf(&b, "func a%d() {}\n", i)
	}
	bomb := commitTree(t, filepath.Join(t.TempDir(), "bomb"), map[string]string{"bomb.go": b.String()})
	failsOnUp(t, s, bomb, "the repository's files make more chunks than the server indexes")

	// Under the default bound the same repository indexes.
	sum, err := index.Build(context.Background(), blob.NewMem(), bomb, index.Options{Name: "bomb"})
	if err != nil || sum.Chunks <= 300 {
		t.Errorf("the repository under the default bound: %+v, %v; want it indexed with more than 300 chunks", sum, err)
	}
}
