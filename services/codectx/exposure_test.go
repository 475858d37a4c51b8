package main

import (
	"strings"
	"testing"
)

// TestExposure: up says when it listens beyond loopback (its serving line
// names a loopback URL whatever it binds), and warns when no API key
// guards it.
func TestExposure(t *testing.T) {
	for _, c := range []struct {
		listen string
		keys   bool
		want   string // "" = no note
		warn   bool
	}{
		{"127.0.0.1:7700", false, "", false},
		{"localhost:7700", false, "", false},
		{"[::1]:7700", false, "", false},
		{"0.0.0.0:7700", false, "on 0.0.0.0:7700, every interface, not loopback only, and without API keys", true},
		{":7700", false, "on :7700, every interface", true},
		{"[::]:7700", true, "on [::]:7700, every interface, not loopback only; API keys are on", false},
		{"10.1.2.3:7700", false, "on 10.1.2.3:7700, not loopback only, and without", true},
		{"10.1.2.3:7700", true, "API keys are on", false},
	} {
		note, warn := exposure(c.listen, c.keys)
		if warn != c.warn || (c.want == "") != (note == "") || !strings.Contains(note, c.want) {
			t.Errorf("exposure(%q, keys %v) = %q, %v; want %q, %v", c.listen, c.keys, note, warn, c.want, c.warn)
		}
	}
}
