// Package metrics holds the Prometheus metrics of a codectx process: work
// items handled and failed per pipeline stage, stage latencies, queue lag
// and HTTP requests, on one registry exposed at /metrics.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"codectx/pkg/queue"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the registry of one process and its collectors.
type Metrics struct {
	Registry *prometheus.Registry

	Items        *prometheus.CounterVec   // codectx_items_total{stage}: work items done
	Failures     *prometheus.CounterVec   // codectx_failures_total{stage}: work items that failed (retried or dead-lettered)
	StageSeconds *prometheus.HistogramVec // codectx_stage_seconds{stage}: time per work item
	QueueLag     *prometheus.GaugeVec     // codectx_queue_pending{stage}: messages published and not yet done
	Requests     *prometheus.CounterVec   // codectx_http_requests_total{route,code}
	HTTPSeconds  *prometheus.HistogramVec // codectx_http_request_seconds{route}
	StaleHeads   prometheus.Counter       // codectx_stale_head_answers_total: answers from the last known HEAD while the store was unavailable
}

// New returns a registry with the codectx metrics and the Go runtime and
// process collectors.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		Items: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "codectx_items_total", Help: "Work items handled successfully, per stage.",
		}, []string{"stage"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "codectx_failures_total", Help: "Work items whose handler failed, per stage.",
		}, []string{"stage"}),
		StageSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "codectx_stage_seconds", Help: "Time to handle one work item, per stage.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1ms .. ~4.4min
		}, []string{"stage"}),
		QueueLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "codectx_queue_pending", Help: "Messages published to a stage and not yet done.",
		}, []string{"stage"}),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "codectx_http_requests_total", Help: "HTTP requests, per route and status code.",
		}, []string{"route", "code"}),
		HTTPSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "codectx_http_request_seconds", Help: "HTTP request latency, per route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9), // 0.5ms .. ~33s
		}, []string{"route"}),
		StaleHeads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "codectx_stale_head_answers_total", Help: "Repositories answered from the last known HEAD because the store could not be read.",
		}),
	}
	r.MustRegister(m.Items, m.Failures, m.StageSeconds, m.QueueLag, m.Requests, m.HTTPSeconds, m.StaleHeads,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// Observe records one work item of stage that took since start.
func (m *Metrics) Observe(stage string, start time.Time, err error) {
	m.StageSeconds.WithLabelValues(stage).Observe(time.Since(start).Seconds())
	if err != nil {
		m.Failures.WithLabelValues(stage).Inc()
		return
	}
	m.Items.WithLabelValues(stage).Inc()
}

// Wrap returns a queue handler that records every message h handles.
func (m *Metrics) Wrap(stage string, h queue.Handler) queue.Handler {
	return func(ctx context.Context, msg queue.Message) (err error) {
		start := time.Now()
		defer func() { m.Observe(stage, start, err) }()
		return h(ctx, msg)
	}
}

// QueueStats exports a queue client's counters (acked, retried, panics,
// dead-lettered) as codectx_queue_<name>_total, read at scrape time. Use it
// where the handlers cannot be wrapped.
func (m *Metrics) QueueStats(stats func() queue.Stats) {
	counter := func(name, help string, get func(queue.Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "codectx_queue_" + name + "_total", Help: help},
			func() float64 { return float64(get(stats())) })
	}
	m.Registry.MustRegister(
		counter("acked", "Messages whose handler succeeded (all stages of this process).", func(s queue.Stats) int64 { return s.Acked }),
		counter("retried", "Messages whose handler failed and were redelivered later.", func(s queue.Stats) int64 { return s.Retried }),
		counter("panics", "Handler panics (also counted as retried or dead-lettered).", func(s queue.Stats) int64 { return s.Panics }),
		counter("dead_lettered", "Messages moved to the dead-letter queue.", func(s queue.Stats) int64 { return s.DeadLettered }),
	)
}

// CacheStats is what a segment cache reports.
type CacheStats struct {
	Segments     int
	Bytes        int64 // sum of the loaded segments' sizes: HeapBytes + MappedBytes
	HeapBytes    int64 // of Bytes, held in the Go heap
	MappedBytes  int64 // of Bytes, resident pages of mapped shard files
	Budget       int64
	Hits, Misses int64
}

// SegmentCache exports the query API's segment cache: loaded segments and
// their bytes beside the budget, hits and misses (loads).
func (m *Metrics) SegmentCache(stats func() CacheStats) {
	gauge := func(name, help string, get func(CacheStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "codectx_segment_cache_" + name, Help: help}, func() float64 { return get(stats()) })
	}
	counter := func(name, help string, get func(CacheStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "codectx_segment_cache_" + name + "_total", Help: help},
			func() float64 { return float64(get(stats())) })
	}
	m.Registry.MustRegister(
		gauge("segments", "Segments loaded in the query API's cache.", func(s CacheStats) float64 { return float64(s.Segments) }),
		gauge("bytes", "Bytes the loaded segments hold: in the heap plus resident pages of mapped shard files.", func(s CacheStats) float64 { return float64(s.Bytes) }),
		gauge("heap_bytes", "Of the loaded segments' bytes, those in the Go heap (estimated).", func(s CacheStats) float64 { return float64(s.HeapBytes) }),
		gauge("mapped_bytes", "Of the loaded segments' bytes, the pages of mapped shard files resident in the process.", func(s CacheStats) float64 { return float64(s.MappedBytes) }),
		gauge("budget_bytes", "The cache's budget (--cache-bytes).", func(s CacheStats) float64 { return float64(s.Budget) }),
		counter("hits", "Segment lookups answered from the cache.", func(s CacheStats) int64 { return s.Hits }),
		counter("misses", "Segment lookups that loaded the segment from the store.", func(s CacheStats) int64 { return s.Misses }),
	)
}

// PendingFunc returns the lag of a stage (natsq.Queue.Pending).
type PendingFunc func(ctx context.Context, stage string) (int, error)

// WatchLag sets QueueLag for each stage from pending every interval until
// ctx ends. Errors are logged at debug level and leave the last value.
func (m *Metrics) WatchLag(ctx context.Context, interval time.Duration, pending PendingFunc, stages ...string) {
	poll := func() {
		for _, st := range stages {
			pctx, cancel := context.WithTimeout(ctx, interval)
			n, err := pending(pctx, st)
			cancel()
			if err != nil {
				slog.Debug("queue lag", "stage", st, "error", err)
				continue
			}
			m.QueueLag.WithLabelValues(st).Set(float64(n))
		}
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		poll()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Middleware records count and latency of the requests next serves under
// the route label route.
func (m *Metrics) Middleware(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		m.HTTPSeconds.WithLabelValues(route).Observe(time.Since(start).Seconds())
		m.Requests.WithLabelValues(route, itoa(sw.code)).Inc()
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// flushes) through the wrapper.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func itoa(code int) string {
	if code < 100 || code > 999 {
		return "000"
	}
	return string([]byte{byte('0' + code/100), byte('0' + code/10%10), byte('0' + code%10)})
}
