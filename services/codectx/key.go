package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"codectx/pkg/index"
	"codectx/pkg/keys"
)

const keyUsage = `usage: codectx key create --tenant T [--scope query|index|admin] [--file FILE | --data DIR]
       codectx key list   [--json] [--file FILE | --data DIR]
       codectx key revoke ID [--file FILE | --data DIR]

Manages the API key file (default DATA/keys.json, or $` + envAPIKeys + `). A
running server re-reads it, so created and revoked keys take effect
without a restart. create prints the new key once: only its SHA-256 is
stored. Scopes: query (query, MCP, status, repository list), index (and
index, reindex), admin (and delete). --tenant '*' reaches every tenant.
`

func runKey(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, keyUsage)
		if len(args) == 0 {
			return fmt.Errorf("key: no subcommand (create, list, revoke)")
		}
		return nil
	}
	sub := args[0]
	fs := flag.NewFlagSet("key "+sub, flag.ContinueOnError)
	fs.SetOutput(usageOut("key", stderr, args))
	fs.Usage = func() { fmt.Fprint(fs.Output(), keyUsage) }
	data := fs.String("data", dataDir(), "data directory whose keys.json to use ($"+envData+")")
	file := fs.String("file", env(envAPIKeys, ""), "key file (default DATA/keys.json; $"+envAPIKeys+")")
	var tenant, scope *string
	var asJSON *bool
	switch sub {
	case "create":
		tenant = fs.String("tenant", "", "tenant the key acts for (required; '*' for every tenant)")
		scope = fs.String("scope", string(keys.Query), "query, index or admin")
	case "list":
		asJSON = fs.Bool("json", false, "print the keys as JSON")
	case "revoke":
	default:
		fmt.Fprint(fs.Output(), keyUsage)
		return fmt.Errorf("key: unknown subcommand %q (create, list, revoke)", sub)
	}
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return err
	}
	path := *file
	if path == "" {
		path = filepath.Join(*data, "keys.json")
	}
	switch sub {
	case "create":
		if len(pos) > 0 {
			return fmt.Errorf("key create: unexpected arguments %q", pos)
		}
		if *tenant == "" {
			return fmt.Errorf("key create: --tenant is required")
		}
		if *tenant != keys.AllTenants && !index.ValidTenant(*tenant) {
			return fmt.Errorf("key create: invalid tenant %q", *tenant)
		}
		// A key goes into a file a server reads: not into directories
		// made up on the spot (a mistyped --file or the wrong working
		// directory's .codectx), nor into another user's data directory.
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		dir := filepath.Dir(path)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			if *file == "" {
				return fmt.Errorf("key create: no data directory %s: codectx up makes it (or give --data of one, or --file)", dir)
			}
			return fmt.Errorf("key create: no directory %s for the key file", dir)
		}
		if *file == "" {
			if err := keys.PrivateDir(dir); err != nil {
				return fmt.Errorf("key create: %w", err)
			}
		}
		_, statErr := os.Stat(path)
		secret, k, err := keys.Create(path, *tenant, keys.Scope(*scope))
		if err != nil {
			return fmt.Errorf("key create: %w", err)
		}
		fmt.Fprintln(stdout, secret)
		fmt.Fprintf(stderr, "created key %s for tenant %s, scope %s, in %s; it is shown only this once\n", k.ID, k.Tenant, k.Scope, path)
		if errors.Is(statErr, os.ErrNotExist) {
			fmt.Fprintf(stderr, "%s is a new key file: servers read it with --api-keys %s (up --keys reads the keys.json of its data directory)\n", path, path)
		}
		return nil
	case "list":
		if len(pos) > 0 {
			return fmt.Errorf("key list: unexpected arguments %q", pos)
		}
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("key list: no key file at %s (codectx key create writes one)", path)
		}
		ks, err := keys.List(path)
		if err != nil {
			return fmt.Errorf("key list: %w", err)
		}
		if *asJSON {
			type entry struct {
				ID      string     `json:"id"`
				Tenant  string     `json:"tenant"`
				Scope   keys.Scope `json:"scope"`
				Created string     `json:"created,omitempty"`
			}
			out := []entry{}
			for _, k := range ks {
				out = append(out, entry{k.ID, k.Tenant, k.Scope, k.Created})
			}
			return writeIndented(stdout, out)
		}
		if len(ks) > 0 {
			fmt.Fprintf(stdout, "%-12s %-20s %-6s %s\n", "ID", "TENANT", "SCOPE", "CREATED")
		}
		for _, k := range ks {
			fmt.Fprintf(stdout, "%-12s %-20s %-6s %s\n", k.ID, k.Tenant, k.Scope, k.Created)
		}
		return nil
	}
	if len(pos) != 1 {
		return fmt.Errorf("key revoke: want one key id (codectx key list shows them)")
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		// Not "no such key": the id may be right and the file (--data,
		// --file) the mistake.
		return fmt.Errorf("key revoke: no key file at %s (give the --data or --file of the server's keys)", path)
	}
	if err := keys.Revoke(path, pos[0]); err != nil {
		return fmt.Errorf("key revoke: %w", err)
	}
	fmt.Fprintf(stderr, "revoked %s\n", pos[0])
	return nil
}

// parseInterspersed parses args with fs, flags before or after the
// positional arguments (key revoke ID --data DIR as well as key revoke
// --data DIR ID), and returns the positional ones; "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		// Parse stops at the first positional argument, or after "--".
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	return pos, nil
}
