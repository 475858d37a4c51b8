// Package location classifies the location of a repository: a path on this
// machine or a clone URL on a remote host. It is the one classifier used by
// the API (index requests), the webhook path (clone URLs of deliveries) and
// pkg/source (which opens the location), so a string cannot be "remote" to
// one of them and "local" to another.
//
// Remote locations are an allow-list: http, https, ssh and git URLs with a
// real host, and the scp-like user@host:path form of ssh. Local locations
// are paths and file:// URLs. Everything else (unknown or upper-case
// schemes, a missing or malformed host, control characters) is invalid.
// Parse never touches the file system.
package location

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Kind is what a location names.
type Kind int

const (
	Local  Kind = iota + 1 // a path on this machine (or a file:// URL)
	Remote                 // a clone URL fetched over the network
)

func (k Kind) String() string {
	switch k {
	case Local:
		return "local"
	case Remote:
		return "remote"
	}
	return "invalid"
}

// ErrInvalid is returned (wrapped) for a location that is neither local
// nor an allowed remote URL.
var ErrInvalid = errors.New("invalid location")

// Location is a classified location.
type Location struct {
	Kind   Kind
	Scheme string // remote: "https", "http", "ssh" (also scp-like) or "git"; local: "file" or ""
	Host   string // remote: host name (lower case) or IP address, without brackets
	Port   string // remote: the port when given
	Path   string // local: the path as given (file:// URLs: the path part)
}

// Schemes of remote URLs, in the order error messages list them.
var Schemes = []string{"https", "ssh", "git", "http"}

var (
	// schemeRE is what go-git (and git) take for "a URL with a scheme".
	schemeRE = regexp.MustCompile(`^[^:]+://`)
	// scpRE is the user@host:path form; the host is a DNS name or a
	// bracketed IPv6 address, and the path does not start with a port.
	scpRE = regexp.MustCompile(`^([A-Za-z0-9._-]+)@([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(.+)$`)
	// labelRE is one label of a DNS name.
	labelRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
)

// Parse classifies s. It fails with ErrInvalid for anything that is not a
// local path or an allowed remote URL.
func Parse(s string) (Location, error) {
	if s == "" {
		return Location{}, fmt.Errorf("%w: empty", ErrInvalid)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return Location{}, fmt.Errorf("%w: control character", ErrInvalid)
		}
	}
	if strings.TrimSpace(s) != s {
		return Location{}, fmt.Errorf("%w: leading or trailing space", ErrInvalid)
	}
	var (
		loc Location
		err error
	)
	switch {
	case schemeRE.MatchString(s):
		loc, err = parseURL(s)
	case strings.Contains(s, "@") && strings.Contains(s, ":") && !strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "."):
		loc, err = parseSCP(s)
	default:
		loc, err = parsePath(s)
	}
	if err != nil {
		return Location{}, err
	}
	if err := agree(s, loc); err != nil {
		return Location{}, err
	}
	return loc, nil
}

// IsRemote reports whether s is a valid remote location.
func IsRemote(s string) bool {
	l, err := Parse(s)
	return err == nil && l.Kind == Remote
}

func parseURL(s string) (Location, error) {
	i := strings.Index(s, "://")
	scheme := s[:i]
	if scheme == "file" {
		u, err := url.Parse(s)
		if err != nil || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" {
			return Location{}, fmt.Errorf("%w: malformed file URL", ErrInvalid)
		}
		if u.Host != "" && u.Host != "localhost" {
			return Location{}, fmt.Errorf("%w: a file URL names no host", ErrInvalid)
		}
		if !strings.HasPrefix(u.Path, "/") {
			return Location{}, fmt.Errorf("%w: a file URL needs an absolute path", ErrInvalid)
		}
		return Location{Kind: Local, Scheme: "file", Path: u.Path}, nil
	}
	known := false
	for _, k := range Schemes {
		known = known || scheme == k
	}
	if !known {
		return Location{}, fmt.Errorf("%w: scheme %q (want %s, lower case, or user@host:path)", ErrInvalid, scheme, strings.Join(Schemes, ", "))
	}
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" {
		return Location{}, fmt.Errorf("%w: malformed URL", ErrInvalid)
	}
	host, err := validHost(u.Hostname(), strings.HasPrefix(u.Host, "[") || strings.Contains(u.Host, "]"))
	if err != nil {
		return Location{}, err
	}
	port := u.Port()
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return Location{}, fmt.Errorf("%w: bad port", ErrInvalid)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return Location{}, fmt.Errorf("%w: empty port", ErrInvalid)
	}
	return Location{Kind: Remote, Scheme: scheme, Host: host, Port: port}, nil
}

func parseSCP(s string) (Location, error) {
	m := scpRE.FindStringSubmatch(s)
	if m == nil {
		return Location{}, fmt.Errorf("%w: want user@host:path for ssh", ErrInvalid)
	}
	raw := m[2]
	bracketed := strings.HasPrefix(raw, "[")
	host, err := validHost(strings.Trim(raw, "[]"), bracketed)
	if err != nil {
		return Location{}, err
	}
	// git reads user@host:22:path as a port; refuse the ambiguity.
	if p, _, ok := strings.Cut(m[3], ":"); ok && p != "" && strings.Trim(p, "0123456789") == "" {
		return Location{}, fmt.Errorf("%w: scp-like location with a port (use ssh://)", ErrInvalid)
	}
	if strings.HasPrefix(m[3], "\\") {
		return Location{}, fmt.Errorf("%w: malformed path", ErrInvalid)
	}
	return Location{Kind: Remote, Scheme: "ssh", Host: host}, nil
}

func parsePath(s string) (Location, error) {
	// A path with a colon before any slash reads as host:path to git.
	if before, _, ok := strings.Cut(s, ":"); ok && !strings.Contains(before, "/") {
		return Location{}, fmt.Errorf("%w: %q before a colon is neither a scheme nor user@host", ErrInvalid, before)
	}
	return Location{Kind: Local, Path: s}, nil
}

// validHost accepts a DNS name or an IP address (IPv6 only in brackets)
// and returns it in lower case.
func validHost(h string, bracketed bool) (string, error) {
	if h == "" {
		return "", fmt.Errorf("%w: no host", ErrInvalid)
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Is6() && !a.Is4In6() && !bracketed || a.Zone() != "" {
			return "", fmt.Errorf("%w: malformed IP host", ErrInvalid)
		}
		return a.String(), nil
	}
	if bracketed || len(h) > 253 {
		return "", fmt.Errorf("%w: malformed host", ErrInvalid)
	}
	labels := strings.Split(strings.TrimSuffix(h, "."), ".")
	for _, l := range labels {
		if !labelRE.MatchString(l) {
			return "", fmt.Errorf("%w: malformed host", ErrInvalid)
		}
	}
	if numeric(labels[len(labels)-1]) {
		// The resolver reads such a name as an IPv4 address in one of
		// inet_aton's forms (127.1, 0177.0.0.1, 0x7f.1, 2130706433): it
		// names an address the allow and deny rules, which check IP
		// hosts in their one dotted form, do not see here. No DNS name
		// ends in a number.
		return "", fmt.Errorf("%w: host %q ends in a number but is not an IPv4 address in dotted-quad form (a.b.c.d, decimal, no leading zeros)", ErrInvalid, h)
	}
	return strings.ToLower(strings.TrimSuffix(h, ".")), nil
}

// numeric reports whether a host's last label is a number to inet_aton:
// decimal digits, or hexadecimal after 0x (octal is digits).
func numeric(label string) bool {
	if x, ok := strings.CutPrefix(strings.ToLower(label), "0x"); ok {
		return strings.Trim(x, "0123456789abcdef") == ""
	}
	return label != "" && strings.Trim(label, "0123456789") == ""
}

// agree checks the classification against go-git's own reading of the
// string: what go-git would fetch over the network must be what Parse
// calls remote, on the same host, and never its file transport.
func agree(s string, loc Location) error {
	ep, err := transport.NewEndpoint(s)
	if loc.Kind == Local {
		if loc.Scheme == "" && err == nil && ep.Protocol != "file" {
			return fmt.Errorf("%w: ambiguous path", ErrInvalid)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: malformed URL", ErrInvalid)
	}
	if ep.Protocol != loc.Scheme || !strings.EqualFold(strings.Trim(ep.Host, "[]"), loc.Host) && !sameIP(ep.Host, loc.Host) {
		return fmt.Errorf("%w: ambiguous URL", ErrInvalid)
	}
	return nil
}

func sameIP(a, b string) bool {
	x, err1 := netip.ParseAddr(strings.Trim(a, "[]"))
	y, err2 := netip.ParseAddr(b)
	return err1 == nil && err2 == nil && x == y
}

// Abs returns the cleaned absolute path of a local location (for relative
// paths, against the working directory), without touching the file system.
func (l Location) Abs() (string, error) {
	if l.Kind != Local {
		return "", fmt.Errorf("%w: not a local location", ErrInvalid)
	}
	return filepath.Abs(l.Path)
}

// IsAbs reports whether a local location is an absolute path.
func (l Location) IsAbs() bool {
	return l.Kind == Local && filepath.IsAbs(l.Path)
}

// HostPort is the host and port to dial, the port defaulted by scheme.
func (l Location) HostPort() (host, port string) {
	port = l.Port
	if port == "" {
		port = map[string]string{"https": "443", "http": "80", "ssh": "22", "git": "9418"}[l.Scheme]
	}
	return l.Host, port
}

// defaultPorts are the ports a remote URL of each scheme names when it
// names none.
var defaultPorts = map[string]string{"https": "443", "http": "80", "ssh": "22", "git": "9418"}

// Same reports whether two locations name the same repository as spelled.
//
// Remote locations are the same when their host, port and path are: the
// scheme (https, ssh, the scp-like user@host:path, git, http) and the user
// are how the repository is fetched, not which one it is, so
// git@host:o/x and https://host/o/x are one repository. The host is
// compared without case, a scheme's default port counts as none, and the
// path keeps its case but loses trailing slashes and one ".git". Local
// locations are the same when their cleaned paths are, with a work tree's
// "/.git" cut; a bare "shop.git" beside "shop" is another repository.
// A local location is never a remote one, and strings that do not parse
// are compared as spelled, trailing slashes cut.
func Same(a, b string) bool {
	ka, oka := sameKey(a)
	kb, okb := sameKey(b)
	if !oka || !okb {
		return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
	}
	return ka == kb
}

// sameKey is the key Same compares.
func sameKey(s string) (string, bool) {
	loc, err := Parse(s)
	if err != nil {
		return "", false
	}
	if loc.Kind == Local {
		p := path.Clean(loc.Path)
		if p != "/.git" && p != ".git" {
			p = strings.TrimSuffix(p, "/.git")
		}
		return "local:" + p, true
	}
	var p, port, query string
	if m := scpRE.FindStringSubmatch(s); m != nil && !schemeRE.MatchString(s) {
		p = m[3]
	} else {
		u, err := url.Parse(s)
		if err != nil {
			return "", false
		}
		p, port = u.EscapedPath(), u.Port()
		if u.RawQuery != "" {
			query = "?" + u.RawQuery
		}
	}
	if port == defaultPorts[loc.Scheme] {
		port = ""
	}
	p = strings.TrimRight(strings.TrimSuffix(strings.TrimRight(p, "/"), ".git"), "/")
	return "remote:" + loc.Host + ":" + port + "/" + strings.TrimLeft(p, "/") + query, true
}
