package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"codectx/pkg/embed"
	"codectx/pkg/embed/embedtest"
)

func newServer(t *testing.T) *embedtest.Server {
	t.Helper()
	s := embedtest.NewServer(64, "test-model")
	t.Cleanup(s.Close)
	return s
}

func newEmbedder(t *testing.T, o Options) *Embedder {
	t.Helper()
	if o.Model == "" {
		o.Model = "test-model"
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = time.Millisecond
		o.MaxBackoff = 20 * time.Millisecond
	}
	e, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestConformance(t *testing.T) {
	s := newServer(t)
	s.SetReverse(true)
	e := newEmbedder(t, Options{URL: s.URL, MaxBatch: 16})
	if e.Dim() != 64 {
		t.Fatalf("probed Dim = %d, want 64", e.Dim())
	}
	embedtest.Run(t, e)
	if st := s.Stats(); st.MaxBatch > 16 {
		t.Errorf("a request carried %d texts, MaxBatch is 16", st.MaxBatch)
	}
}

func TestEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"http://h:1":                 "http://h:1/v1/embeddings",
		"http://h:1/":                "http://h:1/v1/embeddings",
		"http://h:1/v1":              "http://h:1/v1/embeddings",
		"http://h:1/v1/embeddings":   "http://h:1/v1/embeddings",
		"http://h:1/openai/v1?k=a":   "http://h:1/openai/v1/embeddings?k=a",
		"https://h/api/x/embeddings": "https://h/api/x/embeddings",
	} {
		if got := endpoint(in); got != want {
			t.Errorf("endpoint(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestVectorsMatchServer(t *testing.T) {
	s := newServer(t)
	e := newEmbedder(t, Options{URL: s.URL + "/v1", Dim: 64, QueryPrefix: "query: "})
	v, err := e.Embed(context.Background(), []string{"alpha beta", "gamma"}, embed.Query)
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"query: alpha beta", "query: gamma"} {
		if c := embedtest.Cosine(v[i], embedtest.HashEmbed(text, 64)); c < 0.99999 {
			t.Errorf("vector %d is not the server's embedding of %q (cosine %.5f)", i, text, c)
		}
	}
	if st := s.Stats(); st.Requests != 1 || st.LastModel != "test-model" {
		t.Errorf("stats %+v, want one request for test-model (Dim given: no probe)", st)
	}
}

func TestBatching(t *testing.T) {
	s := newServer(t)
	e := newEmbedder(t, Options{URL: s.URL, Dim: 64, MaxBatch: 4})
	texts := make([]string, 10)
	for i := range texts {
		texts[i] = fmt.Sprintf("text number %d", i)
	}
	v, err := e.Embed(context.Background(), texts, embed.Passage)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 10 {
		t.Fatalf("%d vectors", len(v))
	}
	st := s.Stats()
	if st.Requests != 3 || st.MaxBatch != 4 || st.Inputs != 10 {
		t.Errorf("stats %+v, want 3 requests of at most 4 texts", st)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	s := newServer(t)
	s.SetDelay(20 * time.Millisecond)
	e := newEmbedder(t, Options{URL: s.URL, Dim: 64, MaxBatch: 1, Concurrency: 3})
	texts := make([]string, 12)
	for i := range texts {
		texts[i] = fmt.Sprintf("t%d", i)
	}
	var wg sync.WaitGroup
	for range 3 { // several callers share the one limit
		wg.Go(func() {
			if _, err := e.Embed(context.Background(), texts, embed.Passage); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	if st.MaxInFlight > 3 {
		t.Errorf("%d requests in flight, limit 3", st.MaxInFlight)
	}
	if st.MaxInFlight < 2 {
		t.Errorf("at most %d request in flight: batches are not sent concurrently", st.MaxInFlight)
	}
	if st.Requests != 36 {
		t.Errorf("%d requests, want 36", st.Requests)
	}
}

func TestRetry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults []embedtest.Fault
		// min wall time the retries must have waited
		minWait time.Duration
		// per-attempt timeout (0: 10s, ample for a loaded machine: a
		// normal answer must never time out and be counted twice)
		timeout time.Duration
	}{
		{"429 then ok", []embedtest.Fault{{Status: 429}}, 0, 0},
		{"500 502 503 then ok", []embedtest.Fault{{Status: 500}, {Status: 502}, {Status: 503}}, 0, 0},
		{"Retry-After seconds honoured", []embedtest.Fault{{Status: 429, RetryAfter: "0.3"}}, 300 * time.Millisecond, 0},
		{"Retry-After date honoured", []embedtest.Fault{{Status: 503, RetryAfter: "date"}}, 900 * time.Millisecond, 0},
		// The server holds the first answer until the client gives up.
		{"slow answer times out then ok", []embedtest.Fault{{Delay: 10 * time.Second}}, 2 * time.Second, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t)
			start := time.Now()
			if tc.faults[0].RetryAfter == "date" {
				// HTTP dates have whole seconds: 2s ahead is at least 1s ahead.
				tc.faults[0].RetryAfter = time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat)
			}
			s.Inject(tc.faults...)
			if tc.timeout == 0 {
				tc.timeout = 10 * time.Second
			}
			e := newEmbedder(t, Options{URL: s.URL, Dim: 64, Timeout: tc.timeout, MaxBackoff: 3 * time.Second, MinBackoff: time.Millisecond})
			v, err := e.Embed(context.Background(), []string{"retry me"}, embed.Passage)
			if err != nil {
				t.Fatal(err)
			}
			if len(v) != 1 || len(v[0]) != 64 {
				t.Fatalf("bad answer %d", len(v))
			}
			if took := time.Since(start); took < tc.minWait {
				t.Errorf("took %v, the server asked to wait %v", took, tc.minWait)
			}
			if st := s.Stats(); st.Requests != len(tc.faults)+1 {
				t.Errorf("%d requests, want %d", st.Requests, len(tc.faults)+1)
			}
		})
	}
}

func TestGivesUp(t *testing.T) {
	s := newServer(t)
	s.Inject(embedtest.Fault{Status: 500}, embedtest.Fault{Status: 500}, embedtest.Fault{Status: 500})
	e := newEmbedder(t, Options{URL: s.URL, Dim: 64, MaxRetries: 2})
	_, err := e.Embed(context.Background(), []string{"x"}, embed.Passage)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 500 {
		t.Fatalf("err = %v, want a StatusError 500", err)
	}
	if !strings.Contains(err.Error(), "after 3 attempts") || !strings.Contains(err.Error(), "injected fault 500") {
		t.Errorf("error %q should say the attempts and the server's message", err)
	}
	if st := s.Stats(); st.Requests != 3 {
		t.Errorf("%d requests, want 3", st.Requests)
	}
}

func TestNoRetryOnClientError(t *testing.T) {
	s := newServer(t)
	e := newEmbedder(t, Options{URL: s.URL, Dim: 64, Model: "no-such-model"})
	_, err := e.Embed(context.Background(), []string{"x"}, embed.Passage)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 404 || !strings.Contains(se.Message, `model "no-such-model" not found`) {
		t.Fatalf("err = %v, want the server's 404 message", err)
	}
	if st := s.Stats(); st.Requests != 1 {
		t.Errorf("%d requests: a 404 must not be retried", st.Requests)
	}
}

func TestDimCheck(t *testing.T) {
	s := newServer(t)
	e := newEmbedder(t, Options{URL: s.URL, Dim: 64})
	s.Inject(embedtest.Fault{WrongDim: 32})
	_, err := e.Embed(context.Background(), []string{"x"}, embed.Passage)
	if !errors.Is(err, embed.ErrDim) {
		t.Fatalf("err = %v, want ErrDim", err)
	}
	// An embedder told the wrong Dim fails on the first answer.
	e2 := newEmbedder(t, Options{URL: s.URL, Dim: 384})
	if _, err := e2.Embed(context.Background(), []string{"x"}, embed.Passage); !errors.Is(err, embed.ErrDim) {
		t.Fatalf("err = %v, want ErrDim", err)
	}
}

func TestAPIKey(t *testing.T) {
	s := newServer(t)
	s.Key = "sk-secret-123"
	t.Setenv("MY_KEY", "sk-secret-123")
	e := newEmbedder(t, Options{URL: s.URL, KeyEnv: "MY_KEY"})
	if _, err := e.Embed(context.Background(), []string{"x"}, embed.Passage); err != nil {
		t.Fatal(err)
	}
	t.Setenv(DefaultKeyEnv, "")
	t.Setenv("OPENAI_API_KEY", "sk-secret-123")
	if _, err := New(context.Background(), Options{URL: s.URL, Model: "test-model"}); err != nil {
		t.Fatalf("OPENAI_API_KEY fallback: %v", err)
	}
	t.Setenv(DefaultKeyEnv, "sk-wrong-456")
	_, err := New(context.Background(), Options{URL: s.URL, Model: "test-model"})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 401 {
		t.Fatalf("wrong key: err = %v, want 401", err)
	}
	if strings.Contains(err.Error(), "sk-wrong-456") {
		t.Errorf("the error shows the key: %v", err)
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	s := newServer(t)
	s.Inject(embedtest.Fault{Status: 429, RetryAfter: "30"})
	e := newEmbedder(t, Options{URL: s.URL, Dim: 64, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.Embed(ctx, []string{"x"}, embed.Passage)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Embed returned %v after its context ended", took)
	}
}

func TestFirstErrorStopsOthers(t *testing.T) {
	s := newServer(t)
	e := newEmbedder(t, Options{URL: s.URL, Dim: 64, MaxBatch: 1, Concurrency: 1})
	s.Inject(embedtest.Fault{Status: 400})
	texts := make([]string, 50)
	for i := range texts {
		texts[i] = "x"
	}
	if _, err := e.Embed(context.Background(), texts, embed.Passage); err == nil {
		t.Fatal("no error")
	}
	if st := s.Stats(); st.Requests > 5 {
		t.Errorf("%d requests sent after the first batch failed", st.Requests)
	}
}

func TestRetryAfterParse(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "2": 2 * time.Second, "0.5": 500 * time.Millisecond, "junk": 0, "-1": 0} {
		if got := retryAfter(in); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestBackoffGrowsAndIsBounded(t *testing.T) {
	e := &Embedder{o: Options{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}, rand: func() float64 { return 1 }}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := e.backoff(i); got != w*time.Millisecond {
			t.Errorf("backoff(%d) = %v, want %v", i, got, w*time.Millisecond)
		}
	}
	e.rand = func() float64 { return 0 }
	if got := e.backoff(3); got != 50*time.Millisecond {
		t.Errorf("jitter floor: %v", got)
	}
}

// BenchmarkDriver is the driver's own cost per request (JSON both ways,
// HTTP on loopback) against the in-test server, 16 chunk-sized texts per
// request, 384 dimensions.
func BenchmarkDriver(b *testing.B) {
	s := embedtest.NewServer(384, "test-model")
	defer s.Close()
	e, err := New(context.Background(), Options{URL: s.URL, Model: "test-model", Dim: 384, MaxBatch: 16})
	if err != nil {
		b.Fatal(err)
	}
	texts := make([]string, 16)
	for i := range texts {
		texts[i] = strings.Repeat(fmt.Sprintf("func f%d(x int) int { return x * %d }\n", i, i), 20)
	}
	for b.Loop() {
		if _, err := e.Embed(context.Background(), texts, embed.Passage); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "texts/s")
}
