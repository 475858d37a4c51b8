package natsq

import (
	"crypto/rand"
	"fmt"
	"net/url"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is an in-process NATS server with JetStream, for tests and
// single-binary deployments.
type Server struct {
	s     *server.Server
	token string
}

// StartEmbedded starts a NATS server on a random port of 127.0.0.1 that
// keeps JetStream data under dir. It requires a token generated for this
// run: another local user who finds the port cannot connect (the token is
// only in URL, which the process hands to its own clients).
func StartEmbedded(dir string) (*Server, error) {
	token := rand.Text()
	s, err := server.NewServer(&server.Options{
		Host:          "127.0.0.1",
		Port:          server.RANDOM_PORT,
		JetStream:     true,
		StoreDir:      dir,
		NoSigs:        true,
		NoLog:         true,
		Authorization: token,
	})
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("nats server: not ready after 10s")
	}
	return &Server{s: s, token: token}, nil
}

// URL is the client URL with the run's token, nats://TOKEN@127.0.0.1:<port>.
// It is a secret: log Addr instead.
func (s *Server) URL() string {
	u, err := url.Parse(s.s.ClientURL())
	if err != nil {
		return s.s.ClientURL()
	}
	u.User = url.User(s.token)
	return u.String()
}

// Addr is the client URL without credentials, for logs.
func (s *Server) Addr() string { return s.s.ClientURL() }

// Shutdown stops the server and waits for it to finish.
func (s *Server) Shutdown() {
	s.s.Shutdown()
	s.s.WaitForShutdown()
}
