// Package temporalserver runs a persistent Temporal server inside the
// codectx process: the embedded default of `codectx up`. State lives in one
// SQLite file under the data directory, so workflows that were running when
// the process stopped resume when it starts again on the same directory.
//
// It is the only package of codectx that imports go.temporal.io/server (a
// large dependency); everything else talks to Temporal through the SDK.
package temporalserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

// DBFile is the SQLite file under the data directory. SQLite keeps
// DBFile-wal and DBFile-shm beside it: back up all three.
const DBFile = "temporal.db"

// LogFile is where the server's own log goes, under the data directory.
const LogFile = "temporal.log"

const clusterName = "active"

// ErrLocked is returned (wrapped) by Start when another process holds the
// data directory.
var ErrLocked = errors.New("data dir in use by another codectx process")

// Ports are the gRPC ports of the four services; 0 picks a free port.
type Ports struct {
	Frontend, History, Matching, Worker int
}

// Config configures an embedded server.
type Config struct {
	DataDir   string // required; created if missing
	Host      string // address to bind; default 127.0.0.1
	Ports     Ports
	Namespace string // created at start if missing; default "default"
	LogLevel  string // server log level (debug, info, warn, error); default warn
	// TLS replaces the run's own certificate authority (made at start, held
	// only in memory) with an operator's: a server other processes dial.
	TLS *TLS
}

// TLS is the mutual TLS of every port: Server is what the ports present
// (it should require client certificates), Client what the services
// present to each other.
type TLS struct{ Server, Client *tls.Config }

// Server is a running embedded Temporal server.
type Server struct {
	srv       temporal.Server
	tls       *runTLS
	hostPort  string
	namespace string
	unlock    func()
	stopOnce  sync.Once
	stopErr   error
}

// Start opens (or creates) the server state under cfg.DataDir and starts
// the frontend, history, matching and worker services. It returns once the
// frontend answers for the namespace, or ctx ends.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("temporalserver: no data dir")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "warn"
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("temporalserver: %w", err)
	}
	unlock, err := lockDir(filepath.Join(cfg.DataDir, "temporal.lock"))
	if err != nil {
		return nil, fmt.Errorf("temporalserver: %s: %w", cfg.DataDir, err)
	}
	var s *Server
	for try := 1; ; try++ {
		s, err = start(ctx, cfg)
		var f startFatal
		if err == nil || !errors.As(err, &f) || cfg.Ports != (Ports{}) || try == 3 {
			break
		}
		// A picked port was taken between the pick and Temporal's bind:
		// pick others. (The services the failed attempt had built are not
		// torn down: Temporal offers no way to stop a server it failed to
		// build; their few listeners are the cost of the retry.)
	}
	if err != nil {
		unlock()
		return nil, err
	}
	s.unlock = unlock
	return s, nil
}

func start(ctx context.Context, cfg Config) (s *Server, err error) {
	ports := []*int{&cfg.Ports.Frontend, &cfg.Ports.History, &cfg.Ports.Matching, &cfg.Ports.Worker}
	for _, p := range ports {
		if *p == 0 {
			free, err := pickPort(cfg.Host)
			if err != nil {
				return nil, fmt.Errorf("temporalserver: pick port: %w", err)
			}
			*p = free
		}
	}
	addr := func(port int) string { return net.JoinHostPort(cfg.Host, strconv.Itoa(port)) }
	front := addr(cfg.Ports.Frontend)

	dbPath := filepath.Join(cfg.DataDir, DBFile)
	sqlCfg := &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: dbPath,
		// Write-ahead logging: a transaction (each workflow task,
		// activity or signal the server records) appends to the log and
		// syncs it once, instead of writing, syncing and deleting a
		// rollback journal and syncing the database; synchronous=full
		// keeps every committed transaction across a power loss. A
		// one-file push records about twenty. A database made before
		// switches on its first open.
		ConnectAttributes: map[string]string{"mode": "rwc", "journal_mode": "wal", "synchronous": "full"},
	}
	if _, err := os.Stat(dbPath); errors.Is(err, os.ErrNotExist) {
		if err := sqlite.SetupSchema(sqlCfg); err != nil {
			os.Remove(dbPath)
			return nil, fmt.Errorf("temporalserver: set up schema in %s: %w", dbPath, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("temporalserver: %w", err)
	}
	ns, err := sqlite.NewNamespaceConfig(clusterName, cfg.Namespace, false, nil)
	if err != nil {
		return nil, fmt.Errorf("temporalserver: namespace %s: %w", cfg.Namespace, err)
	}
	if err := sqlite.CreateNamespaces(sqlCfg, ns); err != nil {
		return nil, fmt.Errorf("temporalserver: create namespace %s: %w", cfg.Namespace, err)
	}

	svc := func(port int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: cfg.Host}}
	}
	conf := &config.Config{
		Global: config.Global{Membership: config.Membership{BroadcastAddress: cfg.Host}},
		Persistence: config.Persistence{
			DefaultStore:     sqliteplugin.PluginName,
			VisibilityStore:  sqliteplugin.PluginName,
			NumHistoryShards: 1,
			DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlCfg}},
		},
		ClusterMetadata: &cluster.Config{
			FailoverVersionIncrement: 10,
			MasterClusterName:        clusterName,
			CurrentClusterName:       clusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{
				clusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: front},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			"frontend": svc(cfg.Ports.Frontend),
			"history":  svc(cfg.Ports.History),
			"matching": svc(cfg.Ports.Matching),
			"worker":   svc(cfg.Ports.Worker),
		},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
		PublicClient: config.PublicClient{HostPort: front},
	}

	rt := &runTLS{}
	if cfg.TLS != nil {
		rt.server, rt.client = cfg.TLS.Server, cfg.TLS.Client
	} else if rt, err = newRunTLS(cfg.Host); err != nil {
		return nil, fmt.Errorf("temporalserver: run certificates: %w", err)
	}
	// While the server is built and started, a Fatal log call (a port
	// that cannot be bound) is an error of start, not an exit of the
	// process.
	building := new(atomic.Bool)
	building.Store(true)
	defer building.Store(false)
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(startFatal)
			if !ok {
				panic(r)
			}
			s, err = nil, fmt.Errorf("temporalserver: start: %w", f)
		}
	}()
	var logger log.Logger = fatalLogger{Logger: log.NewZapLogger(log.BuildZapLogger(log.Config{
		Level:      cfg.LogLevel,
		OutputFile: filepath.Join(cfg.DataDir, LogFile),
	})), building: building}
	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("temporalserver: authorizer: %w", err)
	}
	claims, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("temporalserver: claim mapper: %w", err)
	}
	hosts := map[primitives.ServiceName]static.Hosts{
		primitives.FrontendService: static.SingleLocalHost(front),
		primitives.HistoryService:  static.SingleLocalHost(addr(cfg.Ports.History)),
		primitives.MatchingService: static.SingleLocalHost(addr(cfg.Ports.Matching)),
		primitives.WorkerService:   static.SingleLocalHost(addr(cfg.Ports.Worker)),
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claims }),
		temporal.WithDynamicConfigClient(DynamicConfig()),
		temporal.WithTLSConfigFactory(rt.provider()),
	)
	if err != nil {
		return nil, fmt.Errorf("temporalserver: new server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("temporalserver: start: %w", err)
	}
	s = &Server{srv: srv, tls: rt, hostPort: front, namespace: cfg.Namespace}
	if err := s.waitReady(ctx); err != nil {
		srv.Stop()
		return nil, err
	}
	return s, nil
}

// DynamicConfig is the server's dynamic configuration: the defaults of
// the Temporal server, which are sized for a cluster of many history
// shards, except where they hurt a single process with one shard.
//
// history.transferProcessorMaxPollRPS (default 20) caps how often the
// transfer queue of one shard reads new tasks from persistence, and the
// reader waits for a token before every read. With NumHistoryShards 1
// every transfer task of the server (start a child workflow, record its
// completion in the parent, dispatch a workflow or activity task to
// matching) goes through that one reader, so once the burst of 20 tokens
// is spent each read waits up to 50 ms for the next token. A push takes
// two reads between the parent's ExecuteChildWorkflow and the child's
// first workflow task, and two more from the child's return to the parent
// seeing it: about 100 ms each, after the first few pushes (issue 12).
// The host-wide cap on queue reads (history.transferProcessorMaxPollHostRPS,
// by default 30% of history.persistenceMaxQPS, i.e. 2700 reads a second)
// still protects SQLite; one shard's limit is set to the same order, so
// a read never waits behind the shard's own limit in practice.
func DynamicConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		dynamicconfig.TransferProcessorMaxPollRPS.Key(): 1000,
	}
}

// waitReady dials the frontend until the namespace can be described.
func (s *Server) waitReady(ctx context.Context) error {
	var last error
	for {
		c, err := client.DialContext(ctx, s.ClientOptions(client.Options{Namespace: s.namespace, Logger: quiet{}}))
		if err == nil {
			_, err = c.WorkflowService().DescribeNamespace(ctx, describe(s.namespace))
			c.Close()
			if err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("temporalserver: frontend %s not ready: %w (last error: %v)", s.hostPort, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// HostPort is the frontend address for SDK clients (client.Options.HostPort).
func (s *Server) HostPort() string { return s.hostPort }

// ClientTLS is the TLS config an SDK client needs to connect: the run's
// client certificate and CA. Every port of the server refuses a client
// without it.
func (s *Server) ClientTLS() *tls.Config { return s.tls.client.Clone() }

// ClientOptions returns o with the address and TLS of this server set.
func (s *Server) ClientOptions(o client.Options) client.Options {
	o.HostPort = s.hostPort
	o.ConnectionOptions.TLS = s.ClientTLS()
	return o
}

// Namespace is the namespace created at start.
func (s *Server) Namespace() string { return s.namespace }

// Stop stops the services and releases the data directory. Stop SDK
// workers first: a worker polling a stopped server logs errors until it
// gives up. Calling Stop twice is harmless.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.stopErr = s.srv.Stop()
		if s.unlock != nil {
			s.unlock()
		}
	})
	return s.stopErr
}
