package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"codectx/pkg/temporalserver"
	"codectx/pkg/tlsfile/tlstest"

	"github.com/nats-io/nats-server/v2/server"
)

// A role reaches a Temporal and a NATS server that require mutual TLS
// with the operator's PEM files (--temporal-tls-*, --nats-tls-*), and is
// not let in without them or with a certificate of another CA: whoever
// can reach those ports cannot act as a worker.
func TestRolesTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("short: starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "operator")
	srv := ca.Issue(t, dir, "server")
	role := ca.Issue(t, dir, "role")
	stranger := tlstest.NewCA(t, dir, "stranger").Issue(t, dir, "stranger")

	ts, err := temporalserver.Start(ctx, temporalserver.Config{DataDir: t.TempDir(), Namespace: "codectx-tls",
		TLS: &temporalserver.TLS{Server: srv.ServerTLS, Client: srv.ClientTLS}})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Stop()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		NoSigs: true, NoLog: true, TLS: true, TLSVerify: true, TLSConfig: srv.ServerTLS, TLSTimeout: 5})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	natsURL := strings.Replace(ns.ClientURL(), "nats://", "tls://", 1)

	start := func(tlsArgs ...string) (*upProc, string) {
		addr := freeAddr(t)
		args := append([]string{"--data", t.TempDir(), "--listen", addr, "--temporal", ts.HostPort(), "--namespace", "codectx-tls", "--nats", natsURL}, tlsArgs...)
		return startRole(t, "orchestrator", args...), "http://" + addr
	}
	files := func(c *tlstest.Pair) []string {
		return []string{"--temporal-tls-ca", ca.File, "--temporal-tls-cert", c.CertFile, "--temporal-tls-key", c.KeyFile,
			"--nats-tls-ca", ca.File, "--nats-tls-cert", c.CertFile, "--nats-tls-key", c.KeyFile}
	}

	// The good role takes NATS's files from the environment, Temporal's
	// from flags: the deployment's way and the command line's.
	t.Setenv(envNATSCA, ca.File)
	t.Setenv(envNATSCert, role.CertFile)
	t.Setenv(envNATSKey, role.KeyFile)
	good, goodBase := start(files(role)[:6]...)
	good.waitFor(t, "readiness over mutual TLS", time.Minute, func() bool { code, _ := readyz(t, goodBase); return code == 200 })

	// Refused: no TLS at all, the CA without a client certificate, and a
	// certificate another CA signed. Each is still not ready after the
	// good role took far less to be.
	refused := map[string][]string{
		"plaintext":              {"--nats", strings.Replace(natsURL, "tls://", "nats://", 1)},
		"CA without client cert": {"--temporal-tls-ca", ca.File, "--nats-tls-ca", ca.File},
		"another CA's cert":      files(stranger),
	}
	for _, k := range []string{envNATSCA, envNATSCert, envNATSKey} {
		os.Unsetenv(k) // t.Setenv restores them at the end
	}
	bases := map[string]string{}
	for name, args := range refused {
		_, bases[name] = start(args...)
	}
	time.Sleep(5 * time.Second)
	for name, base := range bases {
		code, r := readyz(t, base)
		if code == 200 || r.Checks["temporal"] == "ok" || r.Checks["nats"] == "ok" {
			t.Errorf("%s: /readyz %d %+v; want temporal and nats refused", name, code, r.Checks)
		}
	}

	// A file that cannot be used stops the role at once, naming it.
	p, _ := start("--temporal-tls-cert", role.CertFile, "--temporal-tls-key", stranger.KeyFile)
	select {
	case err := <-p.done:
		p.cancel = nil
		if err == nil || !strings.Contains(err.Error(), role.CertFile) {
			t.Errorf("a key of another certificate: %v; want an error naming %s", err, role.CertFile)
		}
	case <-time.After(10 * time.Second):
		t.Error("a key of another certificate: the role kept running")
	}
}
