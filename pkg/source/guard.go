package source

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"

	"codectx/pkg/netguard"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	gitproto "github.com/go-git/go-git/v5/plumbing/transport/git"
	"golang.org/x/net/proxy"
)

// go-git dials ssh:// and git:// by itself, without the request's context,
// so the netguard policy of a fetch reaches those dials through the one
// option go-git passes down to them: its proxy URL. A fetch under a policy
// names it as guardScheme://<id>; for ssh, go-git asks golang.org/x/net/proxy
// for that scheme's dialer, which is the policy's DialContext (the check
// runs on the address the name resolved to, at dial time); for git://, the
// transport installed here resolves the host once, checks every address
// and makes go-git connect to the checked address (the git protocol has
// no other hook), so a second lookup never happens.
const guardScheme = "codectx-netguard"

var (
	policies  sync.Map // id -> *netguard.Policy
	policySeq atomic.Uint64
)

// guardProxy returns the go-git proxy options that carry the policy of ctx
// to the dial of url, and a function to call when the fetch is done. Only
// ssh and git URLs under a policy get them: HTTP(S) is guarded by its own
// transport, and a proxy URL would make go-git's HTTP client use a proxy.
func guardProxy(ctx context.Context, rawURL string) (transport.ProxyOptions, func()) {
	p := netguard.From(ctx)
	if p == nil {
		return transport.ProxyOptions{}, func() {}
	}
	ep, err := transport.NewEndpoint(rawURL)
	if err != nil || ep.Protocol != "ssh" && ep.Protocol != "git" {
		return transport.ProxyOptions{}, func() {}
	}
	id := strconv.FormatUint(policySeq.Add(1), 10)
	policies.Store(id, p)
	return transport.ProxyOptions{URL: guardScheme + "://" + id}, func() { policies.Delete(id) }
}

var errNoPolicy = errors.New("fetch: network policy not found")

// policyOf returns the policy a guardScheme proxy URL names; ok is false
// for any other proxy URL.
func policyOf(proxyURL string) (p *netguard.Policy, ok bool, err error) {
	u, err := url.Parse(proxyURL)
	if err != nil || u.Scheme != guardScheme {
		return nil, false, nil
	}
	v, found := policies.Load(u.Host)
	if !found {
		return nil, true, errNoPolicy
	}
	return v.(*netguard.Policy), true, nil
}

// guardDialer dials for go-git's ssh transport under a policy.
type guardDialer struct{ p *netguard.Policy }

func (d guardDialer) Dial(network, addr string) (net.Conn, error) {
	return d.p.DialContext(context.Background(), network, addr)
}

func (d guardDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return d.p.DialContext(ctx, network, addr)
}

// guardedGit is go-git's git:// transport, connecting under a policy to the
// address the policy checked.
type guardedGit struct{ next transport.Transport }

func (g guardedGit) NewUploadPackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.UploadPackSession, error) {
	ep, err := pin(ep)
	if err != nil {
		return nil, err
	}
	return g.next.NewUploadPackSession(ep, auth)
}

func (g guardedGit) NewReceivePackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.ReceivePackSession, error) {
	ep, err := pin(ep)
	if err != nil {
		return nil, err
	}
	return g.next.NewReceivePackSession(ep, auth)
}

// pin returns ep with its host replaced by the address its policy checked
// (ep itself without a policy).
func pin(ep *transport.Endpoint) (*transport.Endpoint, error) {
	p, ok, err := policyOf(ep.Proxy.URL)
	if err != nil || !ok {
		return ep, err
	}
	port := ep.Port
	if port <= 0 {
		port = gitproto.DefaultPort
	}
	host, err := p.Pin(context.Background(), ep.Host, strconv.Itoa(port))
	if err != nil {
		return nil, err
	}
	pinned := *ep
	pinned.Host, pinned.Port = host, port
	return &pinned, nil
}

func init() {
	proxy.RegisterDialerType(guardScheme, func(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
		p, _, err := policyOf(u.String())
		if err != nil {
			return nil, err
		}
		return guardDialer{p}, nil
	})
	client.InstallProtocol("git", guardedGit{next: gitproto.DefaultClient})
}
