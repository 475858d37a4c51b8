// Command codectx is the code-context engine. One binary runs every role:
// `codectx index` builds the index of a repository, `codectx query` answers
// a question with a token-budgeted context, `codectx eval` measures
// retrieval quality on tasks mined from merged pull requests.
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
  codectx index [--data DIR] [--name NAME] [--rev REV] [--json] PATH_OR_URL
  codectx query [--data DIR] --repo NAME [--budget 8000] [--arms LIST] [--json] "text"
  codectx eval  --tasks FILE.jsonl --git-dir owner/name=PATH ... [--budgets LIST] [--json OUT]

Run 'codectx COMMAND -h' for the flags of a command.
`

// run is the whole program; tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "index":
		return runIndex(ctx, args[1:], stdout, stderr)
	case "query":
		return runQuery(ctx, args[1:], stdout, stderr)
	case "eval":
		return runEval(ctx, args[1:], stdout, stderr)
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
