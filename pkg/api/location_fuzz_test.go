package api

import (
	"strings"
	"testing"

	"codectx/pkg/location"
	"codectx/pkg/source"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// FuzzLocation: no string is remote to one consumer and local to another.
// Whatever the API accepts from a tenant (index route or webhook
// clone_url), pkg/source opens as a clone URL and go-git fetches over the
// network from the same host; what the classifier calls local, go-git and
// pkg/source read from the file system, and a tenant never gets it past
// the API.
func FuzzLocation(f *testing.F) {
	for _, s := range []string{
		"https://github.com/a/b", "git@github.com:a/b.git", "ssh://git@host.example:22/a", "git://host.example/a",
		"http://127.0.0.1:8080/x", "https://[::1]/x", "x://../../srv/secret", "a@b:/../../repos/beta", "HTTP://../..",
		"file:///srv/x", "/srv/x", "./x", "x", "C:/x", "a@b", "host:path", "a:b@c:d", "https://u:p@h.example/x",
		"https://%2e%2e/x", "https://h.example:99999/x", "ssh://h.example:/x", "git@[::1]:x", "user@host:22:path",
		"ssh://[fe80::1%25eth0]/x", "https://h.example/x\n", " /x",
	} {
		f.Add(s)
	}
	s := &Server{}
	f.Fuzz(func(t *testing.T, in string) {
		loc, err := location.Parse(in)
		ep, epErr := transport.NewEndpoint(in)
		tenantOK := func(local bool) bool {
			code, err := s.checkLocation(in, "acme", false, local)
			return code == 0 && err == nil
		}
		switch {
		case err != nil:
			if tenantOK(true) {
				t.Fatalf("%q: invalid to the classifier, accepted by the API", in)
			}
		case loc.Kind == location.Remote:
			if !source.IsURL(in) {
				t.Fatalf("%q: remote to the classifier, a path to pkg/source", in)
			}
			if epErr != nil || ep.Protocol != loc.Scheme || ep.Protocol == "file" {
				t.Fatalf("%q: remote %s to the classifier, go-git reads %+v, %v", in, loc.Scheme, ep, epErr)
			}
			if !strings.EqualFold(strings.Trim(ep.Host, "[]"), loc.Host) && !sameHost(ep.Host, loc.Host) {
				t.Fatalf("%q: host %q to the classifier, %q to go-git", in, loc.Host, ep.Host)
			}
		case loc.Kind == location.Local:
			if tenantOK(false) {
				t.Fatalf("%q: local, accepted from a tenant", in)
			}
			if loc.Scheme == "" && source.IsURL(in) {
				t.Fatalf("%q: a path to the classifier, a URL to pkg/source", in)
			}
			if loc.Scheme == "" && epErr == nil && ep.Protocol != "file" {
				t.Fatalf("%q: a path to the classifier, %s to go-git", in, ep.Protocol)
			}
		}
	})
}

func sameHost(a, b string) bool {
	x, err1 := location.Parse("ssh://" + a + "/x")
	return err1 == nil && x.Host == b
}
