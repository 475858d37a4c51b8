package main

import (
	"errors"
	"strings"
	"testing"

	"codectx/pkg/api"
)

func TestServerClient(t *testing.T) {
	t.Setenv(envAPIKey, "k1")
	for _, c := range []struct{ in, base, err string }{
		{"127.0.0.1:7700", "http://127.0.0.1:7700", ""},
		{"localhost:7700/", "http://localhost:7700", ""},
		{"http://127.0.0.1:7700/", "http://127.0.0.1:7700", ""},
		{"https://codectx.example", "https://codectx.example", ""},
		{"ftp://127.0.0.1:7700", "", "want http://HOST:PORT"},
		{"http://", "", "want http://HOST:PORT"},
		{"http://a b", "", "want http://HOST:PORT"},
	} {
		cl, err := serverClient(c.in)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("serverClient(%q) = %v, want an error with %q", c.in, err, c.err)
			}
		case err != nil || cl.BaseURL != c.base || cl.Key != "k1":
			t.Errorf("serverClient(%q) = %+v, %v; want %s with the key", c.in, cl, err, c.base)
		}
	}
}

func TestKeyHint(t *testing.T) {
	unauthorized := &api.Error{Code: 401, Message: "an API key is required (Authorization: Bearer KEY)"}
	t.Setenv(envAPIKey, "")
	if err := keyHint(unauthorized); !strings.Contains(err.Error(), "set $"+envAPIKey) || !errors.Is(err, unauthorized) {
		t.Errorf("no key: %v", err)
	}
	t.Setenv(envAPIKey, "wrong")
	if err := keyHint(unauthorized); !strings.Contains(err.Error(), "is not one of the server's") {
		t.Errorf("wrong key: %v", err)
	}
	other := &api.Error{Code: 404, Message: "repository default/x is not indexed"}
	if err := keyHint(other); err != error(other) {
		t.Errorf("404: %v, want it unchanged", err)
	}
	if keyHint(nil) != nil {
		t.Error("nil error changed")
	}
}
