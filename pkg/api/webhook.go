package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"

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

const maxWebhookBody = 25 << 20

// webhook verifies a push delivery for a tenant and signals the
// repository's workflow to index the pushed commit. Unverified deliveries
// get 401, malformed ones 400; deliveries that ask for nothing (a ping, a
// deleted branch) get 200 with the reason, so the host does not retry.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request) {
	host, tenant := r.PathValue("host"), r.PathValue("tenant")
	if !index.ValidName(tenant) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("invalid tenant %q", tenant))
		return
	}
	secret := s.Webhooks.Secrets[tenant]
	if secret == "" {
		writeError(w, http.StatusForbidden, fmt.Errorf("webhooks are not enabled for tenant %q", tenant))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("read delivery: %w", err))
		return
	}
	if len(body) > maxWebhookBody {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("delivery larger than %d bytes", maxWebhookBody))
		return
	}
	push, err := webhook.Parse(host, r.Header, body, secret, webhook.Options{Branches: s.Webhooks.Branches})
	var ign *webhook.Ignored
	switch {
	case errors.As(err, &ign):
		writeJSON(w, http.StatusOK, WebhookResponse{Tenant: tenant, Ignored: ign.Reason})
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
	if err := validRepo(tenant, push.Repo); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if !isRemote(push.CloneURL) && !s.Webhooks.AllowLocal {
		writeError(w, http.StatusBadRequest, fmt.Errorf("clone URL %q is not a remote URL", push.CloneURL))
		return
	}
	if s.Indexer == nil {
		writeError(w, http.StatusServiceUnavailable, errors.New("no orchestrator configured"))
		return
	}
	req := IndexRequest{Tenant: tenant, Repo: push.Repo, Location: push.CloneURL, Commit: push.Commit}
	run, err := s.Indexer.Index(r.Context(), req)
	if err != nil {
		s.Log.Error("webhook index", "tenant", tenant, "repo", push.Repo, "error", err)
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("signal %s/%s: %w", tenant, push.Repo, err))
		return
	}
	s.Log.Info("webhook push", "host", host, "tenant", tenant, "repo", push.Repo, "branch", push.Branch, "commit", push.Commit)
	writeJSON(w, http.StatusAccepted, WebhookResponse{Tenant: tenant, Repo: push.Repo, Commit: push.Commit, RunID: run})
}
