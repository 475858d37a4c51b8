// Package webhook turns git-host push notifications into index requests.
// It verifies that a delivery comes from the host (GitHub and Gitea sign
// the body with HMAC-SHA256, GitLab sends a shared token), decodes the push
// event and says which repository moved to which commit. Anything else a
// host sends (ping, issues, a deleted branch, a push to a branch that is
// not indexed) is ignored with a reason, never an error the host retries.
//
// The index itself is incremental: the repository's workflow diffs the new
// commit against the published one and re-parses only changed blobs.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"

	"codectx/pkg/codectx"
)

// Hosts with a parser.
const (
	GitHub = "github"
	GitLab = "gitlab"
	Gitea  = "gitea" // also Forgejo
)

// Errors. ErrUnauthorized and ErrMalformed are the sender's fault (401 and
// 400); an Ignored is a delivery understood and deliberately not acted on.
var (
	ErrUnauthorized = errors.New("webhook: signature or token does not verify")
	ErrMalformed    = errors.New("webhook: malformed delivery")
	ErrUnknownHost  = errors.New("webhook: unknown host")
)

// Ignored is returned for a verified delivery that asks for no index.
type Ignored struct{ Reason string }

func (e *Ignored) Error() string { return "webhook: ignored: " + e.Reason }

// Push is a verified push to the tip of a branch.
type Push struct {
	Host          string
	Repo          string // owner/name as the host spells it ("group/sub/project" on GitLab)
	CloneURL      string
	Branch        string
	DefaultBranch string
	Commit        string // the new tip
	Before        string // the previous tip ("" for a new branch)
}

// Options say which pushes to act on.
type Options struct {
	// Branches to index; empty means the repository's default branch.
	Branches []string
}

const zeroSHA = "0000000000000000000000000000000000000000"

// Parse verifies and decodes one delivery from host. secret is the shared
// secret configured on the host's webhook; an empty secret verifies
// nothing and is refused.
func Parse(host string, h http.Header, body []byte, secret string, opt Options) (*Push, error) {
	v, err := NewVerifier(host, h, secret)
	if err != nil {
		return nil, err
	}
	v.Write(body)
	if err := v.Verify(); err != nil {
		return nil, err
	}
	return Decode(host, h, body, opt)
}

// ErrTooLarge is returned (wrapped) for a delivery body over its limit.
var ErrTooLarge = errors.New("webhook: delivery too large")

// Verifier checks a delivery's signature as its body streams through
// Write, for a reader that keeps the body itself: what the headers alone
// decide is refused before the body is read (NewVerifier), and the HMAC
// of GitHub and Gitea is computed as the body streams in, so a forged
// body is never held twice or parsed.
type Verifier struct {
	mac hash.Hash // nil: the headers alone verified the delivery (GitLab's token)
	sig []byte
}

// NewVerifier checks what the headers alone decide: an unknown host
// (ErrUnknownHost), no or a malformed signature, a wrong GitLab token, no
// secret (ErrUnauthorized). The body is then written to the Verifier and
// Verify says whether its HMAC is the signature.
func NewVerifier(host string, h http.Header, secret string) (*Verifier, error) {
	if secret == "" {
		return nil, fmt.Errorf("%w: no secret configured", ErrUnauthorized)
	}
	switch host {
	case GitHub, Gitea:
		hdr := h.Get("X-Hub-Signature-256")
		if host == Gitea {
			hdr = h.Get("X-Gitea-Signature")
			if hdr == "" {
				hdr = h.Get("X-Forgejo-Signature")
			}
			hdr = "sha256=" + hdr
		}
		s, ok := strings.CutPrefix(hdr, "sha256=")
		if !ok || s == "" {
			return nil, fmt.Errorf("%w: no sha256 signature", ErrUnauthorized)
		}
		sig, err := hex.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%w: signature is not hex", ErrUnauthorized)
		}
		return &Verifier{mac: hmac.New(sha256.New, []byte(secret)), sig: sig}, nil
	case GitLab:
		if subtle.ConstantTimeCompare([]byte(h.Get("X-Gitlab-Token")), []byte(secret)) != 1 {
			return nil, ErrUnauthorized
		}
		return &Verifier{}, nil
	default:
		return nil, fmt.Errorf("%w %s (want %s, %s or %s)", ErrUnknownHost, Quote(host), GitHub, GitLab, Gitea)
	}
}

// Write adds the next bytes of the body.
func (v *Verifier) Write(p []byte) (int, error) {
	if v.mac != nil {
		v.mac.Write(p)
	}
	return len(p), nil
}

// Verify reports whether the body written so far is the one signed
// (ErrUnauthorized if not).
func (v *Verifier) Verify() error {
	if v.mac != nil && !hmac.Equal(v.sig, v.mac.Sum(nil)) {
		return ErrUnauthorized
	}
	return nil
}

// DeliveryID is the id the host gives a delivery (kept by its retries and
// redeliveries), or "" if it sent none.
func DeliveryID(host string, h http.Header) string {
	switch host {
	case GitHub:
		return h.Get("X-GitHub-Delivery")
	case Gitea:
		if id := h.Get("X-Gitea-Delivery"); id != "" {
			return id
		}
		return h.Get("X-Forgejo-Delivery")
	case GitLab:
		if id := h.Get("Idempotency-Key"); id != "" {
			return id
		}
		return h.Get("X-Gitlab-Event-UUID")
	}
	return ""
}

// Decode decodes a delivery that a Verifier verified.
func Decode(host string, h http.Header, body []byte, opt Options) (*Push, error) {
	var event string
	switch host {
	case GitHub:
		event = h.Get("X-GitHub-Event")
	case Gitea:
		event = h.Get("X-Gitea-Event")
		if event == "" {
			event = h.Get("X-Forgejo-Event")
		}
	case GitLab:
		event = h.Get("X-Gitlab-Event")
		if event == "Push Hook" {
			event = "push"
		}
	default:
		return nil, fmt.Errorf("%w %s (want %s, %s or %s)", ErrUnknownHost, Quote(host), GitHub, GitLab, Gitea)
	}
	switch event {
	case "push":
	case "":
		return nil, fmt.Errorf("%w: no event header", ErrMalformed)
	default:
		if len(event) > maxQuoted {
			event = Quote(event)
		}
		return nil, &Ignored{Reason: "event " + event}
	}
	p, deleted, err := decode(host, body)
	if err != nil {
		return nil, err
	}
	if len(p.Branch) > MaxRef {
		// No branch is named so; the reasons below echo the ref.
		return nil, &Ignored{Reason: fmt.Sprintf("ref of %d bytes, longer than the %d-byte limit", len(p.Branch), MaxRef)}
	}
	if !strings.HasPrefix(p.Branch, "refs/heads/") {
		return nil, &Ignored{Reason: "not a branch: " + p.Branch}
	}
	p.Branch = strings.TrimPrefix(p.Branch, "refs/heads/")
	if !ValidBranch(p.Branch) {
		// It goes into the repository's revision and is fetched by name.
		return nil, fmt.Errorf("%w: branch %s is no branch name git sends", ErrMalformed, Quote(p.Branch))
	}
	if deleted || p.Commit == zeroSHA {
		return nil, &Ignored{Reason: "branch " + p.Branch + " deleted"}
	}
	if !wanted(p, opt) {
		return nil, &Ignored{Reason: "branch " + p.Branch + " is not indexed"}
	}
	if p.Before == zeroSHA {
		p.Before = ""
	}
	return p, nil
}

func wanted(p *Push, opt Options) bool {
	if len(opt.Branches) == 0 {
		// Without the default branch in the payload, index what was pushed.
		return p.DefaultBranch == "" || p.Branch == p.DefaultBranch
	}
	for _, b := range opt.Branches {
		if b == p.Branch {
			return true
		}
	}
	return false
}

// payload is the union of the push payloads' fields that matter: GitHub
// and Gitea share one shape, GitLab names things differently.
type payload struct {
	Ref     string `json:"ref"`
	Before  string `json:"before"`
	After   string `json:"after"`
	Deleted bool   `json:"deleted"`
	// GitHub, Gitea
	Repository *struct {
		FullName      string `json:"full_name"`
		CloneURL      string `json:"clone_url"`
		DefaultBranch string `json:"default_branch"`
	} `json:"repository"`
	// GitLab
	CheckoutSHA *string `json:"checkout_sha"`
	Project     *struct {
		PathWithNamespace string `json:"path_with_namespace"`
		GitHTTPURL        string `json:"git_http_url"`
		DefaultBranch     string `json:"default_branch"`
	} `json:"project"`
}

// maxBody bounds a delivery; GitHub caps payloads at 25 MB, but a push
// payload that large lists thousands of commits this package does not read.
const maxBody = 25 << 20

func decode(host string, body []byte) (*Push, bool, error) {
	if len(body) > maxBody {
		return nil, false, fmt.Errorf("%w: body of %d bytes", ErrMalformed, len(body))
	}
	var pl payload
	if err := json.Unmarshal(body, &pl); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	p := &Push{Host: host, Branch: pl.Ref, Commit: pl.After, Before: pl.Before}
	deleted := pl.Deleted
	switch {
	case host == GitLab && pl.Project != nil:
		p.Repo, p.CloneURL, p.DefaultBranch = pl.Project.PathWithNamespace, pl.Project.GitHTTPURL, pl.Project.DefaultBranch
		if pl.CheckoutSHA == nil {
			deleted = true // GitLab sends checkout_sha null for a deleted branch
		}
	case host != GitLab && pl.Repository != nil:
		p.Repo, p.CloneURL, p.DefaultBranch = pl.Repository.FullName, pl.Repository.CloneURL, pl.Repository.DefaultBranch
	default:
		return nil, false, fmt.Errorf("%w: no repository", ErrMalformed)
	}
	switch {
	case p.Branch == "":
		return nil, false, fmt.Errorf("%w: no ref", ErrMalformed)
	case p.Repo == "" || p.CloneURL == "":
		return nil, false, fmt.Errorf("%w: repository without name or clone URL", ErrMalformed)
	case !deleted && len(p.Commit) > maxSHA:
		return nil, false, fmt.Errorf("%w: after of %d bytes is not a commit hash", ErrMalformed, len(p.Commit))
	case !deleted && !isSHA(p.Commit):
		return nil, false, fmt.Errorf("%w: after %s is not a commit hash", ErrMalformed, Quote(p.Commit))
	case !deleted && len(p.Before) > maxSHA:
		// before goes with the push into the workflow's history and, while
		// it waits, into the state carried across continue-as-new: a
		// 1.5 MB one was taken, and two of them waiting wedged the
		// repository's workflow (its carry over the payload limit).
		return nil, false, fmt.Errorf("%w: before of %d bytes is not a commit hash", ErrMalformed, len(p.Before))
	case !deleted && p.Before != "" && !isSHA(p.Before):
		return nil, false, fmt.Errorf("%w: before %s is not a commit hash", ErrMalformed, Quote(p.Before))
	}
	return p, deleted, nil
}

// maxSHA is the length of the longest commit hash (SHA-256, in hex).
const maxSHA = 64

// MaxRef bounds the ref of a push: longer, the delivery is ignored, before
// any answer quotes it.
const MaxRef = 256

// maxQuoted is the most of a client's value an error quotes.
const maxQuoted = 64

// Quote quotes a value a client sent, for an error or a reason: at most
// its first 64 bytes (cut at a character's start), and its length when
// cut, so that what an answer or a log line echoes does not grow with
// what was sent (%q of a 24 MB value of DEL bytes was 96 MB, and its
// JSON 120 MB).
func Quote(s string) string { return codectx.Quote(s, maxQuoted) }

func isSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// ValidBranch reports whether b is a branch name git could have sent (git check-ref-format,
// roughly): nothing that reads as a revision expression or an option.
func ValidBranch(b string) bool {
	if b == "" || len(b) > 255 || strings.HasPrefix(b, "-") || strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") ||
		strings.HasSuffix(b, ".lock") || strings.HasSuffix(b, ".") || strings.Contains(b, "..") || strings.Contains(b, "//") || strings.Contains(b, "@{") {
		return false
	}
	for _, r := range b {
		if r <= ' ' || r == 0x7f || strings.ContainsRune("~^:?*[\\", r) {
			return false
		}
	}
	return true
}
