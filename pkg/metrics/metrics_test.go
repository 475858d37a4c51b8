package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"codectx/pkg/queue"
)

// scrape returns the text exposition of m.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

func wantLines(t *testing.T, body string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(body, "\n"+l+"\n") {
			t.Errorf("/metrics lacks line %q", l)
		}
	}
}

func TestWrapCountsItemsAndFailures(t *testing.T) {
	m := New()
	fail := errors.New("boom")
	h := m.Wrap("parse", func(_ context.Context, msg queue.Message) error {
		if string(msg.Data) == "bad" {
			return fail
		}
		return nil
	})
	for _, d := range []string{"ok", "ok", "bad"} {
		if err := h(context.Background(), queue.Message{Data: []byte(d)}); (err != nil) != (d == "bad") {
			t.Fatalf("handler(%q) err = %v", d, err)
		}
	}
	wantLines(t, scrape(t, m),
		`codectx_items_total{stage="parse"} 2`,
		`codectx_failures_total{stage="parse"} 1`,
		`codectx_stage_seconds_count{stage="parse"} 3`)
}

func TestWatchLagAndQueueStats(t *testing.T) {
	m := New()
	m.QueueStats(func() queue.Stats { return queue.Stats{Acked: 7, DeadLettered: 2} })
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.WatchLag(ctx, time.Hour, func(_ context.Context, stage string) (int, error) {
			defer func() { polled <- struct{}{} }()
			if stage == "graph" {
				return 0, errors.New("unreachable")
			}
			return 42, nil
		}, "parse", "graph")
	}()
	<-polled
	<-polled
	cancel()
	<-done
	srv := httptest.NewServer(m.Middleware("metrics", m.Handler()))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantLines(t, string(body),
		`codectx_queue_pending{stage="parse"} 42`,
		`codectx_queue_acked_total 7`,
		`codectx_queue_dead_lettered_total 2`)
	if strings.Contains(string(body), `stage="graph"`) {
		t.Errorf("/metrics has a lag for graph, whose poll failed")
	}
	wantLines(t, scrape(t, m), `codectx_http_requests_total{code="200",route="metrics"} 1`)
}

func TestItoa(t *testing.T) {
	for _, c := range []struct {
		in   int
		want string
	}{{200, "200"}, {404, "404"}, {503, "503"}, {0, "000"}} {
		if got := itoa(c.in); got != c.want {
			t.Errorf("itoa(%d) = %q, want %q", c.in, got, c.want)
		}
	}
}
