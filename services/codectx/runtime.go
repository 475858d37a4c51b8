package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/pipeline"
	"codectx/pkg/queue/natsq"
	"codectx/pkg/ratelog"

	"github.com/nats-io/nats.go"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"
)

// deps holds the connections of a role as they come up, so that /healthz
// answers from the start and /readyz reports what is still missing.
type deps struct {
	log      *slog.Logger
	temporal atomic.Value // client.Client
	queue    atomic.Pointer[natsq.Queue]
	stopping atomic.Bool
	// namespace, when set, is checked to exist by the temporal readiness check.
	namespace string
}

func (d *deps) client() client.Client {
	c, _ := d.temporal.Load().(client.Client)
	return c
}

// checks returns the readiness probes of the dependencies in use, and of
// those connected but not needed (soft: the query service's sessions and
// notices of other servers' DELETEs), whose failure shows as degraded.
func (d *deps) checks(use, soft int) []api.Check {
	cs := []api.Check{{Name: "process", Local: true, Fn: func(context.Context) error {
		if d.stopping.Load() {
			return errors.New("shutting down")
		}
		return nil
	}}}
	if use&useTemporal != 0 {
		cs = append(cs, api.Check{Name: "temporal", Fn: func(ctx context.Context) error {
			c := d.client()
			if c == nil {
				return errors.New("connecting")
			}
			if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
				return err
			}
			if d.namespace == "" {
				return nil
			}
			// A namespace that does not exist makes every index request
			// fail: not ready.
			return namespaceUsable(ctx, c.WorkflowService(), d.namespace)
		}})
	}
	if (use|soft)&useNATS != 0 {
		cs = append(cs, api.Check{Name: "nats", Soft: use&useNATS == 0, Fn: func(ctx context.Context) error {
			q := d.queue.Load()
			if q == nil {
				return errors.New("connecting")
			}
			_, err := q.Pending(ctx, pipeline.StageParse)
			return err
		}})
	}
	return cs
}

// retry calls f until it succeeds or ctx ends, logging failures.
func retry[T any](ctx context.Context, log *slog.Logger, what string, f func(context.Context) (T, error)) (T, error) {
	for n := 0; ; n++ {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		v, err := f(actx)
		cancel()
		if err == nil {
			if n > 0 {
				log.Info("connected", "to", what)
			}
			return v, nil
		}
		if ctx.Err() != nil {
			return v, fmt.Errorf("connect to %s: %w", what, ctx.Err())
		}
		if n%10 == 0 {
			log.Warn("cannot connect, retrying", "to", what, "error", err)
		}
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("connect to %s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}

// dialTemporal connects to Temporal; tlsConfig is nil for a plaintext
// server, and the run's client certificate for the embedded one.
func dialTemporal(ctx context.Context, log *slog.Logger, hostPort, namespace string, tlsConfig *tls.Config) (client.Client, error) {
	return retry(ctx, log, "temporal "+hostPort, func(ctx context.Context) (client.Client, error) {
		return client.DialContext(ctx, client.Options{
			HostPort: hostPort, Namespace: namespace,
			Logger:            sdklog.NewStructuredLogger(slog.New(levelFilter{log.Handler(), slog.LevelWarn})),
			ConnectionOptions: client.ConnectionOptions{TLS: tlsConfig},
		})
	})
}

// ensureNamespace registers namespace on the Temporal server unless it
// exists. Several roles may race to register it: the loser's
// NamespaceAlreadyExists is success.
func ensureNamespace(ctx context.Context, log *slog.Logger, tc client.Client, namespace string, retention time.Duration) error {
	if retention < 24*time.Hour {
		return fmt.Errorf("namespace retention %v: Temporal requires at least 24h", retention)
	}
	ws := tc.WorkflowService()
	_, err := ws.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	var nf *serviceerror.NamespaceNotFound
	if err == nil || !errors.As(err, &nf) {
		if err != nil {
			return fmt.Errorf("describe namespace %s: %w", namespace, err)
		}
		return nil
	}
	_, err = ws.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        namespace,
		Description:                      "codectx indexing workflows",
		WorkflowExecutionRetentionPeriod: durationpb.New(retention),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace %s: %w", namespace, err)
	}
	if err == nil {
		log.Info("registered temporal namespace", "namespace", namespace, "retention", retention)
	}
	// A new namespace reaches the frontends' namespace caches within
	// seconds (Describe reads the database, other calls the cache): wait
	// until it is usable, so workers start on it.
	for {
		if namespaceUsable(ctx, ws, namespace) == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// namespaceUsable reports whether namespace exists and the frontend
// serves requests in it: DescribeNamespace for a clear error, then a
// one-row listing, which goes through the frontend's namespace cache as
// signals and polls do.
func namespaceUsable(ctx context.Context, ws workflowservice.WorkflowServiceClient, namespace string) error {
	if _, err := ws.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace}); err != nil {
		return fmt.Errorf("namespace %s: %w", namespace, err)
	}
	if _, err := ws.ListOpenWorkflowExecutions(ctx, &workflowservice.ListOpenWorkflowExecutionsRequest{Namespace: namespace, MaximumPageSize: 1}); err != nil {
		return fmt.Errorf("namespace %s: %w", namespace, err)
	}
	return nil
}

// connectNATS connects to NATS; tlsConfig is nil for a plaintext server.
func connectNATS(ctx context.Context, log *slog.Logger, url string, tlsConfig *tls.Config) (*natsq.Queue, error) {
	var opts []nats.Option
	if tlsConfig != nil {
		opts = append(opts, nats.Secure(tlsConfig))
	}
	// The URL may carry credentials (user:password@, token@): logs and
	// errors name the servers without them.
	return retry(ctx, log, "nats "+natsq.Redact(url), func(ctx context.Context) (*natsq.Queue, error) {
		return natsq.Connect(ctx, url, opts...)
	})
}

// levelFilter drops records below min (the SDK logs every poll at info).
type levelFilter struct {
	slog.Handler
	min slog.Level
}

func (h levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelFilter) WithAttrs(a []slog.Attr) slog.Handler {
	return levelFilter{h.Handler.WithAttrs(a), h.min}
}

func (h levelFilter) WithGroup(g string) slog.Handler {
	return levelFilter{h.Handler.WithGroup(g), h.min}
}

// httpServer serves h on a listener until shut down.
type httpServer struct {
	srv  *http.Server
	addr string // the bound address, port resolved
	done chan error
}

// Server timeouts (docs/security.md): a client has ReadHeaderTimeout to
// send its headers and the read timeout (--http-read-timeout) for the
// whole request, so a slow body cannot hold a connection; a response must
// be written within writeTimeout, and an idle keep-alive connection is
// closed after idleTimeout (each holds a file descriptor: connlimit.go).
const (
	readHeaderTimeout  = 10 * time.Second
	defaultReadTimeout = time.Minute
	writeTimeout       = 2 * time.Minute
	idleTimeout        = 30 * time.Second
)

// httpLimits are the bounds of the API's HTTP server.
type httpLimits struct {
	readTimeout time.Duration // zero: defaultReadTimeout
	conns       connLimits
	log         *slog.Logger // where connections refused by the per-address bound are logged (nil: nowhere)
}

func startHTTP(addr string, h http.Handler, lim httpLimits) (*httpServer, error) {
	nl, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	readTimeout := lim.readTimeout
	if readTimeout <= 0 {
		readTimeout = defaultReadTimeout
	}
	l := newLimitListener(nl, lim.conns)
	if lim.log != nil {
		l.refused = ratelog.New(lim.log, time.Minute)
	}
	s := &httpServer{
		srv: &http.Server{Handler: h, ReadHeaderTimeout: min(readHeaderTimeout, readTimeout), ReadTimeout: readTimeout,
			WriteTimeout: max(writeTimeout, readTimeout), IdleTimeout: idleTimeout, MaxHeaderBytes: 64 << 10,
			ConnState: l.connState},
		addr: nl.Addr().String(),
		done: make(chan error, 1),
	}
	go func() {
		err := s.srv.Serve(l)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s, nil
}

// URL is the base URL a local client reaches the server on.
func (s *httpServer) URL() string {
	host, port, _ := net.SplitHostPort(s.addr)
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// shutdown stops accepting requests and waits up to timeout for running ones.
func (s *httpServer) shutdown(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	if serr := <-s.done; serr != nil && err == nil {
		err = serr
	}
	return err
}

// group runs goroutines and collects their first error.
type group struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	err  error
	fail chan struct{} // closed on the first error
	once sync.Once
}

func newGroup() *group { return &group{fail: make(chan struct{})} }

func (g *group) goFunc(name string, f func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := f(); err != nil {
			g.mu.Lock()
			if g.err == nil {
				g.err = fmt.Errorf("%s: %w", name, err)
			}
			g.mu.Unlock()
			g.once.Do(func() { close(g.fail) })
		}
	}()
}

func (g *group) wait() error {
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}
