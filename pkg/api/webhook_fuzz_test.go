package api

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/index"
)

// FuzzWebhookSigned posts deliveries signed with tenant acme's secret,
// their bodies and event headers fuzzed, to a real server's webhook
// route for each host. Past the signature every input is the sender's
// word: no delivery may get a 5xx, a 202 must have signalled exactly one
// index of acme's (a valid repository name, a commit hash, a push that
// may only move forward), any other answer none, and the same delivery
// posted to tenant beta's route must be refused 401 with nothing
// signalled.
func FuzzWebhookSigned(f *testing.F) {
	const (
		acmeSecret = "a-secret"
		sha        = "2222222222222222222222222222222222222222"
	)
	fake := &fakeIndexer{}
	ts := httptest.NewServer((&Server{Store: blob.NewMem(), Indexer: fake, Routes: AllRoutes, Limits: Limits{Rate: -1},
		Webhooks: WebhookConfig{Secrets: map[string]string{"acme": acmeSecret, "beta": "b-secret"}}}).Handler())
	f.Cleanup(ts.Close)
	hosts := []string{"github", "gitlab", "gitea"}
	gh := `{"ref":"refs/heads/main","before":"1111111111111111111111111111111111111111","after":"` + sha +
		`","repository":{"full_name":"acme/shop","clone_url":"https://git.example/acme/shop.git","default_branch":"main"}}`
	gl := `{"ref":"refs/heads/main","after":"` + sha + `","checkout_sha":"` + sha +
		`","project":{"path_with_namespace":"acme/shop","git_http_url":"https://git.example/acme/shop.git","default_branch":"main"}}`
	for _, seed := range []struct {
		host  uint8
		event string
		body  string
	}{
		{0, "push", gh},
		{1, "Push Hook", gl},
		{2, "push", gh},
		{0, "ping", `{}`},
		{0, "push", `{"ref":"refs/heads/main","after":"` + sha + `","repository":{"full_name":"../beta/shop","clone_url":"https://git.example/x.git"}}`},
		{0, "push", `{"ref":"refs/heads/main","after":"` + sha + `","repository":{"full_name":"shop","clone_url":"file:///etc"}}`},
		{1, "Push Hook", `{"ref":"refs/tags/v1","after":"` + sha + `","checkout_sha":null,"project":{"path_with_namespace":"a/b","git_http_url":"http://127.0.0.1/x"}}`},
	} {
		f.Add(seed.host, seed.event, []byte(seed.body))
	}
	post := func(t *testing.T, host, tenant, event string, body []byte) (int, []byte) {
		req, err := http.NewRequest("POST", ts.URL+"/v1/webhooks/"+host+"/"+tenant, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		mac := hmac.New(sha256.New, []byte(acmeSecret))
		mac.Write(body)
		sig := hex.EncodeToString(mac.Sum(nil))
		req.Header.Set("Content-Type", "application/json")
		switch host {
		case "github":
			req.Header.Set("X-GitHub-Event", event)
			req.Header.Set("X-Hub-Signature-256", "sha256="+sig)
		case "gitlab":
			req.Header.Set("X-Gitlab-Event", event)
			req.Header.Set("X-Gitlab-Token", acmeSecret)
		case "gitea":
			req.Header.Set("X-Gitea-Event", event)
			req.Header.Set("X-Gitea-Signature", sig)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}
	signals := func() []IndexRequest {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return slices.Clone(fake.reqs)
	}
	f.Fuzz(func(t *testing.T, h uint8, event string, body []byte) {
		host := hosts[int(h)%len(hosts)]
		if !validHeader(event) {
			return // no HTTP client sends it
		}
		before := len(signals())
		code, answer := post(t, host, "acme", event, body)
		after := signals()
		if code >= 500 {
			t.Fatalf("%s %q %q: %d %s", host, event, body, code, answer)
		}
		if code != http.StatusAccepted {
			if len(after) != before {
				t.Fatalf("%s %q %q: answered %d, yet signalled %+v", host, event, body, code, after[before:])
			}
		} else {
			var a WebhookResponse
			if err := json.Unmarshal(answer, &a); err != nil {
				t.Fatalf("202 %s: %v", answer, err)
			}
			if len(after) != before+1 {
				t.Fatalf("%s %q %q: 202, and %d signals", host, event, body, len(after)-before)
			}
			r := after[before]
			if r.Tenant != "acme" || r.Repo != a.Repo || !index.ValidName(r.Repo) || !r.Forward || len(r.Commit) < 40 || r.Commit != a.Commit {
				t.Fatalf("%s %q %q: signalled %+v for answer %s", host, event, body, r, answer)
			}
		}
		// Acme's signature is no key to beta's route.
		before = len(signals())
		if code, answer := post(t, host, "beta", event, body); code != http.StatusUnauthorized || len(signals()) != before {
			t.Fatalf("%s %q %q to beta with acme's secret: %d %s", host, event, body, code, answer)
		}
	})
}

// validHeader reports whether v can be sent as a header value.
func validHeader(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
