package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
)

// An `up` without keys that listens on every interface (the container
// image's default: CODECTX_LISTEN=0.0.0.0:7700, `up`, no keys; a port
// published on 127.0.0.1 or reached through `kubectl port-forward` is
// still open to the developer's browser) must not answer a web page that
// rebinds its own name to the machine: the page is same-origin with
// itself, so its Origin is its Host and the Origin check passes. Before,
// the Host was checked only on a loopback listen, and such a page indexed
// a local directory and read it back through /v1/query.
func TestSecurityOpenAPIRebindingAllInterfaces(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	repoDir, _ := gitFixture(t)
	_, port, _ := strings.Cut(freeAddr(t), ":")
	base := "http://127.0.0.1:" + port
	up := startUp(t, "--data", t.TempDir(), "--listen", "0.0.0.0:"+port, "--api-hosts", "codectx.internal")
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	page := "rebound.attacker.example:" + port
	hdr := map[string]string{"Host": page, "Origin": "http://" + page}
	body := `{"location":"` + repoDir + `"}`
	if code, _, b := rawRequest(t, base, "POST", "/v1/index", "application/json", "", strings.NewReader(body), hdr, nil); code != http.StatusMisdirectedRequest {
		t.Errorf("index from a rebound page = %d %s, want 421", code, b)
	}
	if code, _, b := rawRequest(t, base, "POST", "/v1/query", "application/json", "", strings.NewReader(`{"repo":"shop","query":"Total"}`), hdr, nil); code != http.StatusMisdirectedRequest {
		t.Errorf("query from a rebound page = %d %s, want 421", code, b)
	}
	cl := &api.Client{BaseURL: base}
	if _, err := cl.Status(context.Background(), "default", "shop"); !api.IsNotFound(err) {
		t.Errorf("a rebound page indexed the directory: %v", err)
	}
	// Local tools (an address or localhost) and a name the operator
	// listed (--api-hosts) are answered.
	for _, h := range []string{"127.0.0.1:" + port, "localhost:" + port, "codectx.internal:" + port} {
		if code, _, b := rawRequest(t, base, "GET", "/v1/repos", "", "", nil, map[string]string{"Host": h}, nil); code != http.StatusOK {
			t.Errorf("GET /v1/repos with Host %s = %d %s, want 200", h, code, b)
		}
	}
	if code, _, b := rawRequest(t, base, "POST", "/v1/index", "application/json", "", strings.NewReader(body), nil, nil); code != http.StatusAccepted {
		t.Errorf("local index request = %d %s, want 202", code, b)
	}
}
