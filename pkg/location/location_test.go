package location

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in     string
		kind   Kind // 0: invalid
		scheme string
		host   string
	}{
		{"https://github.com/a/b", Remote, "https", "github.com"},
		{"https://User:tok@GitHub.com:443/a/b.git", Remote, "https", "github.com"},
		{"http://127.0.0.1:8080/x", Remote, "http", "127.0.0.1"},
		{"https://[::1]:8443/x", Remote, "https", "::1"},
		{"ssh://git@host.example:2222/a/b", Remote, "ssh", "host.example"},
		{"git://host.example/a", Remote, "git", "host.example"},
		{"git@github.com:a/b.git", Remote, "ssh", "github.com"},
		{"a@b:/../../repos/beta", Remote, "ssh", "b"},
		{"/srv/git/x", Local, "", ""},
		{"./x", Local, "", ""},
		{"x", Local, "", ""},
		{"dir@2024", Local, "", ""},
		{"/a@b:c", Local, "", ""},
		{"file:///srv/x", Local, "file", ""},
		{"file://localhost/srv/x", Local, "file", ""},
		{"x://../../srv/secret", 0, "", ""},
		{"HTTP://../..", 0, "", ""},
		{"Https://github.com/a", 0, "", ""},
		{"https://../..", 0, "", ""},
		{"https://%2e%2e/x", 0, "", ""},
		{"https:///srv", 0, "", ""},
		{"https://h.example:99999/x", 0, "", ""},
		{"ssh://h.example:/x", 0, "", ""},
		{"git+ssh://h.example/x", 0, "", ""},
		{"file://other/srv", 0, "", ""},
		{"file://relative", 0, "", ""},
		{"host:path", 0, "", ""},
		{"C:/x", 0, "", ""},
		{"user@host:22:path", 0, "", ""},
		{"git@:x", 0, "", ""},
		{"a:b@c:d", 0, "", ""},
		{"https://h.example/x\n", 0, "", ""},
		{" /srv", 0, "", ""},
		{"", 0, "", ""},
	} {
		l, err := Parse(tt.in)
		if tt.kind == 0 {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Parse(%q) = %+v, %v; want invalid", tt.in, l, err)
			}
			continue
		}
		if err != nil || l.Kind != tt.kind || l.Scheme != tt.scheme || l.Host != tt.host {
			t.Errorf("Parse(%q) = %+v, %v; want %v %q %q", tt.in, l, err, tt.kind, tt.scheme, tt.host)
		}
	}
}

// A host ending in a number is an IPv4 address to the resolver, in any of
// inet_aton's forms: only the dotted quad the allow and deny rules check
// is taken; the other forms are refused here, before a repository is
// registered or a workflow started (they used to pass and be refused only
// when the clone dialed).
func TestNumericHosts(t *testing.T) {
	for _, in := range []string{
		"https://0177.0.0.1/a/b", "https://127.1/a/b", "git://0x7f.1/a", "https://0x7f.0.0.1/a",
		"https://2130706433/a", "https://0x7f000001/a", "https://127.0.0.1./a", "https://1.2.3.4.5/a",
		"https://127.000.000.001/a", "https://example.123/a", "https://0/a", "http://0x/a",
		"git@127.1:a/b", "ssh://git@0177.1:22/a",
	} {
		l, err := Parse(in)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %+v, %v; want invalid", in, l, err)
		} else if !strings.Contains(err.Error(), "ends in a number") {
			t.Errorf("Parse(%q): %v; want the reason", in, err)
		}
	}
	for in, host := range map[string]string{
		"https://127.0.0.1/a":      "127.0.0.1",
		"https://10.0.0.7:8443/a":  "10.0.0.7",
		"https://1e100.net/a":      "1e100.net",
		"https://host-1.example/a": "host-1.example",
		"https://123.example/a":    "123.example",
		"https://0x7f.example/a":   "0x7f.example",
		"https://a.b0x1/a":         "a.b0x1",
		"git@192.168.1.2:a/b":      "192.168.1.2",
	} {
		l, err := Parse(in)
		if err != nil || l.Host != host {
			t.Errorf("Parse(%q) = %+v, %v; want host %s", in, l, err, host)
		}
	}
}

func TestSame(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"https://example.com/x/shop", "https://example.com/x/shop.git", true},
		{"https://example.com/x/shop", "https://example.com/x/shop/", true},
		{"https://example.com/x/shop", "https://example.org/x/shop", false},
		{"https://Example.COM/x/shop", "https://example.com/x/shop.git", true},
		{"https://example.com/x/Shop", "https://example.com/x/shop", false},
		{"https://example.com/x/shop", "https://example.com/y/shop", false},
		// One repository fetched over ssh or https.
		{"git@example.com:x/shop.git", "https://example.com/x/shop", true},
		{"ssh://git@example.com/x/shop", "https://example.com/x/shop", true},
		{"ssh://git@example.com:22/x/shop", "git@example.com:x/shop", true},
		{"https://example.com:443/x/shop", "http://example.com/x/shop", true},
		{"git://example.com/x/shop", "https://user@example.com/x/shop", true},
		{"git@example.com:x/shop", "git@example.org:x/shop", false},
		{"git@example.com:x/shop", "https://example.com/x/shop-api", false},
		{"ssh://git@example.com:2222/x/shop", "https://example.com/x/shop", false},
		{"https://example.com/x/shop?ref=main", "https://example.com/x/shop", false},
		// Local paths.
		{"/src/shop", "/src/shop/", true},
		{"/src/shop", "/src/shop/.git", true},
		{"/src/shop", "/src/./shop//", true},
		{"/src/shop", "file:///src/shop", true},
		{"/src/shop", "/src/shop.git", false},
		{"/src/shop.git", "/src/shop.git/", true},
		{"/src/shop", "/other/shop", false},
		// A local path is no remote one, whatever its words.
		{"/example.com/x/shop", "https://example.com/x/shop", false},
		// Strings that do not parse are compared as spelled.
		{"HTTPS://example.com/x/shop", "HTTPS://example.com/x/shop/", true},
		{"HTTPS://example.com/x/shop", "https://example.com/x/shop", false},
	} {
		if got := Same(c.a, c.b); got != c.want {
			t.Errorf("Same(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := Same(c.b, c.a); got != c.want {
			t.Errorf("Same(%q, %q) = %v, want %v", c.b, c.a, got, c.want)
		}
	}
}
