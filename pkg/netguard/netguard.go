// Package netguard keeps the server's own fetches (clones of tenants'
// repositories) off addresses a tenant must not reach: loopback, private
// networks, link-local addresses (cloud metadata at 169.254.169.254),
// CGNAT, multicast and the like. The check runs when the connection is
// dialled, on the address the name resolved to, so it holds after DNS
// resolution (and rebinding) and across redirects; Policy.Check is the same
// test done early, to answer a request without a fetch.
//
// An operator can trust named hosts (an internal git server) or turn the
// address check off; see Policy.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is returned (wrapped) when a fetch would reach an address
// that is not allowed. Its message is the same whether or not anything
// listens there.
var ErrRefused = errors.New("address not allowed")

// Policy says where the server's fetches may go. The zero value allows
// public addresses only.
type Policy struct {
	// Hosts, when not empty, are the only hosts tenants may index from
	// ("github.com", ".example.com" for every subdomain, "host:port" for
	// one port). They are trusted: they may resolve to private addresses.
	Hosts []string
	// AllowPrivate turns the address check off: every address may be
	// dialled (a deployment that only ever clones from its own network).
	AllowPrivate bool
	// Resolver resolves host names; default net.DefaultResolver.
	Resolver *net.Resolver
	// FetchBytes, when positive, bounds the bytes one clone or fetch may
	// write to the clone cache (pkg/source): a tenant names what the
	// server clones, and must not fill its disk.
	FetchBytes int64
	// Reserved holds, per tenant, hosts (the syntax of Hosts) that only
	// that tenant's repositories may come from: an internal git server
	// that lets the server in by its network address, and would serve any
	// tenant every repository it holds. They are trusted like Hosts in the
	// tenant's view (For), and refused, whatever they resolve to, in every
	// other tenant's and in a view of no tenant.
	Reserved map[string][]string

	tenant string // the view's tenant (For)
}

// For is the policy as the clones of tenant's repositories see it
// (Reserved). A nil Policy stays nil.
func (p *Policy) For(tenant string) *Policy {
	if p == nil {
		return nil
	}
	q := *p
	q.tenant = tenant
	return &q
}

// Denied reports whether host is reserved for a tenant other than the
// view's (Reserved), on any port: it is refused whatever the rest of the
// policy says.
func (p *Policy) Denied(host, port string) bool {
	if p == nil || len(p.Reserved) == 0 {
		return false
	}
	if p.tenant != "" && matchHost(p.Reserved[p.tenant], host, port, true) {
		return false
	}
	for t, hosts := range p.Reserved {
		if t != p.tenant && matchHost(hosts, host, port, true) {
			return true
		}
	}
	return false
}

// Restricted reports whether tenants may index only from Hosts.
func (p *Policy) Restricted() bool { return p != nil && len(p.Hosts) > 0 }

// Trusted reports whether host (with port, when known) is on the list,
// or reserved for the view's tenant.
func (p *Policy) Trusted(host, port string) bool {
	if p == nil {
		return false
	}
	return matchHost(p.Hosts, host, port, false) || p.tenant != "" && matchHost(p.Reserved[p.tenant], host, port, false)
}

// matchHost reports whether host (with port, when known) matches one of
// hosts: "name", ".example.com" (every subdomain) or "name:port" (any
// port when anyPort).
func matchHost(hosts []string, host, port string, anyPort bool) bool {
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if hh, pp, err := net.SplitHostPort(h); err == nil {
			if strings.Trim(hh, "[]") == host && (anyPort || pp == port) {
				return true
			}
			continue
		}
		if h == host || strings.HasPrefix(h, ".") && strings.HasSuffix(host, h) {
			return true
		}
	}
	return false
}

// Public reports whether a is a globally routable unicast address: not
// loopback, private (RFC 1918, fc00::/7), link-local, CGNAT (100.64/10),
// unspecified, multicast, broadcast, documentation or other reserved
// ranges (IPv4-compatible ::/96 and SIIT ::ffff:0:0:0/96 included). IPv4-mapped IPv6 addresses are judged as IPv4.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() || a.IsMulticast() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range reserved {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

var reserved = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "255.255.255.255/32",
		"::/96", "::ffff:0:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/23", "2001:db8::/32", "2002::/16", "fec0::/10",
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// allowedAddr is the dial-time test of one resolved address.
func (p *Policy) allowedAddr(a netip.Addr) bool {
	return p != nil && p.AllowPrivate || Public(a)
}

// Check resolves host and fails with ErrRefused unless every address it
// resolves to may be dialled (or the host is trusted). A name that does not
// resolve fails too, with the same message. A nil Policy allows public
// addresses only.
func (p *Policy) Check(ctx context.Context, host, port string) error {
	if p.Denied(host, port) {
		return fmt.Errorf("host %s: %w", strings.Trim(host, "[]"), ErrRefused)
	}
	if p != nil && p.AllowPrivate || p.Trusted(host, port) {
		return nil
	}
	if err := p.CheckName(host, port); err != nil {
		return err
	}
	host = strings.Trim(host, "[]")
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs, err := p.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("host %s: %w (does not resolve)", host, ErrRefused)
	}
	for _, a := range addrs {
		if !Public(a) {
			return fmt.Errorf("host %s: %w", host, ErrRefused)
		}
	}
	return nil
}

// Pin resolves host once and returns an address to dial instead of the
// name, for a client that dials by itself (go-git's git:// transport): it
// fails with ErrRefused unless every address host resolves to may be
// dialled, as Check does, and the caller connects to the address returned,
// so a second lookup (DNS rebinding) is never made. A trusted host, or a
// policy that allows private networks, is returned as it is.
func (p *Policy) Pin(ctx context.Context, host, port string) (string, error) {
	if p.Denied(host, port) {
		return "", fmt.Errorf("host %s: %w", strings.Trim(host, "[]"), ErrRefused)
	}
	if p != nil && p.AllowPrivate || p.Trusted(host, port) {
		return host, nil
	}
	if err := p.CheckName(host, port); err != nil {
		return "", err
	}
	bare := strings.Trim(host, "[]")
	if _, err := netip.ParseAddr(bare); err == nil {
		return bare, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs, err := p.resolver().LookupNetIP(ctx, "ip", bare)
	if err != nil || len(addrs) == 0 {
		return "", fmt.Errorf("host %s: %w (does not resolve)", bare, ErrRefused)
	}
	for _, a := range addrs {
		if !Public(a) {
			return "", fmt.Errorf("host %s: %w", bare, ErrRefused)
		}
	}
	return addrs[0].Unmap().String(), nil
}

// CheckName is Check without name resolution: it refuses IP addresses the
// policy does not allow and the names that always mean this machine
// ("localhost", "*.localhost"), and accepts every other name, leaving it
// to the dial-time check.
func (p *Policy) CheckName(host, port string) error {
	if p.Denied(host, port) {
		return fmt.Errorf("host %s: %w", strings.Trim(host, "[]"), ErrRefused)
	}
	if p != nil && p.AllowPrivate || p.Trusted(host, port) {
		return nil
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if a, err := netip.ParseAddr(host); err == nil {
		if !Public(a) {
			return fmt.Errorf("host %s: %w", host, ErrRefused)
		}
		return nil
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return fmt.Errorf("host %s: %w", host, ErrRefused)
	}
	return nil
}

func (p *Policy) resolver() *net.Resolver {
	if p != nil && p.Resolver != nil {
		return p.Resolver
	}
	return net.DefaultResolver
}

// DialContext dials addr ("host:port") like net.Dialer, but refuses, before
// any packet is sent, every resolved address the policy does not allow,
// unless the host is trusted.
func (p *Policy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if p.Denied(host, port) {
		return nil, fmt.Errorf("dial %s: %w", host, ErrRefused)
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Resolver: p.Resolver}
	if !p.AllowPrivate && !p.Trusted(host, port) {
		d.ControlContext = func(_ context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !p.allowedAddr(ap.Addr()) {
				return ErrRefused
			}
			return nil
		}
	}
	c, err := d.DialContext(ctx, network, addr)
	if errors.Is(err, ErrRefused) {
		// Say nothing about the address but that it is refused.
		return nil, fmt.Errorf("dial %s: %w", host, ErrRefused)
	}
	return c, err
}

type ctxKey struct{}

// With returns ctx carrying p, for the fetches made under it.
func With(ctx context.Context, p *Policy) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// From returns the policy ctx carries, or nil.
func From(ctx context.Context) *Policy {
	p, _ := ctx.Value(ctxKey{}).(*Policy)
	return p
}
