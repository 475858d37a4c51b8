package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

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
	return &api.Client{BaseURL: strings.TrimRight(server, "/"), Key: os.Getenv(envAPIKey)}, nil
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
