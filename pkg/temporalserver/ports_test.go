package temporalserver

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// A port taken between its pick and Temporal's bind made Temporal log
// Fatal and exit the whole process (a test binary died with "exit status
// 1" and no output). Now an explicit port in use is an error of Start,
// and a picked one that was taken is picked again.
func TestPortTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	t.Run("explicit", func(t *testing.T) {
		ports := Ports{}
		for _, p := range []*int{&ports.Frontend, &ports.History, &ports.Matching} {
			free, err := FreePort("127.0.0.1")
			if err != nil {
				t.Fatal(err)
			}
			*p = free
		}
		ports.Worker = port
		s, err := Start(ctx, Config{DataDir: t.TempDir(), Ports: ports})
		if err == nil {
			s.Stop()
			t.Fatal("Start with a port in use succeeded")
		}
		var f startFatal
		if !errors.As(err, &f) || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("err = %v; want the bind failure as an error", err)
		}
	})

	t.Run("picked", func(t *testing.T) {
		picks := 0
		pickPort = func(host string) (int, error) {
			picks++
			if picks == 4 { // the first attempt's worker port
				return port, nil
			}
			return FreePort(host)
		}
		defer func() { pickPort = FreePort }()
		s, err := Start(ctx, Config{DataDir: t.TempDir()})
		if err != nil {
			t.Fatalf("Start: %v (a taken pick must be picked again)", err)
		}
		defer s.Stop()
		if picks != 8 {
			t.Errorf("picks = %d; want 8 (two attempts of four ports)", picks)
		}
	})
}

// FreePort never hands out the same port twice in a process, and draws
// below the kernel's ephemeral range where there is one.
func TestFreePort(t *testing.T) {
	seen := map[int]bool{}
	lo := ephemeralStart()
	for range 200 {
		p, err := FreePort("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if lo > 11000 && p >= lo {
			t.Fatalf("port %d in the ephemeral range from %d", p, lo)
		}
	}
}
