package codectx

import "testing"

func TestClip(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"ab日本", 4, "ab"}, // 日 is 3 bytes: not split
		{"ab日本", 5, "ab日"},
		{"ab日本", 100, "ab日本"},
		{"日本", 2, ""},
		{"abc", 0, ""},
		{"", 3, ""},
	} {
		if got := Clip(c.s, c.n); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func TestQuote(t *testing.T) {
	if got := Quote("a\"b", 10); got != `"a\"b"` {
		t.Errorf("Quote short = %s", got)
	}
	if got := Quote("ab日本", 4); got != `"ab"... (8 bytes)` {
		t.Errorf("Quote cut = %s", got)
	}
}
