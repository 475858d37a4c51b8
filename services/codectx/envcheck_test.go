package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
)

// A variable that sets a number, duration or boolean flag is checked as
// the flag would be: a value it refuses stops the command with an error
// naming the variable, where it used to leave the default in force.
func TestEnvChecked(t *testing.T) {
	for _, tt := range []struct {
		env, val string
		args     []string
		err      string // "" : no error
		check    func(l *limitFlags, repos int) bool
	}{
		{env: envTenantRepos, val: "10k", err: "$" + envTenantRepos + `="10k"`},
		{env: envTenantRepos, val: "25", check: func(_ *limitFlags, repos int) bool { return repos == 25 }},
		{env: envTenantRepos, val: "nope", args: []string{"-tenant-repos", "7"}, check: func(_ *limitFlags, repos int) bool { return repos == 7 }},
		{env: envRate, val: "fast", err: "$" + envRate},
		{env: envRate, val: "2.5", check: func(l *limitFlags, _ int) bool { return l.rate == 2.5 }},
		{env: envReadTimeout, val: "30", err: "$" + envReadTimeout},
		{env: envReadTimeout, val: "30s", check: func(l *limitFlags, _ int) bool { return l.readTimeout == 30*time.Second }},
		{env: envMetricsOpen, val: "yes", err: "$" + envMetricsOpen},
		{env: envMetricsOpen, val: "true", check: func(l *limitFlags, _ int) bool { return l.publicMetrics }},
		{env: envWebhookRead, val: "lots", err: "$" + envWebhookRead},
		{env: envWebhookRead, val: "200MiB", check: func(l *limitFlags, _ int) bool { return l.webhookBytes == 200<<20 }},
	} {
		t.Run(tt.env+"="+tt.val, func(t *testing.T) {
			t.Setenv(tt.env, tt.val)
			fs := flag.NewFlagSet("query-service", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var l limitFlags
			l.register(fs)
			var repos int
			tenantReposFlag(fs, &repos, "10000")
			err := parseFlags(fs, tt.args)
			switch {
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error = %v, want one naming %s", err, tt.err)
			case tt.err == "" && err != nil:
				t.Fatal(err)
			case tt.check != nil && !tt.check(&l, repos):
				t.Errorf("the variable's value is not in force: %+v, tenant-repos %d", l, repos)
			}
		})
	}
}

// The webhook read budget is a size; the count of deliveries it replaced
// is still read, as that many bodies of the 25 MiB limit, unless the size
// is given.
func TestWebhookReadBytes(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int64
	}{
		{nil, 0}, // the server's default: four bodies
		{[]string{"-webhook-read-bytes", "64MiB"}, 64 << 20},
		{[]string{"-webhook-concurrency", "2"}, 2 * api.DefaultWebhookBody},
		{[]string{"-webhook-concurrency", "2", "-webhook-read-bytes", "10MiB"}, 10 << 20},
	} {
		fs := flag.NewFlagSet("up", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var l limitFlags
		l.register(fs)
		if err := parseFlags(fs, tt.args); err != nil {
			t.Fatal(err)
		}
		var srv api.Server
		l.apply(&srv, "127.0.0.1:0")
		if srv.Limits.WebhookBytes != tt.want {
			t.Errorf("%q: WebhookBytes = %d, want %d", tt.args, srv.Limits.WebhookBytes, tt.want)
		}
	}
}
