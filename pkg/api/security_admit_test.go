package api

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"codectx/pkg/blob"
)

// A request with a tenant's key pays that tenant's rate and takes one of
// its slots as soon as the key is known, before its body is read: a
// security test of a running server found that on POST /v1/query,
// /v1/impact, /v1/references and /v1/index the body (up to 64 KiB) was
// decoded and its names checked first, and the rate charged only once
// the tenant named was authorized. A key's requests naming another tenant
// (403) or malformed (400) then cost their sender nothing, ran as fast as
// it could send them and outside its concurrency bound.
func TestSecurityRefusedRequestsCharged(t *testing.T) {
	store := manyRepos(t, "acme", 1, "package a\n\n// ParseToken parses.\nfunc ParseToken() {}\n")
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf(`"r%03d-%s"`, i, strings.Repeat("x", 48))
	}
	// About 56 KB: what the report sent, under the 64 KiB body limit.
	big := `{"tenant":"beta","query":"x","repos":[` + strings.Join(names, ",") + `]}`
	acmeKey := map[string]string{"Authorization": "Bearer acme-key"}
	own := `{"repo":"r00","query":"ParseToken"}`
	for _, c := range []struct {
		name, path, body string
		want             int
	}{
		{"query naming beta", "/v1/query", big, http.StatusForbidden},
		{"query, malformed", "/v1/query", `{"repos":["r00"],"query":`, http.StatusBadRequest},
		{"query, bad names", "/v1/query", `{"repos":["../x"],"query":"x"}`, http.StatusBadRequest},
		{"impact naming beta", "/v1/impact", `{"tenant":"beta","name":"ParseToken","repo":"r00"}`, http.StatusForbidden},
		{"references naming beta", "/v1/references", `{"tenant":"beta","name":"ParseToken","repos":["*"]}`, http.StatusForbidden},
		{"index naming beta", "/v1/index", `{"tenant":"beta","location":"https://git.example/beta/vault.git"}`, http.StatusForbidden},
		{"status of beta", "/v1/repos/beta/vault/status", "", http.StatusForbidden},
		{"listing of beta", "/v1/repos?tenant=beta", "", http.StatusForbidden},
		{"delete of beta", "/v1/repos/beta/vault", "", http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			// One token per 20 s: none refills within the test.
			ts, _ := newServer(t, &Server{Store: store, Indexer: &fakeIndexer{}, Routes: AllRoutes,
				Keys:   Keys{HashKey("acme-key"): "acme", HashKey("beta-key"): "beta"},
				Limits: Limits{Rate: 0.05, Burst: 4}})
			method := "POST"
			switch {
			case strings.HasPrefix(c.path, "/v1/repos/beta/vault/"), strings.HasPrefix(c.path, "/v1/repos?"):
				method = "GET"
			case c.path == "/v1/repos/beta/vault":
				method = "DELETE"
			}
			send := func() (int, string) {
				code, _, body := do(t, method, ts.URL+c.path, "application/json", c.body, acmeKey)
				return code, body
			}
			// Three refused requests spend three of acme's four tokens.
			for i := range 3 {
				if code, body := send(); code != c.want {
					t.Fatalf("refused request %d = %d %.200s, want %d", i+1, code, body, c.want)
				}
			}
			if code, _, body := do(t, "POST", ts.URL+"/v1/query", "application/json", own, acmeKey); code != http.StatusOK {
				t.Fatalf("acme's own query with one token left = %d %.200s, want 200", code, body)
			}
			if code, _, body := do(t, "POST", ts.URL+"/v1/query", "application/json", own, acmeKey); code != http.StatusTooManyRequests {
				t.Errorf("acme's own query after three refused requests and one query within a burst of 4 = %d %.200s, want 429: the refused ones were not charged", code, body)
			}
			// Sent faster than the rate, the refused requests themselves
			// get 429 past the burst: their bodies are not read.
			for i := range 4 {
				if code, body := send(); code != http.StatusTooManyRequests {
					t.Errorf("refused request %d past the burst = %d %.200s, want 429", i+4, code, body)
				}
			}
			// beta's own rate is untouched: acme's requests naming beta
			// are acme's.
			if code, _, body := do(t, "GET", ts.URL+"/v1/repos", "", "", map[string]string{"Authorization": "Bearer beta-key"}); code != http.StatusOK {
				t.Errorf("beta's listing after acme's flood naming beta = %d %.200s, want 200", code, body)
			}
		})
	}
}

// trickle starts a POST whose body is sent in two parts: head at once,
// the rest when the returned function is called, which returns the
// request's status. Until then the request is being read.
func trickle(t *testing.T, url string, hdr map[string]string, head, rest string) (finish func() int) {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", url, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	got := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	if _, err := pw.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	done := false
	finish = func() int {
		if done {
			return 0
		}
		done = true
		io.WriteString(pw, rest)
		pw.Close()
		select {
		case code := <-got:
			return code
		case <-time.After(10 * time.Second):
			t.Error("trickled request not answered")
			return 0
		}
	}
	t.Cleanup(func() { finish() })
	return finish
}

// untilBusy sends a request until it is refused with 429 for its
// slots, for at most 5 s; it returns the last status and body.
func untilBusy(t *testing.T, send func() (int, string)) (int, string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := send()
		if code == http.StatusTooManyRequests || time.Now().After(deadline) {
			return code, body
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A request of a key is held to its tenant's concurrency bound while its
// body is read, whatever tenant the body names: acme's request naming
// beta, whose body is still coming, holds acme's one slot, and acme's
// next request waits for it, then gets 429; beta's do not wait. Before,
// the body was read outside the bound.
func TestSecurityRefusedRequestsHoldSlot(t *testing.T) {
	store := manyRepos(t, "acme", 1, "package a\n\n// ParseToken parses.\nfunc ParseToken() {}\n")
	ts, _ := newServer(t, &Server{Store: store, Routes: AllRoutes,
		Keys:   Keys{HashKey("acme-key"): "acme", HashKey("beta-key"): "beta"},
		Limits: Limits{Rate: -1, TenantConcurrency: 1}})
	acme := map[string]string{"Authorization": "Bearer acme-key"}
	finish := trickle(t, ts.URL+"/v1/query", acme, `{"tenant":"beta","query":"x",`, `"repos":["vault"]}`)
	code, body := untilBusy(t, func() (int, string) {
		code, _, body := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"repo":"r00","query":"ParseToken"}`, acme)
		return code, body
	})
	if code != http.StatusTooManyRequests || !strings.Contains(body, "being worked on") {
		t.Errorf("acme's query while acme's request naming beta is being read = %d %.200s, want 429 for acme's slots", code, body)
	}
	// beta's own slot is free: the request naming beta is acme's.
	if code, _, body := do(t, "GET", ts.URL+"/v1/repos", "", "", map[string]string{"Authorization": "Bearer beta-key"}); code != http.StatusOK {
		t.Errorf("beta's listing meanwhile = %d %.200s, want 200", code, body)
	}
	if code := finish(); code != http.StatusForbidden {
		t.Errorf("acme's request naming beta = %d, want 403", code)
	}
	if code, _, body := do(t, "POST", ts.URL+"/v1/query", "application/json", `{"repo":"r00","query":"ParseToken"}`, acme); code != http.StatusOK {
		t.Errorf("acme's query once its slot is free = %d %.200s", code, body)
	}
}

// Operators' keys have a rate bucket and slots of their own, which no
// tenant's key can spend: they were tenant default's, an ordinary tenant
// that can be given keys, so a key of tenant default (even of scope
// query) flooding its own rate kept the operator's requests, a DELETE
// during an incident among them, answered 429; and the operator's
// scripts spent tenant default's rate.
func TestSecurityOperatorOwnBucket(t *testing.T) {
	store := blob.NewMem()
	fixture(t, store, "") // default/demo
	newSrv := func(l Limits) string {
		ts, _ := newServer(t, &Server{Store: store, Indexer: &fakeIndexer{}, Routes: AllRoutes,
			Keys:   Keys{HashKey("op-key"): AllTenants, HashKey("default-key"): "default", HashKey("acme-key"): "acme"},
			Limits: l})
		return ts.URL
	}
	op := map[string]string{"Authorization": "Bearer op-key"}
	def := map[string]string{"Authorization": "Bearer default-key"}
	mcpHdr := func(h map[string]string) map[string]string {
		return map[string]string{"Authorization": h["Authorization"], "Accept": "application/json, text/event-stream"}
	}
	ping := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	// One token per 20 s: none refills within the test.
	slow := Limits{Rate: 0.05, Burst: 4}

	t.Run("tenant default floods, the operator answers", func(t *testing.T) {
		url := newSrv(slow)
		limited := 0
		for range 8 {
			if code, _, _ := do(t, "GET", url+"/v1/repos", "", "", def); code == http.StatusTooManyRequests {
				limited++
			}
		}
		if limited != 4 {
			t.Fatalf("tenant default's flood of 8 within a burst of 4: %d answered 429, want 4", limited)
		}
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/v1/repos?tenant=acme", ""},
			{"GET", "/v1/repos", ""}, // the default tenant's, as the operator
			{"DELETE", "/v1/repos/acme/nonexistent", ""},
		} {
			code, _, body := do(t, c.method, url+c.path, "application/json", c.body, op)
			if code == http.StatusTooManyRequests || code >= 500 {
				t.Errorf("operator's %s %s while tenant default is over its rate = %d %.200s", c.method, c.path, code, body)
			}
		}
		// The fourth and last of the operator's burst.
		if code, _, body := do(t, "POST", url+"/v1/mcp", "application/json", ping, mcpHdr(op)); code != http.StatusOK {
			t.Errorf("operator's MCP call while tenant default is over its rate = %d %.200s", code, body)
		}
	})

	t.Run("the operator floods, tenant default answers", func(t *testing.T) {
		url := newSrv(slow)
		var last string
		limited := 0
		for range 8 {
			code, _, body := do(t, "GET", url+"/v1/repos?tenant=acme", "", "", op)
			if code == http.StatusTooManyRequests {
				limited++
				last = body
			}
		}
		if limited != 4 {
			t.Fatalf("operator's flood of 8 within a burst of 4: %d answered 429, want 4", limited)
		}
		if strings.Contains(last, `"default"`) || !strings.Contains(last, "operators") {
			t.Errorf("operator's 429 says %.200s, want the operators' rate, not tenant default's", last)
		}
		if code, _, body := do(t, "GET", url+"/v1/repos", "", "", def); code != http.StatusOK {
			t.Errorf("tenant default's listing while the operator is over its rate = %d %.200s", code, body)
		}
		if code, _, body := do(t, "POST", url+"/v1/query", "application/json", `{"repo":"demo","query":"ParseToken"}`, def); code != http.StatusOK {
			t.Errorf("tenant default's query while the operator is over its rate = %d %.200s", code, body)
		}
		if code, _, body := do(t, "POST", url+"/v1/mcp", "application/json", ping, mcpHdr(def)); code != http.StatusOK {
			t.Errorf("tenant default's MCP call while the operator is over its rate = %d %.200s", code, body)
		}
	})

	// The slots too: tenant default's one slot held by a request whose
	// body is still coming does not hold the operator's DELETE.
	t.Run("tenant default's slots are not the operator's", func(t *testing.T) {
		url := newSrv(Limits{Rate: -1, TenantConcurrency: 1})
		finish := trickle(t, url+"/v1/query", def, `{"query":"x",`, `"repo":"demo"}`)
		code, body := untilBusy(t, func() (int, string) {
			code, _, body := do(t, "GET", url+"/v1/repos", "", "", def)
			return code, body
		})
		if code != http.StatusTooManyRequests {
			t.Fatalf("tenant default's listing while its slot is held = %d %.200s, want 429", code, body)
		}
		start := time.Now()
		if code, _, body := do(t, "DELETE", url+"/v1/repos/acme/nonexistent", "", "", op); code == http.StatusTooManyRequests || code >= 500 {
			t.Errorf("operator's DELETE while tenant default's slot is held = %d %.200s", code, body)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("operator's DELETE waited %v for tenant default's slot", d)
		}
		if code := finish(); code != http.StatusOK {
			t.Errorf("tenant default's trickled query = %d, want 200", code)
		}
	})
}
