package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
)

// startRole runs `codectx ROLE args...` in a goroutine until the test ends.
func startRole(t *testing.T, name string, args ...string) *upProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &upProc{cancel: cancel, done: make(chan error, 1), out: &syncBuffer{}, errs: &syncBuffer{}}
	go func() { p.done <- run(ctx, append([]string{name}, args...), p.out, p.errs) }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

func readyz(t *testing.T, base string) (int, api.Readiness) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return 0, api.Readiness{}
	}
	defer resp.Body.Close()
	var r api.Readiness
	json.NewDecoder(resp.Body).Decode(&r)
	return resp.StatusCode, r
}

func TestQueryServiceRole(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(t.TempDir(), "lib")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := "package lib\n\n// Checksum computes the Adler-32 checksum of data.\nfunc Checksum(data []byte) uint32 { return 1 }\n"
	if err := os.WriteFile(filepath.Join(dir, "sum.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"index", "--data", data, dir}, &syncBuffer{}, &syncBuffer{}); err != nil {
		t.Fatalf("index: %v", err)
	}
	addr := freeAddr(t)
	p := startRole(t, "query-service", "--data", data, "--listen", addr)
	base := "http://" + addr
	p.waitFor(t, "readiness", 30*time.Second, func() bool { code, _ := readyz(t, base); return code == 200 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := (&api.Client{BaseURL: base}).Query(ctx, api.QueryRequest{Repo: "lib", Query: "Checksum"})
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	if len(resp.Chunks) == 0 || resp.Chunks[0].Path != "sum.go" {
		t.Errorf("query chunks = %+v, want sum.go first", resp.Chunks)
	}
	// The query service has no admin routes.
	if _, err := (&api.Client{BaseURL: base}).Index(ctx, api.IndexRequest{Location: dir}); !api.IsNotFound(err) {
		t.Errorf("index on the query service: %v, want 404", err)
	}
}

func TestEmbedWorkerRoleIsDisabled(t *testing.T) {
	addr := freeAddr(t)
	p := startRole(t, "embed-worker", "--data", t.TempDir(), "--listen", addr)
	var r api.Readiness
	p.waitFor(t, "readiness", 30*time.Second, func() bool {
		var code int
		code, r = readyz(t, "http://"+addr)
		return code == 200
	})
	if r.Notes["embed"] != embedDisabled {
		t.Errorf("readyz notes = %v, want embed %q", r.Notes, embedDisabled)
	}
}

// A role whose dependency is down stays alive and not ready, and shuts
// down cleanly.
func TestGatewayNotReadyWithoutTemporal(t *testing.T) {
	addr := freeAddr(t)
	dead := freeAddr(t) // nothing listens here
	p := startRole(t, "gateway", "--data", t.TempDir(), "--listen", addr, "--temporal", dead)
	base := "http://" + addr
	var r api.Readiness
	p.waitFor(t, "a readiness answer", 30*time.Second, func() bool {
		var code int
		code, r = readyz(t, base)
		// Before the store opens, the starting handler answers 503 too.
		return code == 503 && r.Checks["store"] == "ok"
	})
	if !strings.Contains(r.Checks["temporal"], "connecting") || r.Checks["store"] != "ok" {
		t.Errorf("readyz checks = %v, want temporal connecting, store ok", r.Checks)
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("healthz = %v, %v; want 200", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var e *api.Error
	_, err = (&api.Client{BaseURL: base}).Index(ctx, api.IndexRequest{Location: "/x/y"})
	if !errors.As(err, &e) || e.Code != 503 {
		t.Errorf("index without temporal: %v, want 503", err)
	}
	p.stop(t)
}

// A role whose store is unreachable at start still serves /healthz (a
// liveness probe must not kill it) and reports the store in /readyz
// (issue 14 item 2).
func TestHealthzServedWhileStoreUnreachable(t *testing.T) {
	addr := freeAddr(t)
	dead := freeAddr(t) // nothing listens here
	p := startRole(t, "query-service", "--data", t.TempDir(), "--listen", addr, "--s3-endpoint", dead,
		"--s3-access-key", "k", "--s3-secret-key", "s")
	base := "http://" + addr
	p.waitFor(t, "/healthz", 30*time.Second, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	code, r := readyz(t, base)
	if code != 503 || !strings.Contains(r.Checks["store"], "connecting") {
		t.Errorf("readyz with the store unreachable = %d %v, want 503 naming the store", code, r.Checks)
	}
	p.stop(t)
}

// A role tightens a data directory that an older version or a hand left
// open to other local users, as up does.
func TestRoleDataDirPrivate(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(data, 0o755); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := startRole(t, "query-service", "--data", data, "--listen", addr)
	p.waitFor(t, "readiness", 30*time.Second, func() bool { code, _ := readyz(t, "http://"+addr); return code == 200 })
	fi, err := os.Stat(data)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("data directory mode %v after the role started, want 0700", perm)
	}
}
