package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"codectx/pkg/index"
	"codectx/pkg/query"
)

// Client calls a codectx API server.
type Client struct {
	BaseURL string       // e.g. http://127.0.0.1:7700
	HTTP    *http.Client // default: http.DefaultClient
	Key     string       // API key sent as a bearer token, if the server requires one
	// PollInterval is how often WaitIndexed asks for the status; default 250ms.
	PollInterval time.Duration
}

// Error is a non-2xx answer of the server.
type Error struct {
	Code    int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("server: %s (HTTP %d)", e.Message, e.Code) }

// IsNotFound reports whether err is a 404 answer.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == http.StatusNotFound
}

// Query asks a question about a repository.
func (c *Client) Query(ctx context.Context, req QueryRequest) (*query.Response, error) {
	var out query.Response
	if err := c.do(ctx, http.MethodPost, "/v1/query", req, &out); err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	return &out, nil
}

// Index asks the server to index a repository.
func (c *Client) Index(ctx context.Context, req IndexRequest) (*IndexResponse, error) {
	var out IndexResponse
	if err := c.do(ctx, http.MethodPost, "/v1/index", req, &out); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	return &out, nil
}

// Status returns what the server knows about a repository.
func (c *Client) Status(ctx context.Context, tenant, repo string) (*RepoStatus, error) {
	if tenant == "" {
		tenant = index.DefaultTenant
	}
	var out RepoStatus
	path := "/v1/repos/" + url.PathEscape(tenant) + "/" + escapeRepo(repo) + "/status"
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, fmt.Errorf("status %s/%s: %w", tenant, repo, err)
	}
	return &out, nil
}

// Delete removes a repository's index and vectors (admin scope).
func (c *Client) Delete(ctx context.Context, tenant, repo string) (*DeleteResponse, error) {
	if tenant == "" {
		tenant = index.DefaultTenant
	}
	var out DeleteResponse
	if err := c.do(ctx, http.MethodDelete, "/v1/repos/"+url.PathEscape(tenant)+"/"+escapeRepo(repo), nil, &out); err != nil {
		return nil, fmt.Errorf("delete %s/%s: %w", tenant, repo, err)
	}
	return &out, nil
}

// ListRepos returns one page of a tenant's repositories (tenant "": the
// key's own, which the page names); cursor is the last page's Next,
// limit 0 the server's default.
func (c *Client) ListRepos(ctx context.Context, tenant, cursor string, limit int) (*RepoPage, error) {
	q := url.Values{}
	if tenant != "" {
		q.Set("tenant", tenant)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/repos"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out RepoPage
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, fmt.Errorf("list repositories: %w", err)
	}
	return &out, nil
}

// Reindex asks the server to fetch a repository again from where its
// last push came from and index it (index scope).
func (c *Client) Reindex(ctx context.Context, tenant, repo string) (*IndexResponse, error) {
	if tenant == "" {
		tenant = index.DefaultTenant
	}
	var out IndexResponse
	if err := c.do(ctx, http.MethodPost, "/v1/repos/"+url.PathEscape(tenant)+"/"+escapeRepo(repo)+"/reindex", nil, &out); err != nil {
		return nil, fmt.Errorf("reindex %s/%s: %w", tenant, repo, err)
	}
	return &out, nil
}

// WaitIndexed polls the status of a repository until every push it has
// received is covered by a finished snapshot (or, when commit is a hex
// prefix, until the last finished snapshot is that commit), and returns that
// status. It fails if the last snapshot failed or ctx ends; 404, 429 and
// 503 answers (workflow not created yet, over the rate, orchestrator
// restarting) are retried
// until ctx ends.
func (c *Client) WaitIndexed(ctx context.Context, tenant, repo, commit string) (*RepoStatus, error) {
	return c.WaitIndexedFunc(ctx, tenant, repo, commit, nil)
}

// WaitIndexedFunc is WaitIndexed calling seen (when not nil) with every
// status answer while it waits, e.g. to show the snapshot's Progress.
func (c *Client) WaitIndexedFunc(ctx context.Context, tenant, repo, commit string, seen func(*RepoStatus)) (*RepoStatus, error) {
	every := c.PollInterval
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	var last error
	for {
		st, err := c.Status(ctx, tenant, repo)
		switch {
		case err == nil:
			if seen != nil {
				seen(st)
			}
			if isHex(commit) && strings.HasPrefix(st.LastCommit, commit) && st.LastError == "" {
				return st, nil
			}
			if st.Done() {
				if st.LastError != "" {
					return st, fmt.Errorf("index %s/%s: %s", st.Tenant, st.Repo, st.LastError)
				}
				return st, nil
			}
		case retryable(err):
			last = err
		default:
			return nil, err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return st, fmt.Errorf("wait for %s/%s: %w (last answer: %v)", tenant, repo, ctx.Err(), last)
			}
			return st, fmt.Errorf("wait for %s/%s: %w", tenant, repo, ctx.Err())
		case <-time.After(every):
		}
	}
}

func retryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Code == http.StatusNotFound || e.Code == http.StatusServiceUnavailable || e.Code == http.StatusTooManyRequests)
}

func isHex(s string) bool {
	if len(s) < 4 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

func escapeRepo(repo string) string {
	parts := strings.Split(repo, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var eb ErrorBody
		if json.Unmarshal(data, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(string(data))
		}
		return &Error{Code: resp.StatusCode, Message: eb.Error}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}
