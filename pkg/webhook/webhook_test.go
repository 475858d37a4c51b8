package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"

	"codectx/pkg/webhook"
)

const (
	secret = "s3cret"
	sha1   = "1111111111111111111111111111111111111111"
	sha2   = "2222222222222222222222222222222222222222"
	zero   = "0000000000000000000000000000000000000000"
)

func sign(body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

func githubPush(ref, before, after string, deleted bool) string {
	d := "false"
	if deleted {
		d = "true"
	}
	return `{"ref":"` + ref + `","before":"` + before + `","after":"` + after + `","deleted":` + d +
		`,"repository":{"full_name":"acme/shop","clone_url":"https://git.example/acme/shop.git","default_branch":"main"},"commits":[]}`
}

func gh(event, body, sig string) http.Header {
	h := http.Header{}
	if event != "" {
		h.Set("X-GitHub-Event", event)
	}
	if sig != "" {
		h.Set("X-Hub-Signature-256", sig)
	}
	return h
}

func TestParse(t *testing.T) {
	push := githubPush("refs/heads/main", sha1, sha2, false)
	gitlab := `{"object_kind":"push","ref":"refs/heads/main","before":"` + sha1 + `","after":"` + sha2 + `","checkout_sha":"` + sha2 +
		`","project":{"path_with_namespace":"group/sub/shop","git_http_url":"https://gitlab.example/group/sub/shop.git","default_branch":"main"}}`
	gitlabDeleted := `{"object_kind":"push","ref":"refs/heads/main","before":"` + sha1 + `","after":"` + zero + `","checkout_sha":null,` +
		`"project":{"path_with_namespace":"group/shop","git_http_url":"https://gitlab.example/group/shop.git","default_branch":"main"}}`
	glh := func(tok string) http.Header {
		h := http.Header{}
		h.Set("X-Gitlab-Event", "Push Hook")
		h.Set("X-Gitlab-Token", tok)
		return h
	}
	gitea := http.Header{}
	gitea.Set("X-Gitea-Event", "push")
	gitea.Set("X-Gitea-Signature", sign(push))

	tests := []struct {
		name    string
		host    string
		h       http.Header
		body    string
		secret  string
		opt     webhook.Options
		want    *webhook.Push
		err     error  // errors.Is target
		ignored string // Ignored reason substring
	}{
		{name: "github push", host: webhook.GitHub, h: gh("push", push, "sha256="+sign(push)), body: push,
			want: &webhook.Push{Host: "github", Repo: "acme/shop", CloneURL: "https://git.example/acme/shop.git", Branch: "main", DefaultBranch: "main", Commit: sha2, Before: sha1}},
		{name: "new branch has no before", host: webhook.GitHub, body: githubPush("refs/heads/main", zero, sha2, false),
			want: &webhook.Push{Host: "github", Repo: "acme/shop", CloneURL: "https://git.example/acme/shop.git", Branch: "main", DefaultBranch: "main", Commit: sha2}},
		{name: "bad signature", host: webhook.GitHub, h: gh("push", push, "sha256="+sign(push+"x")), body: push, err: webhook.ErrUnauthorized},
		{name: "no signature", host: webhook.GitHub, h: gh("push", push, ""), body: push, err: webhook.ErrUnauthorized},
		{name: "signature not hex", host: webhook.GitHub, h: gh("push", push, "sha256=zz"), body: push, err: webhook.ErrUnauthorized},
		{name: "no secret configured", host: webhook.GitHub, body: push, secret: "-", err: webhook.ErrUnauthorized},
		{name: "ping", host: webhook.GitHub, h: gh("ping", `{"zen":"hi"}`, "sha256="+sign(`{"zen":"hi"}`)), body: `{"zen":"hi"}`, ignored: "event ping"},
		{name: "no event header", host: webhook.GitHub, h: gh("", push, "sha256="+sign(push)), body: push, err: webhook.ErrMalformed},
		{name: "not json", host: webhook.GitHub, body: `{"ref":`, err: webhook.ErrMalformed},
		{name: "no repository", host: webhook.GitHub, body: `{"ref":"refs/heads/main","after":"` + sha2 + `"}`, err: webhook.ErrMalformed},
		{name: "after not a sha", host: webhook.GitHub, body: githubPush("refs/heads/main", sha1, "HEAD", false), err: webhook.ErrMalformed},
		{name: "branch no git name", host: webhook.GitHub, body: githubPush("refs/heads/a..b", sha1, sha2, false), err: webhook.ErrMalformed},
		{name: "branch a revision", host: webhook.GitHub, body: githubPush("refs/heads/main@{1}", sha1, sha2, false), err: webhook.ErrMalformed},
		{name: "before not a sha", host: webhook.GitHub, body: githubPush("refs/heads/main", "HEAD", sha2, false), err: webhook.ErrMalformed},
		{name: "before too long", host: webhook.GitHub, body: githubPush("refs/heads/main", strings.Repeat("b", 100), sha2, false), err: webhook.ErrMalformed},
		{name: "branch deleted", host: webhook.GitHub, body: githubPush("refs/heads/main", sha1, zero, true), ignored: "deleted"},
		{name: "tag", host: webhook.GitHub, body: githubPush("refs/tags/v1", zero, sha2, false), ignored: "not a branch"},
		{name: "other branch", host: webhook.GitHub, body: githubPush("refs/heads/feature", sha1, sha2, false), ignored: "not indexed"},
		{name: "configured branch", host: webhook.GitHub, body: githubPush("refs/heads/release", sha1, sha2, false), opt: webhook.Options{Branches: []string{"release"}},
			want: &webhook.Push{Host: "github", Repo: "acme/shop", CloneURL: "https://git.example/acme/shop.git", Branch: "release", DefaultBranch: "main", Commit: sha2, Before: sha1}},
		{name: "gitlab push", host: webhook.GitLab, h: glh(secret), body: gitlab,
			want: &webhook.Push{Host: "gitlab", Repo: "group/sub/shop", CloneURL: "https://gitlab.example/group/sub/shop.git", Branch: "main", DefaultBranch: "main", Commit: sha2, Before: sha1}},
		{name: "gitlab wrong token", host: webhook.GitLab, h: glh("guess"), body: gitlab, err: webhook.ErrUnauthorized},
		{name: "gitlab deleted branch", host: webhook.GitLab, h: glh(secret), body: gitlabDeleted, ignored: "deleted"},
		{name: "gitea push", host: webhook.Gitea, h: gitea, body: push,
			want: &webhook.Push{Host: "gitea", Repo: "acme/shop", CloneURL: "https://git.example/acme/shop.git", Branch: "main", DefaultBranch: "main", Commit: sha2, Before: sha1}},
		{name: "unknown host", host: "svn", h: http.Header{}, body: push, err: webhook.ErrUnknownHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.h
			if h == nil {
				h = gh("push", tt.body, "sha256="+sign(tt.body))
			}
			sec := secret
			if tt.secret == "-" {
				sec = ""
			}
			got, err := webhook.Parse(tt.host, h, []byte(tt.body), sec, tt.opt)
			var ign *webhook.Ignored
			switch {
			case tt.ignored != "":
				if !errors.As(err, &ign) || !strings.Contains(ign.Reason, tt.ignored) {
					t.Fatalf("Parse = %+v, %v; want ignored %q", got, err, tt.ignored)
				}
			case tt.err != nil:
				if !errors.Is(err, tt.err) {
					t.Fatalf("Parse = %+v, %v; want %v", got, err, tt.err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if *got != *tt.want {
					t.Errorf("Parse = %+v, want %+v", *got, *tt.want)
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(githubPush("refs/heads/main", sha1, sha2, false)))
	f.Add([]byte(`{"ref":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		h := gh("push", string(body), "sha256="+sign(string(body)))
		p, err := webhook.Parse(webhook.GitHub, h, body, secret, webhook.Options{})
		if err == nil && (p.Repo == "" || p.CloneURL == "" || len(p.Commit) < 40) {
			t.Fatalf("accepted an incomplete push: %+v", p)
		}
	})
}

// Quote echoes at most 64 bytes of a client's value, cut at a character's
// start, and the value's length.
func TestQuote(t *testing.T) {
	if got := webhook.Quote("main"); got != `"main"` {
		t.Errorf("Quote(main) = %s", got)
	}
	long := strings.Repeat("\x7f", 1<<20)
	if got, want := webhook.Quote(long), `"`+strings.Repeat(`\x7f`, 64)+`"... (1048576 bytes)`; got != want {
		t.Errorf("Quote of 1 MiB of DEL = %.100s (%d bytes), want %.100s", got, len(got), want)
	}
	// 63 ASCII bytes, then a 3-byte character across the 64th byte.
	s := strings.Repeat("a", 63) + "\u2028" + strings.Repeat("b", 10)
	if got, want := webhook.Quote(s), `"`+strings.Repeat("a", 63)+`"... (76 bytes)`; got != want {
		t.Errorf("Quote cut inside a character: %s, want %s", got, want)
	}
}

func TestValidBranch(t *testing.T) {
	for b, want := range map[string]bool{
		"main": true, "feature/x-1": true, "release-1.2": true,
		"": false, "-x": false, "a..b": false, "m@{1}": false, "m~1": false, "m^": false, "a b": false,
		"x:y": false, "/x": false, "x/": false, "x.lock": false, "a//b": false, "x.": false, "a\\b": false,
	} {
		if got := webhook.ValidBranch(b); got != want {
			t.Errorf("ValidBranch(%q) = %v, want %v", b, got, want)
		}
	}
}
