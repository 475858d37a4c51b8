package main

import (
	"flag"
	"net"
	"strconv"
	"time"

	"codectx/pkg/api"
)

// Environment variables of the request limits (docs/security.md).
const (
	envRate        = "CODECTX_RATE_LIMIT"
	envBurst       = "CODECTX_RATE_BURST"
	envWebhookRead = "CODECTX_WEBHOOK_READ_BYTES"
	// envWebhooksMax is the count of deliveries read at once that the
	// budget of bytes replaced: still read, as that many bodies of the
	// 25 MiB limit, so that a deployment that set it keeps its bound.
	envWebhooksMax = "CODECTX_WEBHOOK_CONCURRENCY"
	envReadTimeout = "CODECTX_HTTP_READ_TIMEOUT"
	envAPIHosts    = "CODECTX_API_HOSTS"
	envMetricsOpen = "CODECTX_METRICS_PUBLIC"
	envWebhookPace = "CODECTX_WEBHOOK_MIN_RATE"
	envTenantBusy  = "CODECTX_TENANT_CONCURRENCY"
	envConns       = "CODECTX_HTTP_CONNECTIONS"
	envConnsAddr   = "CODECTX_HTTP_CONNECTIONS_PER_ADDR"
)

// limitFlags are the request limits of the roles serving the API.
type limitFlags struct {
	rate         float64
	burst        int
	webhookBytes int64
	webhooks     int // deprecated: --webhook-read-bytes in bodies of the 25 MiB limit
	webhookRate  int64
	tenantBusy   int
	readTimeout  time.Duration
	conns        int // connections open at once (0: from RLIMIT_NOFILE)
	connsPerAddr int // of them from one remote address (0: a quarter)
	hosts        string
	// publicMetrics serves /metrics without an operator's key when keys are on.
	publicMetrics bool
}

func (l *limitFlags) register(fs *flag.FlagSet) {
	fs.Float64Var(&l.rate, "rate-limit", envFloat(envRate, api.DefaultRate), "requests per second per tenant before 429; a query over several repositories counts one more per 4 past the first (negative: no limit) ($"+envRate+")")
	fs.IntVar(&l.tenantBusy, "tenant-concurrency", envInt(envTenantBusy, 0), "requests of one tenant worked on at once; past it a request waits up to 1 s for its tenant's turn, then 429 (default: with API keys half the CPUs, at least 1, so one tenant's costly queries leave the others cores; without keys no bound; negative: no bound) ($"+envTenantBusy+")")
	fs.IntVar(&l.burst, "rate-burst", envInt(envBurst, 0), "requests a tenant may send at once (default: twice the rate) ($"+envBurst+")")
	bytesVar(fs, &l.webhookBytes, "webhook-read-bytes", envWebhookRead, 0, "`bytes` of webhook delivery bodies read at once, before their signature is checked (a unit may follow: 100MiB); each delivery reserves its share as its body arrives, and one that finds none free waits up to 2 s, then 503 (default: four 25 MiB bodies, 100 MiB) ($"+envWebhookRead+")")
	fs.IntVar(&l.webhooks, "webhook-concurrency", envInt(envWebhooksMax, 0), "deprecated: sets --webhook-read-bytes to this many 25 MiB bodies, unless it is given ($"+envWebhooksMax+")")
	bytesVar(fs, &l.webhookRate, "webhook-min-rate", envWebhookPace, api.DefaultWebhookRate, "`bytes` a second a webhook delivery's body must keep after its first second (a unit may follow: 128KiB); a slower sender is cut with 408, so that trickling senders cannot hold the webhook read budget ($"+envWebhookPace+")")
	fs.StringVar(&l.hosts, "api-hosts", env(envAPIHosts, ""), "comma-separated host names an API without keys answers to when it does not listen on loopback (besides IP addresses and localhost; others get 421, so that a web page cannot rebind its name to the server) ($"+envAPIHosts+")")
	fs.BoolVar(&l.publicMetrics, "metrics-public", envBool(envMetricsOpen, false), "with API keys, serve /metrics without a key; by default it then needs an operator's key (tenant \"*\"), as its counters add up every tenant's activity ($"+envMetricsOpen+")")
	fs.DurationVar(&l.readTimeout, "http-read-timeout", envDuration(envReadTimeout, defaultReadTimeout), "time to read a whole request, body included ($"+envReadTimeout+")")
	fs.IntVar(&l.conns, "http-connections", envInt(envConns, 0), "API connections open at once; past it the keep-alive connection idle longest is closed, or new ones wait, so that clients cannot use up the process's file descriptors (default: half of RLIMIT_NOFILE, at most 8192; negative: no bound) ($"+envConns+")")
	fs.IntVar(&l.connsPerAddr, "http-connections-per-addr", envInt(envConnsAddr, 0), "API connections open at once from one remote address (an IPv6 /64); past it a new one is closed at once; raise it behind a proxy, whose connections all come from its address (default: a quarter of --http-connections; negative: no bound) ($"+envConnsAddr+")")
}

// http returns the bounds of the API's HTTP server.
func (l *limitFlags) http() httpLimits {
	return httpLimits{readTimeout: l.readTimeout, conns: resolveConnLimits(l.conns, l.connsPerAddr)}
}

// apply sets the limits and the loopback Host check on srv, which will
// listen on listen.
func (l *limitFlags) apply(srv *api.Server, listen string) {
	srv.Limits.Rate, srv.Limits.Burst, srv.Limits.WebhookRate = l.rate, l.burst, l.webhookRate
	srv.Limits.WebhookBytes = l.webhookBytes
	if l.webhookBytes <= 0 && l.webhooks > 0 {
		srv.Limits.WebhookBytes = int64(l.webhooks) * api.DefaultWebhookBody
	}
	srv.Limits.TenantConcurrency = l.tenantBusy
	if l.rate < 0 {
		srv.Limits.Rate = -1
	}
	srv.LoopbackOnly = isLoopback(listen)
	srv.Hosts = splitList(l.hosts)
	srv.PublicMetrics = l.publicMetrics
}

// isLoopback reports whether a listen address binds loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// exposure describes a listen address that is not loopback only: the
// serving line names a loopback URL, which is how a local client reaches
// it, not what it binds. warn is set when no API key guards it.
func exposure(listen string, keys bool) (note string, warn bool) {
	if isLoopback(listen) {
		return "", false
	}
	host, _, _ := net.SplitHostPort(listen)
	where := "on " + listen
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		where += ", every interface"
	}
	if keys {
		return "listening " + where + ", not loopback only; API keys are on", false
	}
	return "listening " + where + ", not loopback only, and without API keys: anyone who reaches the port can read every indexed repository and index more (start with --keys)", true
}

func envFloat(key string, def float64) float64 {
	if v, err := strconv.ParseFloat(env(key, ""), 64); err == nil {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(env(key, "")); err == nil {
		return v
	}
	return def
}

func envDuration(key string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(env(key, "")); err == nil {
		return v
	}
	return def
}
