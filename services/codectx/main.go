// Command codectx is the code-context engine. One binary runs every role:
// `codectx index` builds the index of a repository, `codectx query` answers
// a question with a token-budgeted context, `codectx eval` measures
// retrieval quality on tasks mined from merged pull requests, `codectx up`
// runs the whole service in one process, and the role subcommands
// (orchestrator, parse-worker, graph-worker, embed-worker, query-service,
// gateway) run one part each against a real Temporal, NATS and S3.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "codectx:", err)
		}
		os.Exit(1)
	}
}

const usage = `codectx: a code-context engine for coding agents.

Usage:
  codectx up    [--data DIR] [--listen 127.0.0.1:7700] [--index PATH_OR_URL ...]
  codectx index [--data DIR | --server URL] [--name NAME] [--rev REV] [--json] PATH_OR_URL
  codectx query [--data DIR | --server URL] --repo NAME [--budget 8000] [--arms LIST] [--json] "text"
  codectx eval  --tasks FILE.jsonl --git-dir owner/name=PATH ... [--budgets LIST] [--json OUT]
  codectx gc    [--data DIR | --s3-endpoint HOST:PORT] [--dry-run] [--json]
  codectx mcp   [--data DIR | --server URL]    MCP server over stdio for a coding agent
  codectx bench-query --server URL --repo NAME[,NAME...] [--clients 8] [--requests 2000] [--json]
  codectx key   create --tenant T [--scope query|index|admin] | list | revoke ID

Roles (one part each, configured by flags or CODECTX_* environment variables):
  codectx orchestrator    Temporal worker of the indexing workflows
  codectx parse-worker    consumes the parse stage
  codectx graph-worker    consumes the graph stage, writes segments
  codectx embed-worker    consumes the embed stage (with --embedder)
  codectx query-service   HTTP query API over the published index
  codectx gateway         HTTP admin API: POST /v1/index, status

Run 'codectx COMMAND -h' for the flags of a command.
`

// run is the whole program; tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	// Everything codectx writes (clone caches, parse results, segments,
	// Temporal's database) holds tenants' source: readable by this user
	// only, whatever the caller's umask.
	syscall.Umask(0o077)
	switch args[0] {
	case "index":
		return runIndex(ctx, args[1:], stdout, stderr)
	case "query":
		return runQuery(ctx, args[1:], stdout, stderr)
	case "eval":
		return runEval(ctx, args[1:], stdout, stderr)
	case "up":
		return runUp(ctx, args[1:], stdout, stderr)
	case "gc":
		return runGC(ctx, args[1:], stdout, stderr)
	case "mcp":
		return runMCP(ctx, args[1:], stdout, stderr)
	case "bench-query":
		return runBenchQuery(ctx, args[1:], stdout, stderr)
	case "key":
		return runKey(ctx, args[1:], stdout, stderr)
	case "orchestrator":
		return orchestratorRole().run(ctx, args[1:], stdout, stderr)
	case "parse-worker":
		return parseWorkerRole().run(ctx, args[1:], stdout, stderr)
	case "graph-worker":
		return graphWorkerRole().run(ctx, args[1:], stdout, stderr)
	case "embed-worker":
		return embedWorkerRole().run(ctx, args[1:], stdout, stderr)
	case "query-service":
		return queryServiceRole().run(ctx, args[1:], stdout, stderr)
	case "gateway":
		return gatewayRole().run(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// dataDir returns the default data directory: $CODECTX_DATA or ./.codectx.
func dataDir() string {
	if d := os.Getenv("CODECTX_DATA"); d != "" {
		return d
	}
	return ".codectx"
}

// isTerminal reports whether w is a character device (an interactive terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
