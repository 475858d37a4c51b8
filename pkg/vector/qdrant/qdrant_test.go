package qdrant_test

import (
	"context"
	"os"
	"testing"
	"time"

	"codectx/pkg/vector"
	"codectx/pkg/vector/qdrant"
	"codectx/pkg/vector/vectortest"
)

// TestConformance runs the suite against the Qdrant server at $QDRANT_ADDR
// (gRPC host:port, e.g. 127.0.0.1:6334). Each subtest uses a collection of
// its own; they are left on the server.
func TestConformance(t *testing.T) {
	addr := os.Getenv("QDRANT_ADDR")
	if addr == "" {
		t.Skip("QDRANT_ADDR is not set: no Qdrant server to test against (run one and set QDRANT_ADDR=host:6334)")
	}
	vectortest.Run(t, func(t *testing.T) vector.Store {
		s, err := qdrant.Open(addr)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Health(ctx); err != nil {
			t.Fatalf("qdrant at %s: %v", addr, err)
		}
		return s
	})
}

func TestOpenNeedsAddress(t *testing.T) {
	t.Setenv(qdrant.Env, "")
	if _, err := qdrant.Open(""); err == nil {
		t.Fatal("Open without an address succeeded")
	}
	if _, err := qdrant.Open("no-port"); err == nil {
		t.Fatal("Open of an address without a port succeeded")
	}
}
