package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// TestDataOrServer: --data and --server together are refused (one was
// silently ignored), and --data wins over a server from the environment.
func TestDataOrServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := shopData(t)
	for _, args := range [][]string{
		{"query", "--data", data, "--server", "http://127.0.0.1:1", "--repo", "shop", "cart total"},
		{"index", "--data", data, "--server", "http://127.0.0.1:1", "."},
		{"repos", "list", "--data", data, "--server", "http://127.0.0.1:1"},
		{"mcp", "--data", data, "--server", "http://127.0.0.1:1"},
	} {
		stdin = strings.NewReader("")
		err := run(ctx, args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "not both") {
			t.Errorf("%s: %v, want --data and --server refused together", strings.Join(args, " "), err)
		}
	}
	// A server in the environment that answers nothing: --data is read.
	t.Setenv(envServer, "http://127.0.0.1:1")
	var out strings.Builder
	if err := run(ctx, []string{"query", "--data", data, "--tenant", "acme", "--repo", "shop", "--budget", "500", "cart total"}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "shop@") {
		t.Errorf("query --data with $%s set: %v\n%s", envServer, err, out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"repos", "list", "--data", data, "--tenant", "acme"}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "shop") {
		t.Errorf("repos list --data with $%s set: %v\n%s", envServer, err, out.String())
	}
}
