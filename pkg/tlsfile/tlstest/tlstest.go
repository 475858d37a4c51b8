// Package tlstest makes a certificate authority and certificates for
// tests of TLS between the project's processes and its servers.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority of one test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	File string // the CA's certificate, PEM
	Pool *x509.CertPool
}

// Pair is a certificate the CA signed, in memory and on disk.
type Pair struct {
	Cert      tls.Certificate
	CertFile  string
	KeyFile   string
	ServerTLS *tls.Config // presents Cert and requires a client certificate of the CA
	ClientTLS *tls.Config // presents Cert and trusts the CA
}

// NewCA makes a CA and writes its certificate under dir.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	tmpl := template(t, name)
	tmpl.IsCA, tmpl.KeyUsage, tmpl.BasicConstraintsValid = true, x509.KeyUsageCertSign, true
	key, der := sign(t, tmpl, nil, nil)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, File: filepath.Join(dir, name+"-ca.pem"), Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	write(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Issue signs a certificate for 127.0.0.1 and localhost, good for server
// and client authentication, and writes it and its key under dir.
func (ca *CA) Issue(t testing.TB, dir, name string) *Pair {
	t.Helper()
	tmpl := template(t, name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	tmpl.DNSNames = []string{"localhost"}
	key, der := sign(t, tmpl, ca.cert, ca.key)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := &Pair{CertFile: filepath.Join(dir, name+".pem"), KeyFile: filepath.Join(dir, name+"-key.pem")}
	write(t, p.CertFile, "CERTIFICATE", der)
	write(t, p.KeyFile, "EC PRIVATE KEY", keyDER)
	p.Cert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	p.ServerTLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{p.Cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool}
	p.ClientTLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{p.Cert}, RootCAs: ca.Pool}
	return p
}

// template is a certificate of name valid from an hour ago for a day.
func template(t testing.TB, name string) *x509.Certificate {
	return &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
}

// sign makes a key and the certificate of tmpl with it, signed by parent
// and parentKey (nil: self-signed), in DER.
func sign(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func write(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
