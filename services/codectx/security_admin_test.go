package main

import (
	"net/http"
	"strings"
	"testing"
)

// The repository admin routes, attacked on a running up by another tenant:
// beta's key may not list, reindex or delete acme's repositories, nor see
// them in its own listing; nothing of acme's is removed or leaked.
func TestSecurityAdminRoutes(t *testing.T) {
	s := startSecureUp(t)
	var bodies []string
	for _, tt := range []struct{ method, path, body string }{
		{"GET", "/v1/repos?tenant=" + tenantA, ""},
		{"POST", "/v1/repos/" + tenantA + "/shop/reindex", ""},
		{"DELETE", "/v1/repos/" + tenantA + "/shop", ""},
		{"GET", "/v1/repos/" + tenantA + "/shop/status", ""},
	} {
		code, body := s.do(t, tt.method, tt.path, tenantB, tt.body)
		if code != http.StatusForbidden {
			t.Errorf("beta: %s %s = %d %.200s, want 403", tt.method, tt.path, code, body)
		}
		bodies = append(bodies, body)
	}
	code, body := s.do(t, "GET", "/v1/repos?tenant="+tenantB, tenantB, "")
	if code != http.StatusOK || strings.Contains(body, "shop") || !strings.Contains(body, "vault") {
		t.Errorf("beta's own listing = %d %.300s, want 200 with beta's vault and without acme's shop", code, body)
	}
	s.assertClean(t, append(bodies, body)...)
}
