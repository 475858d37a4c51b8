package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{"4096", 4096, ""},
		{"-1", -1, ""},
		{"0", 0, ""},
		{"640MiB", 640 << 20, ""},
		{"1GiB", 1 << 30, ""},
		{" 2 gib ", 2 << 30, ""},
		{"300mib", 300 << 20, ""},
		{"1GB", 1e9, ""},
		{"16KB", 16000, ""},
		{"3KiB", 3072, ""},
		{"7B", 7, ""},
		{"2TiB", 2 << 40, ""},
		{"1G", 0, "unknown unit"},
		{"1.5GiB", 0, "unknown unit"},
		{"GiB", 0, "want an integer"},
		{"", 0, "want an integer"},
		{"lots", 0, "want an integer"},
		{"9000000TiB", 0, "out of range"},
		{"99999999999999999999", 0, "want an integer"},
	} {
		got, err := parseBytes(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseBytes(%q) = %d, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

// A size flag takes a unit on the command line and in its environment
// variable; the command line wins, and an unreadable environment value is
// an error that names the variable, not a silent fall-back to the default.
func TestBytesFlagEnv(t *testing.T) {
	parse := func(args ...string) (int64, error) {
		fs := flag.NewFlagSet("query-service", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var v int64
		bytesVar(fs, &v, "memory-bytes", "CODECTX_TEST_MEMORY", 5, "budget")
		err := parseFlags(fs, args)
		return v, err
	}
	for _, tc := range []struct {
		env  string
		args []string
		want int64
		err  string
	}{
		{"", nil, 5, ""},
		{"", []string{"--memory-bytes", "1GiB"}, 1 << 30, ""},
		{"640MiB", nil, 640 << 20, ""},
		{"640MiB", []string{"--memory-bytes=2GB"}, 2e9, ""},
		{"lots", []string{"--memory-bytes", "1"}, 1, ""},
		{"lots", nil, 0, "$CODECTX_TEST_MEMORY"},
		{"", []string{"--memory-bytes", "1G"}, 0, "unknown unit"},
	} {
		t.Setenv("CODECTX_TEST_MEMORY", tc.env)
		got, err := parse(tc.args...)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("env %q args %q: %d, %v; want an error with %q", tc.env, tc.args, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("env %q args %q: %d, %v; want %d", tc.env, tc.args, got, err, tc.want)
		}
	}
}
