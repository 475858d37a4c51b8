package natsq

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is an in-process NATS server with JetStream, for tests and
// single-binary deployments.
type Server struct{ s *server.Server }

// StartEmbedded starts a NATS server on a random port of 127.0.0.1 that
// keeps JetStream data under dir.
func StartEmbedded(dir string) (*Server, error) {
	s, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  dir,
		NoSigs:    true,
		NoLog:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("nats server: not ready after 10s")
	}
	return &Server{s: s}, nil
}

// URL is the client URL, nats://127.0.0.1:<port>.
func (s *Server) URL() string { return s.s.ClientURL() }

// Shutdown stops the server and waits for it to finish.
func (s *Server) Shutdown() {
	s.s.Shutdown()
	s.s.WaitForShutdown()
}
