package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"codectx/pkg/api"
	"codectx/pkg/index"
	"codectx/pkg/keys"
)

const (
	envWebhookSecret   = "CODECTX_WEBHOOK_SECRET"
	envWebhookSecrets  = "CODECTX_WEBHOOK_SECRETS_FILE"
	envWebhookBranches = "CODECTX_WEBHOOK_BRANCHES"
	// envWebhookLocal lets a delivery name a path on the server as its
	// clone URL: for a git host on the same machine, and for tests.
	envWebhookLocal = "CODECTX_WEBHOOK_ALLOW_LOCAL"
)

// webhookFlags are the push-webhook settings of the roles serving the
// admin API.
type webhookFlags struct {
	secretsFile string
	branches    string
}

func (w *webhookFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&w.secretsFile, "webhook-secrets", env(envWebhookSecrets, ""),
		"JSON file {\"tenant\": \"secret\", ...} enabling POST /v1/webhooks/{github|gitlab|gitea}/{tenant}; $"+envWebhookSecret+" sets the default tenant's secret; a delivery's clone URL may be a path on the server only with $"+envWebhookLocal+"=true ($"+envWebhookSecrets+")")
	fs.StringVar(&w.branches, "webhook-branches", env(envWebhookBranches, ""),
		"comma-separated branches a push reindexes (default: each repository's default branch) ($"+envWebhookBranches+")")
}

// config reads the secrets. No secrets is valid: webhooks answer 401.
func (w *webhookFlags) config() (api.WebhookConfig, error) {
	cfg := api.WebhookConfig{Secrets: map[string]string{}, AllowLocal: envBool(envWebhookLocal, false)}
	if w.secretsFile != "" {
		data, err := readTrusted(w.secretsFile)
		if err != nil {
			return cfg, fmt.Errorf("webhook secrets: %w", err)
		}
		if err := json.Unmarshal(data, &cfg.Secrets); err != nil {
			return cfg, fmt.Errorf("webhook secrets %s: want a JSON object of tenant to secret: %w", w.secretsFile, err)
		}
	}
	if s := os.Getenv(envWebhookSecret); s != "" {
		cfg.Secrets[index.DefaultTenant] = s
	}
	for t, s := range cfg.Secrets {
		if !index.ValidTenant(t) {
			return cfg, fmt.Errorf("webhook secrets: invalid tenant %q", t)
		}
		if len(s) < 16 {
			return cfg, fmt.Errorf("webhook secrets: the secret of tenant %q is shorter than 16 characters", t)
		}
	}
	for _, b := range strings.Split(w.branches, ",") {
		if b = strings.TrimSpace(b); b != "" {
			cfg.Branches = append(cfg.Branches, b)
		}
	}
	return cfg, nil
}

// readTrusted reads a file of secrets, refusing one that another local
// user could have written (keys.OpenTrusted).
func readTrusted(path string) ([]byte, error) {
	h, _, err := keys.OpenTrusted(path)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return io.ReadAll(h)
}

const (
	envAPIKeys = "CODECTX_API_KEYS_FILE"
	envAPIKey  = "CODECTX_API_KEY"
)

// openKeys opens an API key file (`codectx key` writes it; the older
// object of key SHA-256 -> tenant is read too). "" is an open API. The
// server re-reads the file when it changes.
func openKeys(file string) (*keys.File, error) {
	if file == "" {
		return nil, nil
	}
	f, err := keys.Open(file)
	if err != nil {
		return nil, fmt.Errorf("api keys: %w", err)
	}
	if f.Len() == 0 {
		return nil, fmt.Errorf("api keys %s: no keys (leave the file unset for an open API)", file)
	}
	return f, nil
}
