package api

import "testing"

// TestSameLocation: a URL's ".git", trailing slashes and the case of its
// scheme and host, and a work tree's "/.git", spell the same repository; a local "shop.git" (a bare
// repository beside the work tree "shop", both named "shop") does not,
// else indexing it silently replaced shop's index.
func TestSameLocation(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"https://example.com/x/shop", "https://example.com/x/shop.git", true},
		{"https://example.com/x/shop", "https://example.com/x/shop/", true},
		{"https://example.com/x/shop", "https://example.org/x/shop", false},
		{"https://Example.COM/x/shop", "HTTPS://example.com/x/shop.git", true},
		{"https://example.com/x/Shop", "https://example.com/x/shop", false},
		{"/src/shop", "/src/shop/", true},
		{"/src/shop", "/src/shop/.git", true},
		{"/src/shop", "/src/./shop//", true},
		{"/src/shop", "/src/shop.git", false},
		{"/src/shop.git", "/src/shop.git/", true},
		{"/src/shop", "/other/shop", false},
	} {
		if got := sameLocation(c.a, c.b); got != c.want {
			t.Errorf("sameLocation(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
