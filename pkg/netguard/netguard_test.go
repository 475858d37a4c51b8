package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
)

func TestPublic(t *testing.T) {
	for _, tt := range []struct {
		addr string
		want bool
	}{
		{"8.8.8.8", true}, {"140.82.112.3", true}, {"2606:4700::1111", true},
		{"127.0.0.1", false}, {"127.5.5.5", false}, {"::1", false}, {"0.0.0.0", false}, {"::", false},
		{"10.0.0.1", false}, {"172.16.0.1", false}, {"192.168.1.1", false}, {"fc00::1", false}, {"fd12::1", false},
		{"169.254.169.254", false}, {"::127.0.0.1", false}, {"::ffff:0:127.0.0.1", false}, {"::ffff:0:8.8.8.8", false}, {"fe80::1", false}, {"100.64.0.1", false}, {"224.0.0.1", false},
		{"255.255.255.255", false}, {"192.0.2.1", false}, {"::ffff:127.0.0.1", false}, {"::ffff:10.1.2.3", false},
		{"::ffff:8.8.8.8", true}, {"64:ff9b::7f00:1", false}, {"2002:7f00:1::", false}, {"240.0.0.1", false},
	} {
		if got := Public(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("Public(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

func TestTrusted(t *testing.T) {
	p := &Policy{Hosts: []string{"github.com", ".corp.example", "git.local:3000", "[::1]:8080"}}
	for _, tt := range []struct {
		host, port string
		want       bool
	}{
		{"github.com", "443", true}, {"GitHub.com", "22", true}, {"evilgithub.com", "443", false},
		{"git.corp.example", "443", true}, {"corp.example.evil", "443", false},
		{"git.local", "3000", true}, {"git.local", "3001", false}, {"::1", "8080", true}, {"[::1]", "8080", true}, {"::1", "80", false},
	} {
		if got := p.Trusted(tt.host, tt.port); got != tt.want {
			t.Errorf("Trusted(%s, %s) = %v, want %v", tt.host, tt.port, got, tt.want)
		}
	}
	if (*Policy)(nil).Trusted("github.com", "443") || (*Policy)(nil).Restricted() {
		t.Error("a nil policy trusts or restricts")
	}
}

// listen counts the connections a listener accepts.
func listen(t *testing.T, addr string) (string, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return l.Addr().String(), &n
}

// The dial-time check holds after name resolution: "localhost" resolves
// to loopback and is refused before a connection, with the same error for
// an open and a closed port; a trusted host:port and AllowPrivate connect.
func TestDialContext(t *testing.T) {
	ctx := context.Background()
	open, hits := listen(t, "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(open)
	closed := func() string {
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		defer l.Close()
		_, p, _ := net.SplitHostPort(l.Addr().String())
		return p
	}()
	var p Policy
	var msgs []string
	for _, addr := range []string{"localhost:" + port, "localhost:" + closed, "127.0.0.1:" + port, "127.0.0.1:" + closed} {
		c, err := p.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("dial %s: connected", addr)
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("dial %s: %v, want ErrRefused", addr, err)
		}
		msgs = append(msgs, err.Error())
	}
	if msgs[0] != msgs[1] || msgs[2] != msgs[3] {
		t.Errorf("errors tell an open port from a closed one: %q", msgs)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the listener saw %d connections", n)
	}
	if err := p.Check(ctx, "localhost", port); !errors.Is(err, ErrRefused) {
		t.Errorf("Check(localhost) = %v", err)
	}
	for _, q := range []*Policy{{Hosts: []string{"localhost:" + port}}, {AllowPrivate: true}} {
		c, err := q.DialContext(ctx, "tcp", "localhost:"+port)
		if err != nil {
			t.Errorf("policy %+v: %v", q, err)
			continue
		}
		c.Close()
	}
	// Trust is per host:port: another port of the same host is checked.
	q := &Policy{Hosts: []string{"localhost:" + port}}
	if _, err := q.DialContext(ctx, "tcp", "localhost:"+closed); !errors.Is(err, ErrRefused) {
		t.Errorf("a trusted host's other port: %v", err)
	}
}

func TestCheckName(t *testing.T) {
	var p *Policy
	for _, h := range []string{"127.0.0.1", "::1", "10.1.2.3", "169.254.169.254", "localhost", "LOCALHOST.", "a.localhost", "0.0.0.0", "fe80::1"} {
		if err := p.CheckName(h, "443"); !errors.Is(err, ErrRefused) {
			t.Errorf("CheckName(%s) = %v, want refused", h, err)
		}
	}
	for _, h := range []string{"github.com", "8.8.8.8", "2606:4700::1111"} {
		if err := p.CheckName(h, "443"); err != nil {
			t.Errorf("CheckName(%s) = %v", h, err)
		}
	}
}

func TestPin(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		p          *Policy
		host, want string
		refused    bool
	}{
		{&Policy{}, "8.8.8.8", "8.8.8.8", false},
		{&Policy{}, "[2606:4700::1111]", "2606:4700::1111", false},
		{&Policy{}, "127.0.0.1", "", true},
		{&Policy{}, "localhost", "", true},
		{&Policy{}, "name.invalid", "", true}, // does not resolve
		{&Policy{AllowPrivate: true}, "localhost", "localhost", false},
		{&Policy{Hosts: []string{"git.internal"}}, "git.internal", "git.internal", false},
	} {
		got, err := tt.p.Pin(ctx, tt.host, "9418")
		if got != tt.want || errors.Is(err, ErrRefused) != tt.refused {
			t.Errorf("Pin(%s) with %+v = %q, %v; want %q, refused %v", tt.host, tt.p, got, err, tt.want, tt.refused)
		}
	}
}

// TestReserved: a host reserved for a tenant is trusted in that tenant's
// view (it may resolve to a private address) and refused, on any port and
// whatever it resolves to, in every other view, before any lookup or dial.
func TestReserved(t *testing.T) {
	var lookups atomic.Int32
	p := &Policy{
		Reserved: map[string][]string{"acme": {"git.acme.internal", ".acme.corp", "code.shared.example:8443"}},
		Resolver: &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
			lookups.Add(1)
			return nil, errors.New("no DNS in this test")
		}},
	}
	ctx := context.Background()
	for _, tt := range []struct {
		tenant, host, port string
		denied, trusted    bool
	}{
		{"acme", "git.acme.internal", "443", false, true},
		{"acme", "repo.acme.corp", "", false, true},
		{"acme", "code.shared.example", "8443", false, true},
		{"acme", "code.shared.example", "443", false, false}, // trusted on its port only
		{"beta", "git.acme.internal", "443", true, false},
		{"beta", "GIT.ACME.INTERNAL.", "443", true, false},
		{"beta", "repo.acme.corp", "", true, false},
		{"beta", "code.shared.example", "22", true, false}, // reserved on every port
		{"", "git.acme.internal", "443", true, false},      // no tenant: nobody's
		{"beta", "example.com", "443", false, false},
	} {
		v := p.For(tt.tenant)
		if got := v.Denied(tt.host, tt.port); got != tt.denied {
			t.Errorf("%s: Denied(%s:%s) = %v, want %v", tt.tenant, tt.host, tt.port, got, tt.denied)
		}
		if got := v.Trusted(tt.host, tt.port); got != tt.trusted {
			t.Errorf("%s: Trusted(%s:%s) = %v, want %v", tt.tenant, tt.host, tt.port, got, tt.trusted)
		}
		if !tt.denied {
			continue
		}
		before := lookups.Load()
		if err := v.Check(ctx, tt.host, tt.port); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: Check(%s) = %v, want refused", tt.tenant, tt.host, err)
		}
		if err := v.CheckName(tt.host, tt.port); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: CheckName(%s) = %v, want refused", tt.tenant, tt.host, err)
		}
		if _, err := v.Pin(ctx, tt.host, tt.port); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: Pin(%s) = %v, want refused", tt.tenant, tt.host, err)
		}
		if _, err := v.DialContext(ctx, "tcp", net.JoinHostPort(tt.host, "443")); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: DialContext(%s) = %v, want refused", tt.tenant, tt.host, err)
		}
		if lookups.Load() != before {
			t.Errorf("%s: %s was looked up before it was refused", tt.tenant, tt.host)
		}
	}
	// AllowPrivate does not lift a reservation.
	open := &Policy{AllowPrivate: true, Reserved: p.Reserved}
	if err := open.For("beta").CheckName("git.acme.internal", ""); !errors.Is(err, ErrRefused) {
		t.Errorf("AllowPrivate, beta: %v, want refused", err)
	}
}
