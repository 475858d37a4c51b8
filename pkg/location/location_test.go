package location

import (
	"errors"
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
