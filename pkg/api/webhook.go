package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"codectx/pkg/index"
	"codectx/pkg/location"
	"codectx/pkg/webhook"
)

// WebhookConfig configures push webhooks.
type WebhookConfig struct {
	Secrets  map[string]string // tenant -> the secret (GitLab: token) set on the host's webhook
	Branches []string          // branches to index; empty = each repository's default branch
	// AllowLocal accepts a clone URL that is a path on this machine (or
	// file://). Off by default: a delivery names what the server clones,
	// and a tenant's secret must not reach the server's own files.
	AllowLocal bool
}

// WebhookResponse is the answer to a delivery: the index run it started,
// or why it was ignored.
type WebhookResponse struct {
	Tenant  string `json:"tenant"`
	Repo    string `json:"repo,omitempty"`
	Commit  string `json:"commit,omitempty"`
	RunID   string `json:"run_id,omitempty"`
	Ignored string `json:"ignored,omitempty"`
}

// webhookWait is how long a delivery's body waits for a chunk of the
// Limits.WebhookBytes budget before 503.
const webhookWait = 2 * time.Second

// paced reads a delivery's body while moving the connection's read
// deadline with what has arrived: the sender has WebhookGrace, then must
// keep WebhookRate bytes a second on average, and has WebhookRead in all.
type paced struct {
	r          io.Reader
	rc         *http.ResponseController
	start, end time.Time
	grace      time.Duration
	rate       float64
	n          int64
}

func (s *Server) paced(w http.ResponseWriter, r io.Reader) *paced {
	now := time.Now()
	p := &paced{r: r, rc: http.NewResponseController(w), start: now, end: now.Add(s.limits.WebhookRead),
		grace: s.limits.WebhookGrace, rate: float64(s.limits.WebhookRate)}
	p.rc.SetReadDeadline(p.deadline())
	return p
}

func (p *paced) deadline() time.Time {
	d := p.start.Add(p.grace + time.Duration(float64(p.n)/p.rate*float64(time.Second)))
	if d.After(p.end) {
		return p.end
	}
	return d
}

// pause moves the pace on by d, a time the server kept the sender
// waiting, and the read deadline with it; the bound in all stays.
func (p *paced) pause(d time.Duration) {
	if d > 0 {
		p.start = p.start.Add(d)
		p.rc.SetReadDeadline(p.deadline())
	}
}

func (p *paced) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.n += int64(n)
		p.rc.SetReadDeadline(p.deadline())
	}
	return n, err
}

// webhook verifies a push delivery for a tenant and signals the
// repository's workflow to index the pushed commit. Unverified deliveries
// get 401, malformed ones 400; deliveries that ask for nothing (a ping, a
// deleted branch, a delivery already taken) get 200 with the reason, so
// the host does not retry.
//
// Cost before authentication is bounded: what the headers decide is
// refused before the body is read, each body is at most
// Limits.WebhookBody bytes (413), the bodies being read share a budget of
// Limits.WebhookBytes reserved as they arrive (bodybudget.go; a delivery
// that finds none free waits up to webhookWait, then gets 503 with
// Retry-After), a sender must keep pace (408), and the signature is
// checked as the body streams in.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request) {
	host, tenant := r.PathValue("host"), r.PathValue("tenant")
	if !index.ValidTenant(tenant) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("invalid tenant %s", webhook.Quote(tenant)))
		return
	}
	secret := s.Webhooks.Secrets[tenant]
	configured := secret != ""
	if !configured {
		// A tenant without a secret (or no such tenant) is answered as a
		// wrong signature is, by the same steps: a secret nobody knows.
		// A distinct answer would tell anyone which tenants exist.
		secret = s.noSecret
	}
	limit := s.limits.WebhookBody
	if r.ContentLength > limit {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("delivery of %d bytes is larger than the %d-byte limit", r.ContentLength, limit))
		return
	}
	body, err := s.readDelivery(w, r, host, secret, limit)
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, errBusy):
		// Legitimate deliveries are small and read in moments; git hosts
		// do not all retry, but a busy server must refuse rather than
		// hold more than its budget.
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("the deliveries being read hold the %d-byte budget: retry", s.webhooks.size))
		return
	case errors.Is(err, context.Canceled):
		return // the sender went away
	case errors.Is(err, webhook.ErrTooLarge) || errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("delivery larger than the %d-byte limit", limit))
		return
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeError(w, http.StatusRequestTimeout, fmt.Errorf("delivery body too slow: it must come at %d bytes a second after %v, whole within %v", s.limits.WebhookRate, s.limits.WebhookGrace, s.limits.WebhookRead))
		return
	case errors.Is(err, webhook.ErrUnauthorized):
		// Anyone may send these, as fast as they can: one line per host
		// and tenant with a secret (the tenants without one, which the
		// sender names at will, share one) and interval, with a count of
		// the others, so a flood of forged deliveries does not write the
		// server's log at the sender's rate.
		key := "webhook\x00" + host + "\x00"
		if configured {
			key += tenant
		}
		s.fails.Warn(r.Context(), key, "webhook rejected", "host", host, "tenant", tenant, "secret_configured", configured, "error", err)
		writeError(w, http.StatusUnauthorized, err)
		return
	case errors.Is(err, webhook.ErrUnknownHost):
		writeError(w, http.StatusNotFound, err)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if !s.allow(w, r, tenant) {
		return
	}
	push, err := webhook.Decode(host, r.Header, body, webhook.Options{Branches: s.Webhooks.Branches})
	var ign *webhook.Ignored
	switch {
	case errors.As(err, &ign):
		writeJSON(w, http.StatusOK, WebhookResponse{Tenant: tenant, Ignored: ign.Reason})
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if err := validRepo(tenant, push.Repo); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	// A delivery is a tenant's word: tenant rules for the clone URL, and a
	// path on the server only when the operator allows local clones. No
	// key is involved: checkLocation's refusal of a path would point at
	// an operator key.
	if loc, err := location.Parse(push.CloneURL); err == nil && loc.Kind == location.Local && !s.Webhooks.AllowLocal {
		writeError(w, http.StatusForbidden, errors.New("clone URL: a path on the server, which a webhook may name only when the operator sets CODECTX_WEBHOOK_ALLOW_LOCAL; push clone URLs (https, git)"))
		return
	}
	if code, err := s.checkLocation(push.CloneURL, tenant, false, s.Webhooks.AllowLocal); err != nil {
		writeError(w, code, fmt.Errorf("clone URL: %w", err))
		return
	}
	if s.Indexer == nil {
		writeError(w, http.StatusServiceUnavailable, errors.New("no orchestrator configured"))
		return
	}
	ctx := r.Context()
	keys, dup, err := s.remember(ctx, host, tenant, r.Header, body)
	if err != nil {
		s.Log.Error("webhook delivery log", "tenant", tenant, "error", err)
		writeError(w, http.StatusServiceUnavailable, errors.New("cannot record the delivery: retry"))
		return
	}
	if dup {
		s.Log.Warn("webhook replay refused", "host", host, "tenant", tenant, "repo", push.Repo, "commit", push.Commit)
		writeJSON(w, http.StatusOK, WebhookResponse{Tenant: tenant, Repo: push.Repo, Commit: push.Commit, Ignored: "duplicate delivery"})
		return
	}
	// A delivery is a tenant's word: a new repository takes one of the
	// tenant's slots. Refused, the delivery is forgotten, so that the
	// host's redelivery is taken once the tenant has freed one.
	unlock := s.lockRepo(tenant, push.Repo)
	defer unlock()
	req := IndexRequest{Tenant: tenant, Repo: push.Repo, Location: push.CloneURL, Commit: push.Commit, Forward: true, Branch: push.Branch}
	run, code, err := s.signal(ctx, req, false)
	if err != nil {
		for _, k := range keys {
			s.Deliveries.Forget(context.WithoutCancel(ctx), k) // the host's retry must be taken
		}
		writeError(w, code, err)
		return
	}
	s.Log.Info("webhook push", "host", host, "tenant", tenant, "repo", push.Repo, "branch", push.Branch, "commit", push.Commit)
	writeJSON(w, http.StatusAccepted, WebhookResponse{Tenant: tenant, Repo: push.Repo, Commit: push.Commit, RunID: run})
}

// readDelivery reads and verifies a delivery's body against the budget.
// The body is read while the connection's read deadline follows the pace
// (Limits.WebhookRate after WebhookGrace, WebhookRead in all), not the
// server's read timeout, so that slow senders are cut in about the grace.
// A verified body is copied out of the budget's chunks (it is small: a
// push's JSON), so the budget is free while it is decoded and signalled;
// a refused one is never copied.
func (s *Server) readDelivery(w http.ResponseWriter, r *http.Request, host, secret string, limit int64) ([]byte, error) {
	v, err := webhook.NewVerifier(host, r.Header, secret)
	if err != nil {
		return nil, err
	}
	d := s.webhooks.start()
	defer d.release()
	p := s.paced(w, http.MaxBytesReader(w, r.Body, limit))
	if err := d.readFrom(r.Context(), p, v, p, webhookWait); err != nil {
		if errors.Is(err, errBusy) || errors.Is(err, context.Canceled) {
			return nil, err
		}
		return nil, fmt.Errorf("webhook: read delivery: %w", err)
	}
	if d.n > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", webhook.ErrTooLarge, limit)
	}
	if err := v.Verify(); err != nil {
		return nil, err
	}
	return d.bytes(), nil
}

// remember records a verified delivery under its host's delivery id and
// under the hash of its body, and reports whether either was seen within
// the window. Both, because the id header is not signed: a replay under a
// fresh id still repeats the signed body.
func (s *Server) remember(ctx context.Context, host, tenant string, h http.Header, body []byte) (keys []string, dup bool, err error) {
	sum := sha256.Sum256(body)
	// The body key leaves the host out: GitHub and Gitea sign the same
	// HMAC, so a delivery re-sent to the other host's route is a replay too.
	keys = []string{deliveryKey(tenant, "body", hex.EncodeToString(sum[:]))}
	if id := webhook.DeliveryID(host, h); id != "" {
		keys = append(keys, deliveryKey(tenant, host, "id", id))
	}
	var added []string
	for _, k := range keys {
		fresh, rerr := s.Deliveries.Remember(ctx, k)
		if rerr != nil {
			err = rerr
			break
		}
		if fresh {
			added = append(added, k)
		} else {
			dup = true
		}
	}
	if err != nil || dup {
		// Leave nothing half recorded: a refused or failed delivery must
		// not make a later distinct one look like a replay.
		for _, k := range added {
			s.Deliveries.Forget(context.WithoutCancel(ctx), k)
		}
	}
	if err != nil {
		return nil, false, err
	}
	return keys, dup, err
}

// deliveryKey names a delivery in the log: a hash, so that any id a host
// sends makes a valid, fixed-size key.
func deliveryKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
