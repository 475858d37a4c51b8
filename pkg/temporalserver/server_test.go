package temporalserver

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

const taskQueue = "temporalserver-test"

// waitSignal completes with the value of the "go" signal.
func waitSignal(ctx workflow.Context) (string, error) {
	var v string
	workflow.GetSignalChannel(ctx, "go").Receive(ctx, &v)
	return "got " + v, nil
}

func echo(_ workflow.Context, s string) (string, error) { return s, nil }

func startServer(t *testing.T, ctx context.Context, dir string) (*Server, client.Client, worker.Worker) {
	t.Helper()
	s, err := Start(ctx, Config{DataDir: dir})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	c, err := client.DialContext(ctx, s.ClientOptions(client.Options{Namespace: s.Namespace(), Logger: quiet{}}))
	if err != nil {
		s.Stop()
		t.Fatalf("dial: %v", err)
	}
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(waitSignal)
	w.RegisterWorkflow(echo)
	if err := w.Start(); err != nil {
		c.Close()
		s.Stop()
		t.Fatalf("worker: %v", err)
	}
	return s, c, w
}

func stop(s *Server, c client.Client, w worker.Worker) {
	w.Stop()
	c.Close()
	s.Stop()
}

func TestRestartKeepsState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()

	s, c, w := startServer(t, ctx, dir)
	// A trivial workflow runs to completion.
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "echo", TaskQueue: taskQueue}, echo, "hello")
	if err != nil {
		stop(s, c, w)
		t.Fatalf("execute echo: %v", err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "hello" {
		stop(s, c, w)
		t.Fatalf("echo = %q, %v; want hello", got, err)
	}
	// The database is in write-ahead-log mode (the log sits beside it).
	if _, err := os.Stat(filepath.Join(dir, DBFile+"-wal")); err != nil {
		stop(s, c, w)
		t.Fatalf("no write-ahead log: %v", err)
	}
	// A second server on the same dir is refused while the first runs.
	if s2, err := Start(ctx, Config{DataDir: dir}); !errors.Is(err, ErrLocked) {
		if s2 != nil {
			s2.Stop()
		}
		stop(s, c, w)
		t.Fatalf("second Start on the same dir: err = %v, want ErrLocked", err)
	}
	// This one waits for a signal across the restart.
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "waiter", TaskQueue: taskQueue}, waitSignal); err != nil {
		stop(s, c, w)
		t.Fatalf("start waiter: %v", err)
	}
	stop(s, c, w)

	s, c, w = startServer(t, ctx, dir)
	defer stop(s, c, w)
	if _, err := c.WorkflowService().DescribeNamespace(ctx, describe("default")); err != nil {
		t.Fatalf("namespace after restart: %v", err)
	}
	desc, err := c.DescribeWorkflowExecution(ctx, "waiter", "")
	if err != nil {
		t.Fatalf("describe waiter after restart: %v", err)
	}
	if st := desc.WorkflowExecutionInfo.Status; st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("waiter status after restart = %v, want Running", st)
	}
	if err := c.SignalWorkflow(ctx, "waiter", "", "go", "now"); err != nil {
		t.Fatalf("signal: %v", err)
	}
	if err := c.GetWorkflow(ctx, "waiter", "").Get(ctx, &got); err != nil || got != "got now" {
		t.Fatalf("waiter = %q, %v; want %q", got, err, "got now")
	}
	// The finished echo run is still in the history after the restart.
	if err := c.GetWorkflow(ctx, "echo", "").Get(ctx, &got); err != nil || got != "hello" {
		t.Fatalf("echo after restart = %q, %v; want hello", got, err)
	}
}

func TestStartNeedsDataDir(t *testing.T) {
	if _, err := Start(context.Background(), Config{}); err == nil {
		t.Fatal("Start with no DataDir succeeded")
	}
}

// Without the run's client certificate the frontend does not answer:
// neither plaintext nor TLS without a certificate nor another run's
// (TestInternodeRefusesStrangers checks the other ports).
func TestRefusesClientsWithoutTheRunCertificate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, c, w := startServer(t, ctx, t.TempDir())
	defer stop(s, c, w)
	if _, err := c.WorkflowService().DescribeNamespace(ctx, describe(s.Namespace())); err != nil {
		t.Fatalf("the run's client: %v", err)
	}
	other, err := newRunTLS("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	noCert := s.ClientTLS()
	noCert.Certificates = nil
	for name, tc := range map[string]*tls.Config{
		"plaintext":          nil,
		"TLS without a cert": noCert,
		"another run's cert": other.client,
	} {
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		bad, err := client.DialContext(dctx, client.Options{HostPort: s.HostPort(), Namespace: s.Namespace(), Logger: quiet{},
			ConnectionOptions: client.ConnectionOptions{TLS: tc}})
		if err == nil {
			_, err = bad.WorkflowService().DescribeNamespace(dctx, describe(s.Namespace()))
			bad.Close()
		}
		dcancel()
		if err == nil {
			t.Errorf("%s: the frontend answered", name)
		}
	}
}

// The internode ports (history, matching, worker) take the same mutual
// TLS: a plaintext or certificate-less client gets no answer from them.
func TestInternodeRefusesStrangers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ports Ports
	for _, p := range []*int{&ports.History, &ports.Matching, &ports.Worker} {
		free, err := FreePort("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		*p = free
	}
	s, err := Start(ctx, Config{DataDir: t.TempDir(), Ports: ports})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	noCert := s.ClientTLS()
	noCert.Certificates = nil
	for _, port := range []int{ports.History, ports.Matching, ports.Worker} {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		for name, creds := range map[string]credentials.TransportCredentials{
			"plaintext":          insecure.NewCredentials(),
			"TLS without a cert": credentials.NewTLS(noCert),
		} {
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
			if err != nil {
				t.Fatal(err)
			}
			hctx, hcancel := context.WithTimeout(ctx, 3*time.Second)
			_, err = healthpb.NewHealthClient(conn).Check(hctx, &healthpb.HealthCheckRequest{})
			hcancel()
			conn.Close()
			if err == nil {
				t.Errorf("port %d answered a %s client", port, name)
			}
		}
		// The run's certificate is what they want: the same call gets an
		// answer (an error of the service is fine, not of the transport).
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(s.ClientTLS())))
		if err != nil {
			t.Fatal(err)
		}
		hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = healthpb.NewHealthClient(conn).Check(hctx, &healthpb.HealthCheckRequest{})
		hcancel()
		conn.Close()
		if code := status.Code(err); code == codes.Unavailable || code == codes.DeadlineExceeded {
			t.Errorf("port %d with the run's certificate: %v", port, err)
		}
	}
}
