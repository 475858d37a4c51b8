package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/index"
	"codectx/pkg/segment"
)

const reposUsage = `usage: codectx repos [list] [--server URL | --data DIR] [--tenant T] [--json]
       codectx repos status  --server URL [--tenant T] [--json] REPO
       codectx repos reindex --server URL [--tenant T] [--json] [--no-wait] REPO
       codectx repos delete  --server URL [--tenant T] [--json] REPO

list prints every repository of the tenant: its published commit, files
in the index, files left out, the orchestrator's state and last error.
status prints one repository's state, its running snapshot's progress and
what its published index holds. reindex fetches the repository again from
where its last push came from and indexes the revision it follows (the
branch of the last push, or the branch or tag indexed), waiting for the snapshot
unless --no-wait. delete removes its index, vectors and registration (an
admin key). With --server the key is $` + envAPIKey + `; the tenant
defaults to the key's own.
`

func runRepos(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub := "list"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("repos "+sub, flag.ContinueOnError)
	fs.SetOutput(usageOut("repos", stderr, args))
	fs.Usage = func() { fmt.Fprint(fs.Output(), reposUsage) }
	server := fs.String("server", env(envServer, ""), "a running codectx up, gateway or query service ($"+envServer+")")
	tenant := fs.String("tenant", "", "tenant (default: with --server, the API key's tenant for a tenant's key, else "+index.DefaultTenant+")")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	var data *string
	var noWait *bool
	var timeout *time.Duration
	switch sub {
	case "list":
		data = fs.String("data", dataDir(), "data directory (embedded mode), when no --server ($"+envData+")")
	case "status", "delete":
	case "reindex":
		noWait = fs.Bool("no-wait", false, "return once the server accepted the request")
		timeout = fs.Duration("timeout", time.Hour, "how long to wait for the snapshot")
	case "help":
		fmt.Fprint(stdout, reposUsage)
		return nil
	default:
		fmt.Fprint(fs.Output(), reposUsage)
		return fmt.Errorf("repos: unknown subcommand %q (list, status, reindex, delete)", sub)
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	want := 1
	if sub == "list" {
		want = 0
	}
	if len(pos) != want {
		fs.Usage()
		if want == 0 {
			return fmt.Errorf("repos list: takes no argument, got %q", pos)
		}
		return fmt.Errorf("repos %s: want exactly one REPO, got %d", sub, len(pos))
	}
	if err := dataOrServer(fs, server); err != nil {
		return err
	}
	if sub == "list" && *server == "" {
		return reposLocal(ctx, *data, *tenant, *asJSON, stdout)
	}
	if *server == "" {
		return fmt.Errorf("repos %s: needs --server (or $%s): a running codectx up or gateway", sub, envServer)
	}
	cl, err := serverClient(*server)
	if err != nil {
		return fmt.Errorf("repos %s: %w", sub, err)
	}
	if sub == "list" {
		return keyHint(reposList(ctx, cl, *tenant, *asJSON, stdout))
	}
	repo := pos[0]
	t, err := keyTenant(ctx, cl, *tenant)
	if err != nil {
		return keyHint(fmt.Errorf("repos %s: %w", sub, err))
	}
	switch sub {
	case "status":
		st, err := cl.Status(ctx, t, repo)
		if err != nil {
			return keyHint(err)
		}
		if *asJSON {
			return writeIndented(stdout, st)
		}
		fmt.Fprint(stdout, formatStatus(st))
		return nil
	case "delete":
		res, err := cl.Delete(ctx, t, repo)
		if err != nil {
			return keyHint(err)
		}
		if *asJSON {
			return writeIndented(stdout, res)
		}
		fmt.Fprintf(stdout, "deleted %s/%s: %d objects removed\n", termSafe(res.Tenant, false), termSafe(res.Repo, false), res.Deleted)
		return nil
	}
	// reindex
	res, err := cl.Reindex(ctx, t, repo)
	if err != nil {
		return keyHint(err)
	}
	if *noWait {
		if *asJSON {
			return writeIndented(stdout, res)
		}
		fmt.Fprintf(stdout, "reindexing %s/%s (run %s)\n", termSafe(res.Tenant, false), termSafe(res.Repo, false), termSafe(res.RunID, false))
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if !*asJSON {
		return waitPrinted(wctx, cl, res.Tenant, res.Repo, "", stdout)
	}
	st, err := cl.WaitIndexed(wctx, res.Tenant, res.Repo, "")
	if err != nil {
		return err
	}
	return writeIndented(stdout, st)
}

// keyTenant is the tenant a per-repository request names in its path:
// the one given, else the key's own (the repository list names it), so a
// tenant's key needs no --tenant.
func keyTenant(ctx context.Context, cl *api.Client, tenant string) (string, error) {
	if tenant != "" {
		return tenant, nil
	}
	page, err := cl.ListRepos(ctx, "", "", 1)
	var e *api.Error
	if errors.As(err, &e) {
		// The server's answer, without the internal step's name ("list
		// repositories"): the user asked for status, reindex or delete.
		return "", e
	}
	if err != nil {
		return "", err
	}
	return page.Tenant, nil
}

// reposList prints every page of the tenant's repositories on a server.
func reposList(ctx context.Context, cl *api.Client, tenant string, asJSON bool, stdout io.Writer) error {
	all, err := allRepos(tenant, func(tenant, cursor string) (*api.RepoPage, error) {
		return cl.ListRepos(ctx, tenant, cursor, 500)
	})
	if err != nil {
		return err
	}
	return printRepos(stdout, all, asJSON)
}

// reposLocal lists the repositories of a data directory.
func reposLocal(ctx context.Context, data, tenant string, asJSON bool, stdout io.Writer) error {
	store, err := openData(data)
	if err != nil {
		return fmt.Errorf("repos: %w", err)
	}
	srv := &api.Server{Store: store}
	all, err := allRepos(cmp.Or(tenant, index.DefaultTenant), func(tenant, cursor string) (*api.RepoPage, error) {
		page, err := srv.Repos(ctx, tenant, cursor, 500)
		return &page, err
	})
	if err != nil {
		return fmt.Errorf("repos: %w", err)
	}
	return printRepos(stdout, all, asJSON)
}

// allRepos joins the pages that list gives from the first on. The first
// page names the tenant when tenant is "" (a server's: the key's own).
func allRepos(tenant string, list func(tenant, cursor string) (*api.RepoPage, error)) (api.RepoPage, error) {
	all := api.RepoPage{Tenant: tenant, Repos: []api.RepoInfo{}}
	for cursor := ""; ; {
		page, err := list(all.Tenant, cursor)
		if err != nil {
			return api.RepoPage{}, err
		}
		all.Tenant = page.Tenant
		all.Repos = append(all.Repos, page.Repos...)
		if page.Next == "" {
			return all, nil
		}
		cursor = page.Next
	}
}

func printRepos(w io.Writer, page api.RepoPage, asJSON bool) error {
	if asJSON {
		return writeIndented(w, page)
	}
	if len(page.Repos) == 0 {
		fmt.Fprintf(w, "tenant %s has no repositories (index one: codectx index PATH_OR_URL)\n", page.Tenant)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "REPO\tCOMMIT\tFILES\tSKIPPED\tDEGRADED\tSTATE\tLAST ERROR\n")
	for _, r := range page.Repos {
		commit := cmp.Or(shortCommit(r.Commit), "(none yet)")
		state := cmp.Or(r.State, "-")
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", termSafe(r.Repo, false), termSafe(commit, false), r.Files, r.Skipped, r.Degraded, termSafe(state, false), cmp.Or(oneLine(r.LastError), "-"))
	}
	return tw.Flush()
}

// formatStatus renders one repository's status for a terminal.
func formatStatus(st *api.RepoStatus) string {
	var b strings.Builder
	line := func(s string) string { return termSafe(s, false) }
	fmt.Fprintf(&b, "%s/%s: %s\n", line(st.Tenant), line(st.Repo), line(st.State))
	if st.Head != nil {
		fmt.Fprintf(&b, "  published %s (built %s)\n", line(st.Head.Commit), line(st.Head.Built))
	} else {
		fmt.Fprintf(&b, "  published nothing yet\n")
	}
	if st.Indexed > 0 || len(st.Skipped) > 0 {
		fmt.Fprintf(&b, "  files     %d in the index\n", st.Indexed)
	}
	if len(st.Skipped) > 0 {
		fmt.Fprintf(&b, "  skipped   %s\n", line(index.FormatCounts(st.Skipped)))
		listFiles(&b, st.SkippedFiles, st.Skipped)
	}
	if len(st.Degraded) > 0 {
		fmt.Fprintf(&b, "  degraded  %s\n", line(index.FormatCounts(st.Degraded)))
		listFiles(&b, st.DegradedFiles, st.Degraded)
	}
	if st.Rev != "" {
		fmt.Fprintf(&b, "  follows   %s\n", line(st.Rev))
	}
	if st.Received > 0 {
		fmt.Fprintf(&b, "  pushes    %d received, %d covered\n", st.Received, st.Covered)
	}
	if st.NotPublished != "" {
		fmt.Fprintf(&b, "  not published %s: a push of a commit its branch had left\n", line(st.NotPublished))
	}
	if st.Current != "" {
		fmt.Fprintf(&b, "  indexing  %s\n", line(st.Current))
	}
	if st.Progress != nil {
		fmt.Fprintln(&b, formatProgress(st.Progress))
	}
	if st.LastError != "" {
		fmt.Fprintf(&b, "  last error %s\n", oneLine(st.LastError))
	}
	for _, f := range st.LeftOut {
		fmt.Fprintf(&b, "  left out %s: %s\n", line(f.Path), line(f.Reason))
	}
	return b.String()
}

// statusFiles is how many skipped (and degraded) files repos status
// names; --json gives the status reply's whole list.
const statusFiles = 20

// listFiles writes the first statusFiles of files, with their reasons,
// and how many of the counted files it did not name.
func listFiles(b *strings.Builder, files []segment.FileReason, counts map[string]int) {
	for _, f := range files[:min(len(files), statusFiles)] {
		fmt.Fprintf(b, "            %s (%s)\n", termSafe(f.Path, false), termSafe(f.Reason, false))
	}
	if more := index.Total(counts) - min(len(files), statusFiles); more > 0 {
		fmt.Fprintf(b, "            and %d more (--json names up to 1000)\n", more)
	}
}

// oneLine keeps a table row on one line, escaped for a terminal (an
// error may quote a path of the repository).
func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " ..."
	}
	return termSafe(s, false)
}

// writeIndented writes v as JSON indented by two spaces: what every
// command prints under --json.
func writeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
