package tlsfile_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"codectx/pkg/tlsfile"
	"codectx/pkg/tlsfile/tlstest"
)

func TestClientErrors(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	p := ca.Issue(t, dir, "client")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files tlsfile.Files
		err   string // "" = no error
	}{
		{"missing CA", tlsfile.Files{CA: filepath.Join(dir, "nope.pem")}, "nope.pem"},
		{"CA without PEM", tlsfile.Files{CA: notPEM}, "no PEM certificate"},
		{"cert without key", tlsfile.Files{Cert: p.CertFile}, "needs its key"},
		{"key without cert", tlsfile.Files{Key: p.KeyFile}, "needs its key"},
		{"key of another cert", tlsfile.Files{Cert: p.CertFile, Key: ca.Issue(t, dir, "other").KeyFile}, "client.pem"},
		{"CA only", tlsfile.Files{CA: ca.File}, ""},
		{"server name only", tlsfile.Files{ServerName: "temporal.internal"}, ""},
		{"all", tlsfile.Files{CA: ca.File, Cert: p.CertFile, Key: p.KeyFile}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.files.Client()
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err == "" && c == nil:
				t.Fatal("no config")
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one naming %q", err, tc.err)
			}
		})
	}
	if c, err := (tlsfile.Files{CA: ca.File, ServerName: "nats.internal"}).Client(); err != nil || c.ServerName != "nats.internal" {
		t.Errorf("server name: %v, %v; want the config to verify nats.internal", c, err)
	}
	if c, err := (tlsfile.Files{}).Client(); c != nil || err != nil {
		t.Errorf("zero Files: %v, %v; want no TLS", c, err)
	}
}

// A server that requires a client certificate of its CA takes the config
// of CA, cert and key, and refuses the config of the CA alone and that of
// a certificate another CA signed.
func TestClientHandshake(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	srv := ca.Issue(t, dir, "server")
	cli := ca.Issue(t, dir, "client")
	stranger := tlstest.NewCA(t, dir, "stranger").Issue(t, dir, "stranger")
	l, err := tls.Listen("tcp", "127.0.0.1:0", srv.ServerTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				c.(*tls.Conn).Handshake()
				c.Write([]byte("ok"))
				c.Close()
			}()
		}
	}()
	dial := func(f tlsfile.Files) error {
		c, err := f.Client()
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.Dial("tcp", l.Addr().String(), c)
		if err != nil {
			return err
		}
		defer conn.Close()
		buf := make([]byte, 2)
		_, err = conn.Read(buf) // TLS 1.3: a refused client certificate shows on the first read
		return err
	}
	if err := dial(tlsfile.Files{CA: ca.File, Cert: cli.CertFile, Key: cli.KeyFile}); err != nil {
		t.Errorf("CA, cert and key: %v", err)
	}
	if err := dial(tlsfile.Files{CA: ca.File}); err == nil {
		t.Error("CA without a client certificate: the server took it")
	}
	if err := dial(tlsfile.Files{CA: ca.File, Cert: stranger.CertFile, Key: stranger.KeyFile}); err == nil {
		t.Error("a certificate of another CA: the server took it")
	}
	if err := dial(tlsfile.Files{Cert: cli.CertFile, Key: cli.KeyFile}); err == nil {
		t.Error("without the CA: the server's certificate was trusted")
	}
}
