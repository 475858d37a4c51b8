// Package openai is the embed driver for any OpenAI-compatible embeddings
// server (POST {base}/v1/embeddings): OpenAI, Ollama, Hugging Face
// text-embeddings-inference, vLLM, LocalAI. It batches texts, bounds the
// requests in flight, retries 429 and 5xx answers with exponential backoff
// and jitter (honouring Retry-After), times out each request, and checks
// every vector's dimension.
package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"codectx/pkg/codectx"
	"codectx/pkg/embed"
)

// DefaultKeyEnv is the environment variable the API key is read from when
// Options.KeyEnv is empty. OPENAI_API_KEY is read if it is unset.
const DefaultKeyEnv = "CODECTX_EMBEDDER_KEY"

// Options configure a driver. Only URL and Model are required.
type Options struct {
	// URL is the server's base URL ("http://localhost:11434"); /v1/embeddings
	// is appended unless the URL already ends in /embeddings, and only
	// /embeddings if it ends in /v1.
	URL   string
	Model string
	// Dim is the vector length the model gives. 0: learned by embedding one
	// probe text in New. Every answer is checked against it (embed.ErrDim).
	Dim int
	// Dimensions, if > 0, is sent as the request's "dimensions" field, for
	// models that can shorten their vectors (OpenAI text-embedding-3).
	Dimensions int
	// KeyEnv names the environment variable holding the API key, sent as a
	// bearer token (DefaultKeyEnv if empty, then OPENAI_API_KEY). The key is
	// read once in New and never logged or put in an error.
	KeyEnv string
	// MaxBatch is the most texts per request (default 64).
	MaxBatch int
	// Concurrency is the most requests in flight at once for this embedder,
	// across all callers (default 4).
	Concurrency int
	// MaxRetries is how many times a request is retried after a 429, a 5xx
	// or a transport error (default 5; negative: never).
	MaxRetries int
	// Timeout bounds each request attempt (default 60s).
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between attempts (defaults
	// 250ms and 20s); a Retry-After header is honoured up to MaxBackoff*3.
	MinBackoff, MaxBackoff time.Duration
	// MaxChars truncates each text to this many bytes (at a rune boundary)
	// before it is sent; 0: 8192*4, about the 8k-token limit of most
	// hosted models. Servers with a shorter limit truncate themselves
	// (text-embeddings-inference, Ollama) or need a smaller value.
	MaxChars int
	// QueryPrefix and PassagePrefix are prepended to texts of that kind
	// (for example "query: " and "passage: " for e5 models).
	QueryPrefix, PassagePrefix string
	// Client is the HTTP client (default: a client of its own).
	Client *http.Client
}

// Embedder is the driver. It is safe for concurrent use.
type Embedder struct {
	o    Options
	url  string
	key  string
	dim  int
	sem  chan struct{}
	rand func() float64
}

var _ embed.Embedder = (*Embedder)(nil)

// New returns a driver for o. If o.Dim is 0 it embeds one probe text to
// learn the dimension, so a wrong URL, model or key fails here.
func New(ctx context.Context, o Options) (*Embedder, error) {
	if o.URL == "" || o.Model == "" {
		return nil, errors.New("openai embedder: URL and model are required")
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 64
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = 5
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 250 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(20*time.Second, o.MinBackoff)
	}
	if o.MaxChars <= 0 {
		o.MaxChars = 8192 * 4
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	e := &Embedder{o: o, url: endpoint(o.URL), dim: o.Dim, sem: make(chan struct{}, o.Concurrency), rand: rand.Float64}
	env := o.KeyEnv
	if env == "" {
		env = DefaultKeyEnv
		if os.Getenv(env) == "" {
			env = "OPENAI_API_KEY"
		}
	}
	e.key = os.Getenv(env)
	if e.dim == 0 {
		v, err := e.post(ctx, []string{"dimension probe"})
		if err != nil {
			return nil, fmt.Errorf("openai embedder %s at %s: probing the dimension: %w", o.Model, redact(o.URL), err)
		}
		e.dim = len(v[0])
		if e.dim == 0 {
			return nil, fmt.Errorf("openai embedder %s: the server answered an empty vector", o.Model)
		}
	}
	return e, nil
}

func endpoint(base string) string {
	base = strings.TrimRight(base, "/")
	u, q, _ := strings.Cut(base, "?")
	switch {
	case strings.HasSuffix(u, "/embeddings"):
	case strings.HasSuffix(u, "/v1"):
		u += "/embeddings"
	default:
		u += "/v1/embeddings"
	}
	if q != "" {
		u += "?" + q
	}
	return u
}

// Dim is the vector length.
func (e *Embedder) Dim() int { return e.dim }

// Model is the model name sent to the server.
func (e *Embedder) Model() string { return e.o.Model }

// Close drops idle connections.
func (e *Embedder) Close() error {
	e.o.Client.CloseIdleConnections()
	return nil
}

// Embed embeds texts in batches of at most MaxBatch, up to Concurrency
// requests at once; the first error cancels the rest.
func (e *Embedder) Embed(ctx context.Context, texts []string, kind embed.Kind) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(texts) == 0 {
		return [][]float32{}, nil
	}
	prefix := e.o.PassagePrefix
	if kind == embed.Query {
		prefix = e.o.QueryPrefix
	}
	in := make([]string, len(texts))
	for i, t := range texts {
		t = prefix + t
		if strings.TrimSpace(t) == "" {
			t = " " // servers reject empty strings; a space embeds as "nothing"
		}
		in[i] = codectx.Clip(t, e.o.MaxChars)
	}
	out := make([][]float32, len(texts))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error)
	n := 0
	for lo := 0; lo < len(in); lo += e.o.MaxBatch {
		hi := min(lo+e.o.MaxBatch, len(in))
		n++
		go func() {
			select {
			case e.sem <- struct{}{}:
			case <-ctx.Done():
				done <- context.Cause(ctx)
				return
			}
			if ctx.Err() != nil { // select picks at random when both are ready
				<-e.sem
				done <- context.Cause(ctx)
				return
			}
			v, err := e.post(ctx, in[lo:hi])
			if err != nil {
				cancel(err) // before the slot is freed, so no batch starts after it
			} else {
				copy(out[lo:hi], v)
			}
			<-e.sem
			done <- err
		}()
	}
	var first error
	for range n {
		if err := <-done; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		first = context.Cause(ctx) // the batch that failed first, not one it canceled
		return nil, fmt.Errorf("openai embedder %s: %w", e.o.Model, first)
	}
	return out, nil
}

type request struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format,omitempty"`
	Dimensions     int      `json:"dimensions,omitempty"`
}

type response struct {
	Data []struct {
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
}

// StatusError is an answer the server refused with.
type StatusError struct {
	Status int
	// Message is the server's error message (or the start of its body).
	Message string
	// RetryAfter is the wait the server asked for, if any.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("server answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// Is makes an answer refusing the request's input (400, 413, 422) match
// embed.ErrRejected.
func (e *StatusError) Is(target error) bool {
	return target == embed.ErrRejected && (e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge || e.Status == http.StatusUnprocessableEntity)
}

func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500
}

// post sends one batch, retrying what can be retried.
func (e *Embedder) post(ctx context.Context, texts []string) ([][]float32, error) {
	body, err := json.Marshal(request{Model: e.o.Model, Input: texts, EncodingFormat: "float", Dimensions: e.o.Dimensions})
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		v, err := e.attempt(ctx, body, len(texts))
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		var se *StatusError
		isStatus := errors.As(err, &se)
		if (isStatus && !retryable(se.Status)) || errors.Is(err, embed.ErrDim) || errors.Is(err, errDecode) {
			return nil, err
		}
		if attempt >= e.o.MaxRetries {
			return nil, fmt.Errorf("after %d attempts: %w", attempt+1, err)
		}
		wait := e.backoff(attempt)
		if isStatus && se.RetryAfter > 0 {
			wait = min(se.RetryAfter, 3*e.o.MaxBackoff)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		}
	}
}

// backoff is full jitter over an exponentially growing window:
// uniform in [0, min(MaxBackoff, MinBackoff*2^attempt)], at least MinBackoff/2.
func (e *Embedder) backoff(attempt int) time.Duration {
	window := float64(e.o.MinBackoff) * math.Pow(2, float64(attempt))
	window = min(window, float64(e.o.MaxBackoff))
	return time.Duration(max(window*e.rand(), float64(e.o.MinBackoff)/2))
}

var errDecode = errors.New("undecodable answer")

func (e *Embedder) attempt(ctx context.Context, body []byte, n int) ([][]float32, error) {
	ctx, cancel := context.WithTimeout(ctx, e.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if e.key != "" {
		req.Header.Set("Authorization", "Bearer "+e.key)
	}
	resp, err := e.o.Client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && ctx.Err() != nil {
			return nil, fmt.Errorf("request timed out after %v", e.o.Timeout)
		}
		return nil, err // net/http leaves any password in the URL out
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("reading the answer timed out after %v", e.o.Timeout)
		}
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{Status: resp.StatusCode, Message: errMessage(data), RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	}
	var r response
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", errDecode, err)
	}
	if len(r.Data) != n {
		return nil, fmt.Errorf("%w: %d vectors for %d texts", errDecode, len(r.Data), n)
	}
	out := make([][]float32, n)
	for _, d := range r.Data {
		if d.Index < 0 || d.Index >= n || out[d.Index] != nil {
			return nil, fmt.Errorf("%w: bad or repeated index %d", errDecode, d.Index)
		}
		v, err := vector(d.Embedding)
		if err != nil {
			return nil, fmt.Errorf("%w: item %d: %v", errDecode, d.Index, err)
		}
		if e.dim != 0 && len(v) != e.dim {
			return nil, fmt.Errorf("%w: model %s gave %d dimensions, want %d", embed.ErrDim, e.o.Model, len(v), e.dim)
		}
		out[d.Index] = v
	}
	return out, nil
}

// vector decodes an embedding given as a JSON array of numbers or, as some
// servers answer regardless of encoding_format, base64 little-endian float32.
func vector(raw json.RawMessage) ([]float32, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b)%4 != 0 {
			return nil, errors.New("bad base64 embedding")
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v, nil
	}
	var v []float32
	err := json.Unmarshal(raw, &v)
	return v, err
}

// errMessage pulls the message out of an OpenAI-style error body
// ({"error":{"message":...}}, {"error":"..."}, TEI's {"error":...,"error_type":...})
// or returns the body's start.
func errMessage(body []byte) string {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &v) == nil && len(v.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(v.Error, &obj) == nil && obj.Message != "" {
			return obj.Message
		}
		var s string
		if json.Unmarshal(v.Error, &s) == nil && s != "" {
			return s
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 300 {
		s = codectx.Clip(s, 300) + "…"
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(h, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// redact drops user info (a key someone put in the URL) from a URL.
func redact(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	host, path, _ := strings.Cut(rest, "/")
	if i := strings.LastIndex(host, "@"); i >= 0 {
		host = "***@" + host[i+1:]
	}
	if path != "" {
		return scheme + "://" + host + "/" + path
	}
	return scheme + "://" + host
}
