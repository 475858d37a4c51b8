package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"codectx/pkg/api"
)

// flood sends n requests with key, p at a time, and counts their codes.
func (s *secureStack) flood(t *testing.T, n, p int, method, path, key, body string) map[int]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	work := make(chan struct{}, n)
	for range n {
		work <- struct{}{}
	}
	close(work)
	var wg sync.WaitGroup
	for range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				code, _ := s.doKey(t, method, path, key, body)
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return codes
}

// The rate and slots of a running up, attacked as a security test found
// them: a key's requests that are refused once their body is read (403
// for another tenant, 400) were never charged, so acme could send 64 KiB
// bodies naming beta as fast as it liked; and operators' keys paid with
// tenant default's bucket, so a key of tenant default flooding its own
// rate kept the operator's requests, DELETE among them, answered 429.
func TestSecurityRateBeforeBody(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	s := startSecureUp(t, "--rate-limit", "2", "--rate-burst", "40")
	// A key of tenant default, as `codectx key create --tenant default`
	// gives one: up re-reads its key file.
	const defaultKey = "default-key-0123456789"
	i := slices.Index(s.args, "--api-keys")
	if i < 0 {
		t.Fatal("no --api-keys in up's arguments")
	}
	hashed := map[string]string{api.HashKey(defaultKey): "default"}
	for tenant, key := range s.keys {
		hashed[api.HashKey(key)] = tenant
	}
	writeJSON(t, s.args[i+1], hashed)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := s.doKey(t, "GET", "/v1/repos", defaultKey, "")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tenant default's new key = %d %.200s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // the operator's indexing spent its bucket: let some refill

	t.Run("refused requests are charged", func(t *testing.T) {
		names := make([]string, 1000)
		for i := range names {
			names[i] = fmt.Sprintf(`"r%03d-%s"`, i, strings.Repeat("x", 52))
		}
		big := `{"tenant":"beta","query":"x","repos":[` + strings.Join(names, ",") + `]}`
		if len(big) > api.DefaultQueryBody {
			t.Fatalf("body of %d bytes", len(big))
		}
		start := time.Now()
		codes := s.flood(t, 120, 4, "POST", "/v1/query", s.keys[tenantA], big)
		took := time.Since(start)
		t.Logf("acme's 120 bodies of %d bytes naming beta in %v: %v", len(big), took, codes)
		// The burst of 40 and what refilled meanwhile at 2/s.
		if most := 40 + int(2*took.Seconds()) + 2; codes[http.StatusForbidden] > most || codes[http.StatusTooManyRequests] == 0 {
			t.Errorf("acme's flood naming beta: %v in %v, want at most %d answered 403 and the rest 429: refused requests escape acme's rate", codes, took, most)
		}
		if other := 120 - codes[http.StatusForbidden] - codes[http.StatusTooManyRequests]; other != 0 {
			t.Errorf("acme's flood naming beta: %v", codes)
		}
		// acme's own query right after its refused requests is over its
		// rate too (a few tries: a token may refill between two requests).
		own := 0
		for range 3 {
			s.do(t, "POST", "/v1/query", tenantA, big)
			own, _ = s.do(t, "POST", "/v1/query", tenantA, `{"tenant":"acme","repo":"shop","query":"discount"}`)
			if own == http.StatusTooManyRequests {
				break
			}
		}
		if own != http.StatusTooManyRequests {
			t.Errorf("acme's own query right after its flood of refused requests = %d, want 429", own)
		}
		// beta's rate is beta's.
		if code, body := s.do(t, "POST", "/v1/query", tenantB, `{"tenant":"beta","repo":"vault","query":"MasterToken"}`); code != http.StatusOK {
			t.Errorf("beta's query after acme's flood naming beta = %d %.200s", code, body)
		}
	})

	t.Run("tenant default does not hold the operator's bucket", func(t *testing.T) {
		codes := s.flood(t, 120, 4, "GET", "/v1/repos", defaultKey, "")
		if codes[http.StatusTooManyRequests] == 0 {
			t.Fatalf("tenant default's flood of 120 requests within a burst of 40: %v, want some 429", codes)
		}
		if code, body := s.do(t, "GET", "/v1/repos?tenant=beta", api.AllTenants, ""); code != http.StatusOK {
			t.Errorf("operator's listing while tenant default is over its rate = %d %.200s", code, body)
		}
		if code, body := s.do(t, "DELETE", "/v1/repos/acme/nonexistent", api.AllTenants, ""); code == http.StatusTooManyRequests || code >= 500 {
			t.Errorf("operator's DELETE while tenant default is over its rate = %d %.200s", code, body)
		}
		time.Sleep(time.Second) // both refill a little

		codes = s.flood(t, 120, 4, "GET", "/v1/repos?tenant=acme", s.keys[api.AllTenants], "")
		if codes[http.StatusTooManyRequests] == 0 {
			t.Fatalf("operator's flood of 120 requests within a burst of 40: %v, want some 429", codes)
		}
		if code, body := s.doKey(t, "GET", "/v1/repos", defaultKey, ""); code != http.StatusOK {
			t.Errorf("tenant default's listing while the operator is over its rate = %d %.200s", code, body)
		}
	})
}
