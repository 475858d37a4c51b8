// Package tlsfile builds the TLS configuration a client presents to a
// server (Temporal, NATS) from PEM files an operator mounts: the CA that
// signs the server's certificate, and the client's own certificate and key
// for servers that require mutual TLS.
package tlsfile

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Files names the PEM files of a client's TLS. The zero value is no TLS.
type Files struct {
	CA         string // CA bundle that verifies the server; empty = the system's roots
	Cert, Key  string // client certificate and its key, both or neither
	ServerName string // name to verify in the server's certificate; empty = the host dialled
}

// Enabled reports whether any file or name is set.
func (f Files) Enabled() bool { return f != Files{} }

// Client returns the client TLS config f describes, or nil when f is the
// zero value. Errors name the file that could not be used.
func (f Files) Client() (*tls.Config, error) {
	if !f.Enabled() {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("tls CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls CA %s: no PEM certificate in it", f.CA)
		}
		c.RootCAs = pool
	}
	switch {
	case f.Cert != "" && f.Key != "":
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("tls client certificate %s, key %s: %w", f.Cert, f.Key, err)
		}
		c.Certificates = []tls.Certificate{cert}
	case f.Cert != "" || f.Key != "":
		return nil, errors.New("tls: a client certificate needs its key, and a key its certificate")
	}
	return c, nil
}
