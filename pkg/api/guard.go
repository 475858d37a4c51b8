package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Limits bound what one request may cost the server before (and after) it
// is authenticated. Zero fields take the defaults below; docs/security.md
// lists them.
type Limits struct {
	QueryBody   int64 // bytes of a POST /v1/query body; default 64 KiB (413 beyond)
	IndexBody   int64 // bytes of a POST /v1/index body; default 16 KiB (413 beyond)
	WebhookBody int64 // bytes of a webhook delivery; default 25 MiB, GitHub's cap (413 beyond)
	MCPBody     int64 // bytes of a /v1/mcp request; default 1 MiB
	Query       int   // bytes of QueryRequest.Query; default 8 KiB (400 beyond)
	// WebhookBytes bounds the memory of the webhook bodies being read
	// (before their signature is checked): a budget of bytes, reserved as
	// each body arrives, a chunk at a time (bodybudget.go); a delivery
	// that finds none free waits up to 2 s, then gets 503. Default: four
	// bodies of WebhookBody (100 MiB); at least one (and 64 KiB).
	WebhookBytes int64
	WebhookRead  time.Duration // time a delivery's body may take; default 10 s, GitHub's delivery timeout (cut beyond: 408)
	// WebhookRate is the pace a delivery's body must keep: after
	// WebhookGrace, at least this many bytes a second on average, so that
	// a sender who trickles is cut in about WebhookGrace instead of
	// holding its share of WebhookBytes for WebhookRead. Default 128 KiB/s
	// after 1 s: a push's JSON (kilobytes) comes whole within the grace,
	// and the largest delivery WebhookRead lets through needs 2.5 MB/s
	// anyway.
	WebhookRate  int64
	WebhookGrace time.Duration
	Rate         float64 // requests per second per tenant; default 50; negative = unlimited (429 beyond)
	// TenantConcurrency is how many requests of one tenant are worked on
	// at once. Past it a request waits up to a second for its tenant's
	// turn, then gets 429. Default: with keys (tenants), half the CPUs (at
	// least 1), so that one tenant's costly queries leave the others
	// cores; without keys (one user), no bound. Negative: no bound.
	TenantConcurrency int
	Burst             int // requests a tenant may send at once; default 2*Rate
	// TenantRepos is how many distinct repositories one tenant may hold
	// (repocap.go). A new repository past it is refused with 409; pushes
	// and reindexes of those it holds pass. Default: with keys (tenants),
	// DefaultTenantRepos; without keys (one user), no bound. Negative: no
	// bound. Operators' requests are not bounded.
	TenantRepos int
}

// Default limits.
const (
	DefaultQueryBody    = 64 << 10
	DefaultIndexBody    = 16 << 10
	DefaultWebhookBody  = 25 << 20
	DefaultMCPBody      = 1 << 20
	DefaultQuery        = 8 << 10
	DefaultWebhookBytes = 4 * DefaultWebhookBody
	DefaultWebhookRead  = 10 * time.Second
	DefaultWebhookRate  = 128 << 10
	DefaultWebhookGrace = time.Second
	DefaultRate         = 50
)

func (l Limits) withDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.QueryBody, DefaultQueryBody)
	def(&l.IndexBody, DefaultIndexBody)
	def(&l.WebhookBody, DefaultWebhookBody)
	def(&l.MCPBody, DefaultMCPBody)
	if l.Query <= 0 {
		l.Query = DefaultQuery
	}
	if l.WebhookBytes <= 0 {
		l.WebhookBytes = 4 * l.WebhookBody
	}
	// A body the limit lets through must fit in the budget.
	l.WebhookBytes = max(l.WebhookBytes, l.WebhookBody)
	if l.WebhookRead <= 0 {
		l.WebhookRead = DefaultWebhookRead
	}
	def(&l.WebhookRate, DefaultWebhookRate)
	if l.WebhookGrace <= 0 {
		l.WebhookGrace = DefaultWebhookGrace
	}
	if l.Rate == 0 {
		l.Rate = DefaultRate
	}
	if l.Burst <= 0 {
		l.Burst = max(1, int(math.Ceil(2*l.Rate)))
	}
	return l
}

// guard wraps the routes with the checks that hold for every request:
// the Host of a server on loopback (DNS rebinding) and the Origin of a
// state-changing request to an open API (cross-site requests).
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w, r, after := closeUnread(w, r)
		defer after()
		if s.LoopbackOnly && !loopbackHost(r.Host) {
			// A web page that rebinds its own name to 127.0.0.1 sends its
			// name as Host; the API answers only to loopback names.
			writeError(w, http.StatusMisdirectedRequest, fmt.Errorf("host %q: this server answers only to localhost, 127.0.0.1 and [::1]", r.Host))
			return
		}
		if !s.LoopbackOnly && !s.keysOn() && !s.openHost(r.Host) {
			// An open API on other interfaces (a container's 0.0.0.0,
			// published on the host's loopback or port-forwarded) is
			// reached by a rebound page too, whose Origin is its own
			// Host: without keys, answer only to addresses, localhost and
			// the names the operator listed.
			writeError(w, http.StatusMisdirectedRequest, fmt.Errorf("host %q: without API keys this server answers only to IP addresses, localhost and the names of --api-hosts", r.Host))
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && len(s.Keys) == 0 && crossSite(r) {
			// Without keys the API trusts whoever reaches it; a browser
			// reaches it on behalf of any web page, so refuse those.
			writeError(w, http.StatusForbidden, errors.New("cross-site request refused: Origin is not this server"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names this machine's loopback
// interface: localhost, 127.0.0.1 or [::1], with or without a port.
func loopbackHost(host string) bool {
	h, ok := hostName(host)
	return ok && (strings.EqualFold(h, "localhost") || h == "127.0.0.1" || h == "::1")
}

// hostName is the name of a Host header without its port and brackets;
// ok is false when the port is not a number ("localhost:evil.example").
func hostName(host string) (name string, ok bool) {
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	} else if _, err := strconv.ParseUint(port, 10, 16); err != nil && port != "" {
		return "", false // an empty port is allowed (RFC 3986), a word is not
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), true
}

// openHost reports whether an API without keys answers to a Host header:
// an IP address, localhost, or a name of Server.Hosts (any port). A page
// that rebinds a name of its own to this machine sends that name.
func (s *Server) openHost(host string) bool {
	h, ok := hostName(host)
	if !ok {
		return false
	}
	if net.ParseIP(h) != nil || strings.EqualFold(h, "localhost") {
		return true
	}
	for _, allowed := range s.Hosts {
		if strings.EqualFold(h, allowed) {
			return true
		}
	}
	return false
}

// crossSite reports whether a browser sent the request for another site:
// an Origin other than the request's own host, or Sec-Fetch-Site saying so.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return true
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return false // not a browser, or a same-origin GET
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return true // "null" (a sandboxed frame, a file) or garbage
	}
	return !strings.EqualFold(u.Host, r.Host)
}

// errMediaType is returned by readJSON when the body is not declared JSON.
var errMediaType = errors.New("Content-Type must be application/json")

// readJSON decodes exactly one JSON value of at most limit bytes, with no
// field v does not have, from a body declared application/json. It writes the error answer (415, 413 or
// 400) and returns false when the body is not acceptable.
func readJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		// A form or text/plain POST is what a web page can send without
		// asking; a JSON API never needs one.
		writeError(w, http.StatusUnsupportedMediaType, errMediaType)
		return false
	}
	if r.ContentLength > limit {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("body of %d bytes is larger than the %d-byte limit of this route", r.ContentLength, limit))
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	// A field the route does not know is refused, as the OpenAPI document
	// says (additionalProperties: false): a misspelt or misplaced field
	// ("repo" on a route that takes "repos") must not silently widen or
	// change what the request asks.
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil {
		// Exactly one value: anything but white space after it is refused.
		if _, terr := dec.Token(); !errors.Is(terr, io.EOF) {
			err = errors.New("data after the JSON value")
		}
	}
	if err != nil {
		bodyRefused(w, err, limit)
		return false
	}
	return true
}

// bodyRefused answers a request whose body could not be read or decoded:
// 413 past limit (http.MaxBytesReader), else 400.
func bodyRefused(w http.ResponseWriter, err error, limit int64) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("body larger than the %d-byte limit of this route", limit))
		return
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		// Go's text names the Go types ("struct { api.plain; Budget
		// *float64 ... }", "float64"), and ".plain.repo" for a body with
		// its own UnmarshalJSON: say which field, what was sent and what
		// JSON wants, in JSON's words.
		if field := strings.TrimPrefix(typ.Field, "plain."); field != "" {
			writeError(w, http.StatusBadRequest, fmt.Errorf("bad request body: field %s: got a JSON %s, want %s", field, typ.Value, jsonKind(typ.Type)))
		} else {
			writeError(w, http.StatusBadRequest, fmt.Errorf("bad request body: got a JSON %s, want %s", typ.Value, jsonKind(typ.Type)))
		}
		return
	}
	writeError(w, http.StatusBadRequest, fmt.Errorf("bad request body: %w", err))
}

// jsonKind names what JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another value"
}

// rateLimiter is a token bucket per tenant.
type rateLimiter struct {
	rate  float64 // tokens per second; <0 = unlimited
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// maxBuckets bounds the tenants tracked at once; beyond it, buckets that
// have refilled (idle tenants) are dropped.
const maxBuckets = 10000

func newRateLimiter(rate float64, burst int) *rateLimiter {
	return &rateLimiter{rate: rate, burst: float64(burst), now: time.Now, buckets: map[string]*bucket{}}
}

// take spends a token of tenant; when none is left it returns how long
// until one is.
func (l *rateLimiter) take(tenant string) (ok bool, wait time.Duration) {
	if l.rate < 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(tenant)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// charge spends n more tokens of tenant after a request was let in (a
// query's cost beyond the request itself). The bucket may go below zero:
// the tenant's next requests wait until it has refilled.
func (l *rateLimiter) charge(tenant string, n float64) {
	if l.rate < 0 || n <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill(tenant).tokens -= n
}

// refill returns tenant's bucket (a full one for a tenant not tracked,
// idle ones dropped first when maxBuckets are), refilled to now. l.mu is
// held.
func (l *rateLimiter) refill(tenant string) *bucket {
	now := l.now()
	b := l.buckets[tenant]
	if b == nil {
		if len(l.buckets) >= maxBuckets {
			l.prune(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[tenant] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	return b
}

func (l *rateLimiter) prune(now time.Time) {
	for t, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.buckets, t)
		}
	}
	if len(l.buckets) >= maxBuckets {
		clear(l.buckets) // every tenant busy: start over rather than grow
	}
}

// allow spends one request of tenant's rate and, on the routes that
// hold tenant slots (holdSlots), takes one of tenant's slots until the
// handler returns; it writes 429 with Retry-After and returns false when
// the tenant is over its rate or its slots stayed busy. tenant is a
// bucket: a tenant's, or operatorBucket, the operators' keys'.
func (s *Server) allow(w http.ResponseWriter, r *http.Request, tenant string) bool {
	who, is, has := fmt.Sprintf("tenant %q", tenant), "is", "has"
	if tenant == operatorBucket {
		who, is, has = "the operators' keys", "are", "have"
	}
	ok, wait := s.rate.take(tenant)
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
		writeError(w, http.StatusTooManyRequests, fmt.Errorf("%s %s over the rate of %g requests per second", who, is, s.limits.Rate))
		return false
	}
	hd, _ := r.Context().Value(heldKey{}).(*held)
	if hd == nil || hd.release != nil {
		return true // no bound (busy is nil), or the slot is held already
	}
	release, ok := s.busy.acquire(r.Context(), tenant, tenantWait)
	if !ok {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, fmt.Errorf("%s %s %d requests being worked on: retry", who, has, s.limits.TenantConcurrency))
		return false
	}
	hd.release = release
	return true
}

// closeUnread makes a refusal (status 400 or more) of a request whose body
// was not read to its end close the connection: Connection: close, and,
// once the handler returns, a read deadline closeGrace away. Else net/http,
// to reuse the connection, reads up to 256 KiB of the unread body (before
// it writes the answer, and again when it closes the body), and a client
// that declared a body and sent none held the connection, without an
// answer, for the whole read timeout (60 s) where its headers had 10 s:
// anyone could, with no key (401), a wrong content type (415) or too
// large a body (413). after must run when the handler has returned.
func closeUnread(w http.ResponseWriter, r *http.Request) (_ http.ResponseWriter, _ *http.Request, after func()) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return w, r, func() {}
	}
	b := &eofBody{ReadCloser: r.Body}
	// A shallow copy: net/http keeps the request it read, whose Body it
	// still inspects after the handler.
	r = r.WithContext(r.Context())
	r.Body = b
	cw := &closeWriter{ResponseWriter: w, body: b}
	return cw, r, func() {
		if cw.closing {
			// The connection is not reused: what the client is still
			// sending is read for closeGrace at most. Cut at once, a client
			// still writing its body (60 KB refused with 429) got a broken
			// pipe instead of the answer: closed with unread data, the
			// socket answers with a reset.
			http.NewResponseController(w).SetReadDeadline(time.Now().Add(closeGrace))
		}
	}
}

// closeGrace is how long the rest of a refused request's body is read
// before its connection closes.
const closeGrace = 500 * time.Millisecond

// eofBody records whether a request body was read to its end.
type eofBody struct {
	io.ReadCloser
	mu  sync.Mutex
	eof bool
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.mu.Lock()
		b.eof = true
		b.mu.Unlock()
	}
	return n, err
}

func (b *eofBody) done() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.eof
}

// closeWriter sets Connection: close on an error answer to a request whose
// body is unread.
type closeWriter struct {
	http.ResponseWriter
	body    *eofBody
	wrote   bool
	closing bool // Connection: close was set
}

func (w *closeWriter) WriteHeader(code int) {
	if !w.wrote && code >= 400 && !w.body.done() {
		w.Header().Set("Connection", "close")
		w.closing = true
	}
	if code >= 200 {
		w.wrote = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closeWriter) Write(p []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// flushes) through the wrapper.
func (w *closeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
