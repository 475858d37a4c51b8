package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"codectx/pkg/api"
)

// serverClient is the API client of a command's --server: the URL as
// given, with http:// when it names no scheme ("127.0.0.1:7700" was a
// URL parser's error), and the key from $CODECTX_API_KEY.
func serverClient(server string) (*api.Client, error) {
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want http://HOST:PORT (or https://)", server)
	}
	return &api.Client{
		BaseURL: strings.TrimRight(server, "/"), Key: os.Getenv(envAPIKey),
		HTTP: &http.Client{Transport: rateRetry{next: http.DefaultTransport, tries: rateRetries}, Timeout: serverTimeout},
	}, nil
}

// serverTimeout bounds one request of a --server command (and of the mcp
// proxy), its retries of a 429 included: a server that takes the
// connection and never answers hung the command for good. Waiting for an
// index is many short requests.
var serverTimeout = 5 * time.Minute

// rateRetries is how many times a command retries a request its server
// answered 429, and maxRateWait the longest it waits for one retry.
const (
	rateRetries = 4
	maxRateWait = 10 * time.Second
)

// rateRetry retries a request the server answered 429 Too Many Requests
// (over its tenant's rate, or its tenant's requests at once: nothing of
// it was done), after the answer's Retry-After (1 s without one, at most
// maxRateWait), up to tries times; the last 429 is returned as it came.
// The API's 429s carry Retry-After for clients to retry them: without
// this, index, query and repos failed at the first one, a busy tenant's
// index --server before its request was even taken.
type rateRetry struct {
	next  http.RoundTripper
	tries int
}

func (r rateRetry) RoundTrip(req *http.Request) (*http.Response, error) {
	for i := 0; ; i++ {
		resp, err := r.next.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || i >= r.tries || (req.Body != nil && req.Body != http.NoBody && req.GetBody == nil) {
			return resp, err
		}
		wait := retryAfter(resp.Header.Get("Retry-After"))
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		t := time.NewTimer(wait)
		select {
		case <-req.Context().Done():
			t.Stop()
			return nil, req.Context().Err()
		case <-t.C:
		}
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// retryAfter is the wait a Retry-After of seconds asks for: 1 s when
// there is none or it cannot be read, at most maxRateWait.
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return time.Second
	}
	return min(time.Duration(n)*time.Second, maxRateWait)
}

// keyHint says, on a 401 from the server, where the CLI takes its key
// from: the server's own text names the HTTP header.
func keyHint(err error) error {
	var e *api.Error
	if errors.As(err, &e) && e.Code == http.StatusUnauthorized {
		return fmt.Errorf("%w: %s", err, keyAdvice(os.Getenv(envAPIKey)))
	}
	return err
}

// keyAdvice says what to do about a 401 from a server the CLI sent key,
// the value of $CODECTX_API_KEY, to.
func keyAdvice(key string) string {
	if key == "" {
		return fmt.Sprintf("the server wants an API key (read from $%s, which is not set): set $%s to an API key of the server", envAPIKey, envAPIKey)
	}
	return fmt.Sprintf("the server refused the API key read from $%s: it is not one of the server's", envAPIKey)
}
