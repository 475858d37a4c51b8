package main

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"codectx/pkg/ratelog"
)

// Connection bounds of the API's listener (docs/security.md): every open
// connection holds a file descriptor of the process, which also holds
// NATS, Temporal and the store's files, so anonymous idle connections
// must not use them all up.
const (
	// maxDefaultConns bounds the default of --http-connections: each
	// connection costs net/http's buffers and a goroutine (tens of KiB).
	maxDefaultConns = 8192
	// fallbackNoFile stands for RLIMIT_NOFILE where it cannot be read.
	fallbackNoFile = 1024
)

// connLimits bounds the connections a listener holds open.
type connLimits struct {
	// total is how many connections are open at once. Past it Accept
	// closes the keep-alive connection idle longest to make room, or
	// waits (new connections stay in the kernel's backlog) until one
	// closes. Zero or negative: no bound.
	total int
	// perAddr is how many of them one remote address holds (an IPv6
	// address's /64); a connection past it is closed as soon as it is
	// accepted. Zero or negative: no bound.
	perAddr int
}

// resolveConnLimits turns the flags' values into bounds: zero takes the
// default (half of RLIMIT_NOFILE, at most maxDefaultConns; a quarter of
// that per address), negative means no bound.
func resolveConnLimits(total, perAddr int) connLimits {
	if total == 0 {
		total = min(max(noFileLimit()/2, 16), maxDefaultConns)
	}
	if perAddr == 0 {
		perAddr = max(total/4, 1)
		if total < 0 {
			perAddr = -1
		}
	}
	return connLimits{total: total, perAddr: perAddr}
}

// limitListener is a listener bounded by connLimits. Its connState must be
// the server's ConnState hook, so that it knows which connections are idle.
type limitListener struct {
	net.Listener
	lim       connLimits
	sem       chan struct{} // one token per open connection (nil: no bound)
	done      chan struct{}
	closeOnce sync.Once

	// refused logs the connections closed by the per-address bound, one
	// line per address and minute with the count of the rest (nil: none).
	refused *ratelog.Limiter

	mu     sync.Mutex
	byAddr map[string]int
	idle   map[*limitedConn]time.Time // keep-alive connections between requests, since when
}

func newLimitListener(l net.Listener, lim connLimits) *limitListener {
	ll := &limitListener{Listener: l, lim: lim, done: make(chan struct{}), byAddr: map[string]int{}, idle: map[*limitedConn]time.Time{}}
	if lim.total > 0 {
		ll.sem = make(chan struct{}, lim.total)
	}
	return ll
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		if err := l.acquire(); err != nil {
			return nil, err
		}
		c, err := l.Listener.Accept()
		if err != nil {
			l.release()
			return nil, err
		}
		addr := addrKey(c.RemoteAddr())
		l.mu.Lock()
		if l.lim.perAddr > 0 && l.byAddr[addr] >= l.lim.perAddr {
			l.mu.Unlock()
			c.Close()
			l.release()
			// The address, not the port: one line per client however
			// many connections it opens.
			l.refused.Warn(context.Background(), addr, "connection refused: its address holds as many as --http-connections-per-addr allows (behind a proxy, raise it)", "addr", addr, "limit", l.lim.perAddr)
			continue
		}
		l.byAddr[addr]++
		l.mu.Unlock()
		return &limitedConn{Conn: c, l: l, addr: addr}, nil
	}
}

// acquire takes a connection's token. When none is free it closes the
// connection idle longest (its client opens a new one when it needs it),
// then waits for a token.
func (l *limitListener) acquire() error {
	if l.sem == nil {
		return nil
	}
	select {
	case l.sem <- struct{}{}:
		return nil
	case <-l.done:
		return net.ErrClosed
	default:
	}
	l.closeIdle()
	select {
	case l.sem <- struct{}{}:
		return nil
	case <-l.done:
		return net.ErrClosed
	}
}

func (l *limitListener) release() {
	if l.sem != nil {
		<-l.sem
	}
}

// closeIdle closes the keep-alive connection idle longest, if any.
func (l *limitListener) closeIdle() {
	l.mu.Lock()
	var oldest *limitedConn
	var since time.Time
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	l.mu.Unlock()
	if oldest != nil {
		oldest.Close()
	}
}

// connState is the server's ConnState hook: it tracks the idle
// keep-alive connections.
func (l *limitListener) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if st == http.StateIdle && !lc.closed {
		l.idle[lc] = time.Now()
	} else {
		delete(l.idle, lc)
	}
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// addrKey is the remote address a connection counts against: the IP
// address, or for IPv6 its /64 (one host commonly holds a whole /64).
func addrKey(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip := ta.AddrPort().Addr().Unmap()
	if ip.Is6() {
		if p, err := ip.WithZone("").Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

// limitedConn gives its token back when closed.
type limitedConn struct {
	net.Conn
	l      *limitListener
	addr   string
	closed bool // under l.mu
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	first := !c.closed
	c.closed = true
	delete(c.l.idle, c)
	if first {
		if c.l.byAddr[c.addr]--; c.l.byAddr[c.addr] <= 0 {
			delete(c.l.byAddr, c.addr)
		}
	}
	c.l.mu.Unlock()
	if first {
		c.l.release()
	}
	return err
}
