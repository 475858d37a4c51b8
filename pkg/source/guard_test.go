package source

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"codectx/pkg/location"
	"codectx/pkg/netguard"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/net/proxy"
)

// rebinder is a DNS server (over an in-memory stream) that answers the
// first A query with a public address and every later one with loopback:
// a name that passes the early check and rebinds before the dial.
type rebinder struct{ queries atomic.Int32 }

func (r *rebinder) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, s := net.Pipe()
		go r.serve(s)
		return c, nil
	}}
}

func (r *rebinder) serve(c net.Conn) {
	defer c.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		msg := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, msg); err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(msg)
		if err != nil {
			return
		}
		q, err := p.Question()
		if err != nil {
			return
		}
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
		b.EnableCompression()
		_ = b.StartQuestions()
		_ = b.Question(q)
		_ = b.StartAnswers()
		if q.Type == dnsmessage.TypeA {
			a := [4]byte{127, 0, 0, 1}
			if r.queries.Add(1) == 1 {
				a = [4]byte{93, 184, 216, 34}
			}
			_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}, dnsmessage.AResource{A: a})
		}
		out, err := b.Finish()
		if err != nil {
			return
		}
		binary.BigEndian.PutUint16(n[:], uint16(len(out)))
		if _, err := c.Write(append(n[:], out...)); err != nil {
			return
		}
	}
}

// trap listens on every interface and counts the connections it accepts.
func trap(t *testing.T) (port string, hits *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	hits = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			c.Close()
		}
	}()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), hits
}

// A git:// location whose name passes the early check (the first lookup
// answers a public address) and then resolves to loopback is refused when
// go-git connects, and nothing reaches the listener there. Before the
// check held at dial time, go-git looked the name up again by itself and
// the clone failed only by chance (a name the system cannot resolve).
func TestGitProtocolRebindingRefused(t *testing.T) {
	const host = "rebind.example"
	port, hits := trap(t)
	r := &rebinder{}
	pol := &netguard.Policy{Resolver: r.resolver()}
	url := "git://" + host + ":" + port + "/repo.git"
	loc, err := location.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	_, err = openURL(context.Background(), url, loc, Options{CacheDir: t.TempDir(), Net: pol})
	if !errors.Is(err, netguard.ErrRefused) {
		t.Errorf("clone of %s, a name rebinding to this machine: %v, want %v", host, err, netguard.ErrRefused)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the listener saw %d connections", n)
	}
	if n := r.queries.Load(); n < 2 {
		t.Errorf("%d lookups of %s (%v), want the early check's and the dial's", n, host, err)
	}
}

// go-git's ssh transport dials through the proxy URL a guarded fetch
// names: that dialer checks the address at dial time, after the lookup.
func TestSSHDialerChecksAtDial(t *testing.T) {
	port, hits := trap(t)
	r := &rebinder{}
	pol := &netguard.Policy{Resolver: r.resolver()}
	ctx := netguard.With(context.Background(), pol)
	if err := pol.Check(ctx, "rebind.example", port); err != nil {
		t.Fatalf("early check of the first answer: %v", err)
	}
	px, done := guardProxy(ctx, "ssh://git@rebind.example:"+port+"/repo.git")
	defer done()
	if px.URL == "" {
		t.Fatal("no proxy options for an ssh URL under a policy")
	}
	u, err := px.FullURL()
	if err != nil {
		t.Fatal(err)
	}
	// As go-git's ssh transport does (plumbing/transport/ssh dial).
	d, err := proxy.FromURL(u, proxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	cd, ok := d.(proxy.ContextDialer)
	if !ok {
		t.Fatalf("dialer %T is not a ContextDialer", d)
	}
	if _, err := cd.DialContext(ctx, "tcp", net.JoinHostPort("rebind.example", port)); !errors.Is(err, netguard.ErrRefused) {
		t.Errorf("ssh dial of a name rebinding to loopback: %v, want %v", err, netguard.ErrRefused)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the listener saw %d connections", n)
	}
	// HTTP(S) gets no proxy options (go-git would use a proxy), nor does
	// a fetch without a policy.
	for _, tc := range []struct {
		ctx context.Context
		url string
	}{{ctx, "https://example.com/r.git"}, {context.Background(), "ssh://git@example.com/r.git"}} {
		if px, done := guardProxy(tc.ctx, tc.url); px.URL != "" {
			t.Errorf("guardProxy(%s) = %+v, want none", tc.url, px)
		} else {
			done()
		}
	}
}
