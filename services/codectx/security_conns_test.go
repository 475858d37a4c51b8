package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// idleConn opens a connection to addr from the loopback address from,
// sends GET /healthz and reads the answer, and leaves the connection idle.
// It reports whether the server answered (a connection past the bound is
// closed as soon as it is accepted).
func idleConn(t *testing.T, addr, from string) (net.Conn, bool) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("cannot dial from %s (this loopback address is not configured here): %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		return c, false
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return c, false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return c, resp.StatusCode == http.StatusOK
}

// authorized sends acme's GET /v1/repos from the loopback address from on
// a new connection and returns its status and how long it took.
func authorized(t *testing.T, s *secureStack, from string) (int, time.Duration) {
	t.Helper()
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", s.base+"/v1/repos", nil)
	req.Header.Set("Authorization", "Bearer "+s.keys[tenantA])
	start := time.Now()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Errorf("acme's request from %s: %v after %v", from, err, time.Since(start))
		return 0, time.Since(start)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start)
}

// The API bounds the connections it holds open (each is a file descriptor
// of the process, which NATS, Temporal and the store need too): anyone
// could open idle keep-alive connections, unbounded and kept 2 minutes,
// until accept failed with "too many open files" and every tenant's
// requests, the operator's and the readiness probe's timed out. Now one
// address holds at most --http-connections-per-addr (past it a connection
// is closed at once), all together at most --http-connections (past it the
// one idle longest is closed), so a tenant's request from elsewhere is
// answered at once. A request refused before its body is read gets its
// answer and the connection closes, where it was held until the 60 s read
// timeout.
func TestSecurityConnectionBound(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	const total, perAddr = 8, 4
	s := startSecureUp(t, "--http-connections", "8", "--http-connections-per-addr", "4")
	addr := strings.TrimPrefix(s.base, "http://")

	t.Run("one address", func(t *testing.T) {
		answered := 0
		for range perAddr + 8 {
			if _, ok := idleConn(t, addr, "127.0.0.3"); ok {
				answered++
			}
		}
		if answered != perAddr {
			t.Errorf("%d idle connections from one address answered and held, want %d (the per-address bound)", answered, perAddr)
		}
		// The refusals leave one log line for the address, not one each
		// (they left none).
		if n := strings.Count(s.up.errs.String(), "connection refused: its address holds"); n != 1 || !strings.Contains(s.up.errs.String(), "127.0.0.3") {
			t.Errorf("%d log lines of refused connections, want 1 naming 127.0.0.3:\n%s", n, s.up.errs.String())
		}
		code, took := authorized(t, s, "127.0.0.2")
		if code != http.StatusOK || took > 2*time.Second {
			t.Errorf("acme's request from another address = %d after %v, want 200 at once", code, took)
		}
	})

	t.Run("many addresses", func(t *testing.T) {
		var conns []net.Conn
		for _, from := range []string{"127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"} {
			for range perAddr {
				c, ok := idleConn(t, addr, from)
				if !ok {
					t.Errorf("idle connection from %s, within its address's bound, not answered", from)
				}
				conns = append(conns, c)
			}
		}
		code, took := authorized(t, s, "127.0.0.2")
		if code != http.StatusOK || took > 2*time.Second {
			t.Errorf("acme's request with %d idle connections open = %d after %v, want 200 at once", len(conns), code, took)
		}
		// The server closed the ones idle longest: at most total stay open.
		open := 0
		for _, c := range conns {
			c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			var ne net.Error
			if _, err := c.Read(make([]byte, 1)); errors.As(err, &ne) && ne.Timeout() {
				open++
			}
		}
		if open > total {
			t.Errorf("%d of %d idle connections still open, want at most %d", open, len(conns), total)
		}
	})

	t.Run("refused with an unsent body", func(t *testing.T) {
		for _, path := range []string{"/v1/query", "/v1/mcp"} {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			c.SetDeadline(start.Add(5 * time.Second))
			io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Errorf("POST %s without a key, its body unsent: no answer in 5 s: %v", path, err)
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
				t.Errorf("POST %s without a key = %d, close %v; want 401 closing the connection", path, resp.StatusCode, resp.Close)
			}
			var ne net.Error
			if _, err := br.ReadByte(); err == nil || errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("POST %s without a key: the connection stays open after the answer (%v)", path, err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("POST %s without a key: answer and close took %v", path, d)
			}
		}
	})
	s.assertServes(t)
}

// The connection bounds' defaults follow RLIMIT_NOFILE; negative is no bound.
func TestResolveConnLimits(t *testing.T) {
	def := resolveConnLimits(0, 0)
	if def.total < 16 || def.total > maxDefaultConns || def.total > max(noFileLimit()/2, 16) || def.perAddr != max(def.total/4, 1) {
		t.Errorf("defaults = %+v with RLIMIT_NOFILE %d", def, noFileLimit())
	}
	for _, c := range []struct{ total, perAddr, wantTotal, wantPer int }{
		{100, 0, 100, 25}, {100, 7, 100, 7}, {-1, 0, -1, -1}, {-1, 5, -1, 5}, {2, 0, 2, 1}, {10, -1, 10, -1},
	} {
		if got := resolveConnLimits(c.total, c.perAddr); got.total != c.wantTotal || got.perAddr != c.wantPer {
			t.Errorf("resolveConnLimits(%d, %d) = %+v, want %d, %d", c.total, c.perAddr, got, c.wantTotal, c.wantPer)
		}
	}
}
