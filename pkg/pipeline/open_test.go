package pipeline

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A clone that stalls (a git host that accepts and never answers) holds up
// only its own location: another repository opens meanwhile.
func TestOpenStallHoldsOnlyItsLocation(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c // accept, never answer
		}
	}()
	defer func() {
		close(held)
		for c := range held {
			c.Close()
		}
	}()
	cache := t.TempDir()
	stallCtx, cancel := context.WithCancel(context.Background())
	stalled := make(chan error, 1)
	go func() {
		_, err := OpenSnapshot(stallCtx, "", "git://"+ln.Addr().String()+"/x", "", cache)
		stalled <- err
	}()
	select {
	case c := <-held:
		held <- c
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled clone never connected")
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.py"), []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		s, err := OpenSnapshot(context.Background(), "", dir, "", cache)
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a local directory did not open while another location's clone stalled")
	}
	cancel()
	select {
	case <-stalled:
	case <-time.After(20 * time.Second):
		t.Error("the stalled clone did not end when its context did")
	}
}
