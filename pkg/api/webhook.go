package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"codectx/pkg/index"
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

// webhookWait is how long a delivery waits for one of the Limits.Webhooks
// slots before 503.
const webhookWait = 2 * time.Second

// webhook verifies a push delivery for a tenant and signals the
// repository's workflow to index the pushed commit. Unverified deliveries
// get 401, malformed ones 400; deliveries that ask for nothing (a ping, a
// deleted branch, a delivery already taken) get 200 with the reason, so
// the host does not retry.
//
// Cost before authentication is bounded: what the headers decide is
// refused before the body is read, at most Limits.Webhooks deliveries are
// read at once (others wait up to webhookWait, then get 503 with
// Retry-After), each at most
// Limits.WebhookBody bytes (413), and the signature is checked as the body
// streams in.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request) {
	host, tenant := r.PathValue("host"), r.PathValue("tenant")
	if !index.ValidTenant(tenant) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("invalid tenant %q", tenant))
		return
	}
	secret := s.Webhooks.Secrets[tenant]
	if secret == "" {
		writeError(w, http.StatusForbidden, fmt.Errorf("webhooks are not enabled for tenant %q", tenant))
		return
	}
	limit := s.limits.WebhookBody
	if r.ContentLength > limit {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("delivery of %d bytes is larger than the %d-byte limit", r.ContentLength, limit))
		return
	}
	// Wait a little for a slot (legitimate deliveries are small and read
	// in moments), then refuse: git hosts do not all retry.
	wait := time.NewTimer(webhookWait)
	select {
	case s.webhooks <- struct{}{}:
		wait.Stop()
	case <-wait.C:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%d deliveries are being read: retry", cap(s.webhooks)))
		return
	case <-r.Context().Done():
		wait.Stop()
		return
	}
	body, err := webhook.Read(host, r.Header, http.MaxBytesReader(w, r.Body, limit), r.ContentLength, secret, limit)
	<-s.webhooks
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, webhook.ErrTooLarge) || errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("delivery larger than the %d-byte limit", limit))
		return
	case errors.Is(err, webhook.ErrUnauthorized):
		s.Log.Warn("webhook rejected", "host", host, "tenant", tenant, "error", err)
		writeError(w, http.StatusUnauthorized, err)
		return
	case errors.Is(err, webhook.ErrUnknownHost):
		writeError(w, http.StatusNotFound, err)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if !s.allow(w, tenant) {
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
	// path on the server only when the operator allows local clones.
	if code, err := s.checkLocation(push.CloneURL, false, s.Webhooks.AllowLocal); err != nil {
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
	req := IndexRequest{Tenant: tenant, Repo: push.Repo, Location: push.CloneURL, Commit: push.Commit, Forward: true}
	run, err := s.Indexer.Index(ctx, req)
	if err != nil {
		for _, k := range keys {
			s.Deliveries.Forget(context.WithoutCancel(ctx), k) // the host's retry must be taken
		}
		s.Log.Error("webhook index", "tenant", tenant, "repo", push.Repo, "error", err)
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("signal %s/%s: %w", tenant, push.Repo, err))
		return
	}
	s.Log.Info("webhook push", "host", host, "tenant", tenant, "repo", push.Repo, "branch", push.Branch, "commit", push.Commit)
	writeJSON(w, http.StatusAccepted, WebhookResponse{Tenant: tenant, Repo: push.Repo, Commit: push.Commit, RunID: run})
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
