package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
)

// TestAuditDeliveryLogFull: the webhook delivery log (a NATS KV bucket of
// up, shared by every tenant) is bounded, and a key-value bucket refuses
// writes once full. acme, with its own webhook secret and within its
// rate, sends signed pushes of a repository it holds, each a distinct
// delivery, until the log is full; beta's next push must still be taken,
// and replays of recent deliveries still refused. Before, the full bucket
// refused every write: acme's pushes and then beta's were answered 503
// ("cannot record the delivery") until entries expired, up to 24 h.
func TestAuditDeliveryLogFull(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	t.Setenv(envWebhookLocal, "true") // the pushes' clone URLs are the fixtures' paths
	// A log of 16 KiB holds about a hundred entries (two a delivery); the
	// real one, 64 MiB, takes some 200,000 deliveries to fill.
	old := deliveryLogBytes
	deliveryLogBytes = 16 << 10
	t.Cleanup(func() { deliveryLogBytes = old })
	s := startSecureUp(t)
	acmeSecret, betaHook := s.secrets[tenantA], s.secrets[tenantB]
	shop, vault := s.commit[tenantA+"/shop"], s.commit[tenantB+"/vault"]

	deliver := func(tenant, secret, body, id string) (int, string) {
		t.Helper()
		h := hostSig("github", secret, body)
		h["X-GitHub-Delivery"] = id
		code, _, b := s.raw(t, "POST", "/v1/webhooks/github/"+tenant, "application/json", "", strings.NewReader(body), h)
		return code, b
	}
	// acme's pushes: the commit it has, each body distinct (its "before"),
	// so that each is a new delivery.
	acmePush := func(i int) string {
		return `{"ref":"refs/heads/master","before":"` + fmt.Sprintf("%040x", i+1) + `","after":"` + shop +
			`","repository":{"full_name":"shop","clone_url":"` + s.shopDir + `","default_branch":"master"}}`
	}
	const flood = 300 // three times what the log holds
	var last string
	refused := 0
	for i := range flood {
		body := acmePush(i)
		code, b := deliver(tenantA, acmeSecret, body, fmt.Sprintf("acme-%d", i))
		switch {
		case code == http.StatusAccepted:
			last = body
		case code == http.StatusServiceUnavailable && refused == 0:
			t.Errorf("acme's push %d of %d = %d %s, want 202: the full delivery log refuses deliveries", i+1, flood, code, b)
			refused++
		case code == http.StatusServiceUnavailable:
			refused++
		default:
			t.Fatalf("acme's push %d = %d %s", i+1, code, b)
		}
	}
	if refused > 0 {
		t.Errorf("%d of acme's %d pushes refused", refused, flood)
	}

	// beta's push, after acme's flood: taken.
	betaBody := `{"ref":"refs/heads/master","before":"` + strings.Repeat("0", 40) + `","after":"` + vault +
		`","repository":{"full_name":"vault","clone_url":"` + s.vault + `","default_branch":"master"}}`
	if code, b := deliver(tenantB, betaHook, betaBody, "beta-1"); code != http.StatusAccepted {
		t.Fatalf("beta's push after acme filled the delivery log = %d %s, want 202", code, b)
	}
	// The newest deliveries are still remembered: replays are refused.
	for _, r := range []struct{ tenant, secret, body, id string }{
		{tenantB, betaHook, betaBody, "beta-1"},
		{tenantB, betaHook, betaBody, "beta-fresh-id"},
		{tenantA, acmeSecret, last, "acme-fresh-id"},
	} {
		if code, b := deliver(r.tenant, r.secret, r.body, r.id); code != http.StatusOK || !strings.Contains(b, "duplicate") {
			t.Errorf("replay of %s's last push (id %s) = %d %s, want 200 duplicate", r.tenant, r.id, code, b)
		}
	}
	// And beta's push was acted on.
	beta := s.client(tenantB)
	s.up.waitFor(t, "beta's push covered", time.Minute, func() bool {
		st, err := beta.Status(t.Context(), tenantB, "vault")
		return err == nil && st.Received >= 2 && st.Covered >= st.Received && st.State == api.StateIdle
	})
}
