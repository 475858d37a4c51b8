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
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.As(err, new(reported)) {
			printError(os.Stderr, err)
		}
		os.Exit(1)
	}
}

// printError writes err for a terminal: its message can hold a
// repository's file names and a server's last error, so control
// characters are shown escaped (termSafe), as in query's text output.
func printError(w io.Writer, err error) {
	fmt.Fprintln(w, "codectx:", termSafe(err.Error(), true))
}

// command is one subcommand: its synopsis line, a one-line description
// for the usage text, and what runs it.
type command struct {
	name, synopsis, desc string
	run                  func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is every subcommand, in the order of the usage text. role marks
// the role subcommands, which get a section of their own.
var commands = []struct {
	command
	role bool
}{
	{command{"up", "[--data DIR] [--listen 127.0.0.1:7700] [--index PATH_OR_URL ...]", "run the whole service (API, workers, embedded Temporal, NATS, storage) in one process", runUp}, false},
	{command{"index", "[--data DIR | --server URL] [--name NAME] [--rev REV] [--json] PATH_OR_URL", "index a repository (local path or clone URL)", runIndex}, false},
	{command{"query", "[--data DIR | --server URL] --repo NAME[,NAME...|*] [--budget 8000] [--languages LIST] [--arms LIST] [--json] \"text\"", "answer a question with a token-budgeted context", runQuery}, false},
	{command{"eval", "--tasks FILE.jsonl --git-dir owner/name=PATH ... [--budgets LIST] [--json OUT]", "measure retrieval quality on tasks mined from merged pull requests", runEval}, false},
	{command{"gc", "[--data DIR | --s3-endpoint HOST:PORT] [--dry-run] [--json]", "delete parse-cache entries no stored manifest or segment references", runGC}, false},
	{command{"mcp", "[--data DIR | --server URL]", "MCP server over stdio for a coding agent", runMCP}, false},
	{command{"bench-query", "--server URL --repo NAME[,NAME...] [--clients 8] [--requests 2000] [--json]", "load-test a running query API", runBenchQuery}, false},
	{command{"bench-push", "--server URL[,URL...] --dir WORKTREE[,...] --repo NAME [--pushes 20] [--json]", "measure one-file push to queryable on running servers (signed webhooks)", runBenchPush}, false},
	{command{"bench-parse", "[--rounds 1] [--json] PATH", "measure tree-sitter's parse, chunk.Parse and go/parser on a snapshot's files, one core", runBenchParse}, false},
	{command{"repos", "[list [--data DIR]] | status REPO | reindex REPO | delete REPO [--server URL] [--tenant T] [--json]", "list the indexed repositories; one's status, reindex or delete", runRepos}, false},
	{command{"key", "create --tenant T [--scope query|index|admin] | list | revoke ID", "create, list and revoke API keys", runKey}, false},
	{command{"version", "", "print the module version and VCS revision of this binary", runVersion}, false},
	{command{"orchestrator", "", "Temporal worker of the indexing workflows", orchestratorRole().run}, true},
	{command{"parse-worker", "", "consumes the parse stage", parseWorkerRole().run}, true},
	{command{"graph-worker", "", "consumes the graph stage, writes segments", graphWorkerRole().run}, true},
	{command{"embed-worker", "", "consumes the embed stage (with --embedder)", embedWorkerRole().run}, true},
	{command{"query-service", "", "HTTP query API over the published index", queryServiceRole().run}, true},
	{command{"gateway", "", "HTTP admin API: POST /v1/index, status", gatewayRole().run}, true},
}

// usage is the text of 'codectx --help': every command with a one-line
// description.
func usage() string {
	var b strings.Builder
	b.WriteString("codectx: a code-context engine for coding agents.\n\nCommands:\n")
	for _, c := range commands {
		if !c.role {
			fmt.Fprintf(&b, "  %-14s %s\n", c.name, c.desc)
		}
	}
	b.WriteString("\nRoles (one part each, configured by flags or CODECTX_* environment variables):\n")
	for _, c := range commands {
		if c.role {
			fmt.Fprintf(&b, "  %-14s %s\n", c.name, c.desc)
		}
	}
	b.WriteString("\nUsage:\n")
	for _, c := range commands {
		if !c.role && c.synopsis != "" {
			fmt.Fprintf(&b, "  codectx %s %s\n", c.name, c.synopsis)
		}
	}
	b.WriteString("\nRun 'codectx COMMAND --help' for the flags of a command. Under --json, an error is\none line of JSON on stderr, {\"error\": \"...\"}, and the exit status is 1.\n")
	return b.String()
}

// run is the whole program; tests call it directly. A help request
// (COMMAND --help) is a success: its usage went to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return errors.New("no command given")
	}
	// Everything codectx writes (clone caches, parse results, segments,
	// Temporal's database) holds tenants' source: readable by this user
	// only, whatever the caller's umask.
	syscall.Umask(0o077)
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage())
		return nil
	case "-version", "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	for _, c := range commands {
		if c.name == args[0] {
			err := c.run(ctx, args[1:], stdout, stderr)
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			if err != nil && wantsJSON(c.name, args[1:]) {
				// Under --json the error is JSON too, one line on
				// stderr (stdout stays the result's alone): {"error": "..."}.
				json.NewEncoder(stderr).Encode(map[string]string{"error": err.Error()})
				return reported{err}
			}
			return err
		}
	}
	fmt.Fprint(stderr, usage())
	return fmt.Errorf("unknown command %q", args[0])
}

// reported is an error run already wrote to stderr (as JSON); main only
// sets the exit status.
type reported struct{ error }

func (r reported) Unwrap() error { return r.error }

// wantsJSON reports whether a command was asked for JSON output: --json
// is a boolean flag of these commands (eval's names an output file).
func wantsJSON(cmd string, args []string) bool {
	switch cmd {
	case "index", "query", "gc", "key", "repos", "bench-query", "bench-push", "bench-parse":
	default:
		return false
	}
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-json", "--json", "-json=true", "--json=true":
			return true
		}
	}
	return false
}

// usageOut is where a command's usage text goes: nowhere under --json,
// whose error is one line of JSON on stderr (the usage text came before
// it), unless help was asked for.
func usageOut(cmd string, stderr io.Writer, args []string) io.Writer {
	if !wantsJSON(cmd, args) || slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		return stderr
	}
	return io.Discard
}

// runVersion prints the module version and, when the binary was built
// from a VCS checkout, its revision (and "+dirty" for uncommitted changes).
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: codectx version\n\nPrints the module version and the revision the binary was built from.")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, versionString())
	return nil
}

func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "codectx (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	s := "codectx " + v
	var rev, dirty string
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			if kv.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		s += " " + rev + dirty
	}
	return s + " " + bi.GoVersion
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
