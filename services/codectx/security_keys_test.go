package main

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
)

// TestAuditKeyFileBroken: the operator removes acme's key from the key
// file by hand and leaves a stray comma, then deletes the file. While the
// file does not parse or is gone no key is valid (before, the keys read
// earlier stayed in force: the removed key kept working, silently), the
// log says why once, and /readyz is not ready without naming the file.
// Once the file is mended, the keys it lists work again and acme's does
// not.
func TestAuditKeyFileBroken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	s := startSecureUp(t)
	file := s.args[slices.Index(s.args, "--api-keys")+1]
	status := func(tenant, repo string) int {
		t.Helper()
		code, _, _ := s.raw(t, "GET", "/v1/repos/"+tenant+"/"+repo+"/status", "", s.keys[tenant], nil, nil)
		return code
	}
	ready := func() (int, string) {
		t.Helper()
		code, _, body := s.raw(t, "GET", "/readyz", "", "", nil, nil)
		if strings.Contains(body, file) {
			t.Errorf("/readyz names the key file: %s", body)
		}
		return code, body
	}
	if code := status(tenantA, "shop"); code != http.StatusOK {
		t.Fatalf("acme's status before the edit = %d, want 200", code)
	}
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		// A new modification time even on a coarse clock: the file is
		// re-read when its time or size changes.
		later := time.Now().Add(time.Duration(len(body)) * time.Second)
		if err := os.Chtimes(file, later, later); err != nil {
			t.Fatal(err)
		}
	}
	entry := func(tenant string) string {
		return fmt.Sprintf("%q: %q", api.HashKey(s.keys[tenant]), tenant)
	}
	// acme's key removed, a stray comma left.
	write("{" + entry(tenantB) + ", " + entry(api.AllTenants) + ",}")
	for _, tenant := range []string{tenantA, tenantB} {
		repo := map[string]string{tenantA: "shop", tenantB: "vault"}[tenant]
		if code := status(tenant, repo); code != http.StatusUnauthorized {
			t.Errorf("%s's key while the key file does not parse: %d, want 401", tenant, code)
		}
	}
	if code, body := ready(); code != http.StatusServiceUnavailable || !strings.Contains(body, "api keys") {
		t.Errorf("/readyz while the key file does not parse = %d %s, want 503 naming the api keys check", code, body)
	}
	s.up.waitFor(t, "the log line", 10*time.Second, func() bool {
		return strings.Count(s.up.errs.String(), "API key file unusable") == 1
	})

	// Mended: beta's and the operator's keys work, acme's does not.
	write("{" + entry(tenantB) + ", " + entry(api.AllTenants) + "}")
	if code := status(tenantB, "vault"); code != http.StatusOK {
		t.Errorf("beta's key once the file is mended: %d, want 200", code)
	}
	if code := status(tenantA, "shop"); code != http.StatusUnauthorized {
		t.Errorf("acme's removed key once the file is mended: %d, want 401", code)
	}
	if code, body := ready(); code != http.StatusOK {
		t.Errorf("/readyz once the key file is mended = %d %s", code, body)
	}
	if !strings.Contains(s.up.errs.String(), "API key file usable again") {
		t.Error("no log line when the key file was mended")
	}

	// Deleted: no key.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if code := status(tenantB, "vault"); code != http.StatusUnauthorized {
		t.Errorf("beta's key once the key file is deleted: %d, want 401", code)
	}
	if code, _ := ready(); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz once the key file is deleted = %d, want 503", code)
	}
}
