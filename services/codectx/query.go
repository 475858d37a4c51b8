package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/codectx"
	"codectx/pkg/index"
	"codectx/pkg/query"
)

func parseArms(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	known := map[string]bool{}
	for _, a := range query.AllArms {
		known[a] = true
	}
	var arms []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if !known[a] {
			return nil, fmt.Errorf("unknown arm %q (want some of %s)", a, strings.Join(query.AllArms, ","))
		}
		arms = append(arms, a)
	}
	return arms, nil
}

// parseLanguages parses a comma-separated --languages list; "" is all.
func parseLanguages(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	for _, l := range strings.Split(s, ",") {
		l = strings.ToLower(strings.TrimSpace(l))
		if !slices.Contains(codectx.Languages, codectx.Language(l)) {
			return nil, fmt.Errorf("unknown language %q (want some of %s)", l, strings.Join(codectx.LanguageNames(), ","))
		}
		out = append(out, l)
	}
	return out, nil
}

func runQuery(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	fs.SetOutput(usageOut("query", stderr, args))
	data := fs.String("data", dataDir(), "data directory (embedded mode) ($"+envData+")")
	repo := fs.String("repo", "", "repository name, as indexed, or several separated by commas, or * for all of the tenant's (required)")
	tenant := fs.String("tenant", "", "tenant (default: with --server, the API key's tenant for a tenant's key, else "+index.DefaultTenant+")")
	budget := fs.Int("budget", 8000, "hard token budget (o200k tokens), at least 1")
	langList := fs.String("languages", "", "comma-separated languages to keep: "+strings.Join(codectx.LanguageNames(), ",")+" (default: all)")
	armList := fs.String("arms", "", "comma-separated arms: "+strings.Join(query.AllArms, ",")+" (default: all available)")
	noRoute := fs.Bool("no-route", false, "ignore the classifier's per-trigger arm weights")
	asJSON := fs.Bool("json", false, "print the response as JSON (schema: docs/query-json.md)")
	server := fs.String("server", env(envServer, ""), "query a running codectx up or query service at this URL ($"+envServer+")")
	var df denseFlags
	df.register(fs, false)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: codectx query [flags] "text"`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *repo == "" {
		fs.Usage()
		return fmt.Errorf("query: --repo is required")
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return fmt.Errorf("query: no query text")
	}
	if *budget <= 0 {
		return fmt.Errorf("query: --budget %d: the budget must be at least 1 token", *budget)
	}
	arms, err := parseArms(*armList)
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	langs, err := parseLanguages(*langList)
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	// One name, or several fused into one ranking and one budget.
	var repos []string
	if strings.Contains(*repo, ",") || *repo == api.AllRepos {
		for _, r := range strings.Split(*repo, ",") {
			if r = strings.TrimSpace(r); r != "" {
				repos = append(repos, r)
			}
		}
	}
	if err := dataOrServer(fs, server); err != nil {
		return err
	}
	var resp *query.Response
	if *server != "" {
		cl, err := serverClient(*server)
		if err != nil {
			return fmt.Errorf("query: %w", err)
		}
		req := api.QueryRequest{Tenant: *tenant, Repo: *repo, Query: strings.Join(fs.Args(), " "), Budget: *budget, Arms: arms, NoRoute: *noRoute, Languages: langs}
		if repos != nil {
			req.Repo, req.Repos = "", repos
		}
		resp, err = cl.Query(ctx, req)
		if err != nil {
			return keyHint(err)
		}
	} else {
		store, err := openData(*data)
		if err != nil {
			return err
		}
		kit, err := df.open(ctx, store)
		if err != nil {
			return fmt.Errorf("query: %w", err)
		}
		defer kit.close()
		if err := checkArms(arms, kit); err != nil {
			return fmt.Errorf("query: %w", err)
		}
		if resp, err = queryLocal(ctx, store, kit, cmp.Or(*tenant, index.DefaultTenant), *repo, repos, api.Search{
			Query: strings.Join(fs.Args(), " "), Budget: *budget, Arms: arms, NoRoute: *noRoute, Languages: langs}); err != nil {
			return err
		}
	}
	if *asJSON {
		return writeIndented(stdout, resp)
	}
	writeHuman(stdout, resp)
	return nil
}

// queryLocal answers q over the data directory's store: over several
// repositories (repos) as the API does, else over repo's segment.
func queryLocal(ctx context.Context, store *blob.Bucket, kit *denseKit, tenant, repo string, repos []string, q api.Search) (*query.Response, error) {
	if repos != nil {
		q.Tenant, q.Repos = tenant, repos
		resp, err := (&api.Server{Store: store, Dense: kit.arm()}).Search(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("query: %w", err)
		}
		return resp, nil
	}
	seg, err := index.LoadHead(ctx, store, tenant, repo)
	if err != nil {
		return nil, fmt.Errorf("query: %w (run 'codectx index' first)", err)
	}
	ls := make([]codectx.Language, len(q.Languages))
	for i, l := range q.Languages {
		ls[i] = codectx.Language(l)
	}
	eng := &query.Engine{Seg: seg, Dense: kit.arm(), DegradeDense: true}
	return eng.Query(ctx, query.Request{Query: q.Query, Budget: q.Budget, Arms: q.Arms, Route: !q.NoRoute, Languages: ls})
}

// writeHuman prints r for a terminal. The repository chooses every path,
// symbol and line of it, so control characters (C0 but the line breaks
// and tabs of the context, DEL, C1, the bidirectional overrides) and
// bytes that are not UTF-8 are shown escaped: raw, an escape sequence in
// a file would reach the terminal of whoever runs the query.
func writeHuman(w io.Writer, r *query.Response) {
	commit := shortCommit(r.Commit)
	line := func(s string) string { return termSafe(s, false) }
	fmt.Fprintf(w, "query    %s\n", line(r.Query))
	fmt.Fprintf(w, "trigger  %s (confidence %.2f)", line(r.Trigger), r.Confidence)
	if len(r.Symbols) > 0 {
		fmt.Fprintf(w, "  symbols: %s", line(strings.Join(r.Symbols, ", ")))
	}
	if r.Repo == "" && len(r.Repos) > 0 {
		// An answer over several repositories: each file names its own.
		fmt.Fprintf(w, "\nrepos    %s  arms: %s\n", line(strings.Join(r.Repos, ", ")), line(strings.Join(r.Arms, ",")))
	} else {
		fmt.Fprintf(w, "\nrepo     %s@%s  arms: %s\n", line(r.Repo), line(commit), line(strings.Join(r.Arms, ",")))
	}
	if r.Degraded != "" {
		fmt.Fprintf(w, "degraded %s\n", line(r.Degraded))
	}
	fmt.Fprintf(w, "tokens   %d of %d, %d chunks, %d dropped\n\nfiles:\n", r.Tokens, r.Budget, len(r.Chunks), r.Dropped)
	for i, f := range r.Files {
		if i == 10 {
			break
		}
		path := f.Path
		if f.Repo != "" {
			path = f.Repo + ":" + path
		}
		fmt.Fprintf(w, "  %2d. %-60s %.4f [%s]\n", i+1, line(path), f.Score, line(strings.Join(f.Signals, ",")))
	}
	fmt.Fprintf(w, "\ncontext:\n%s\n", termSafe(r.Context, true))
}

// termSafe returns s with the characters a terminal would act on escaped
// (\x1b, \u009b, \xff for a byte that is not UTF-8); with lines, line
// feeds, tabs and the CR of a CRLF are kept.
func termSafe(s string, lines bool) string {
	if !needsEscape(s, lines) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case lines && kept(s, i, r):
			b.WriteRune(r)
		case unsafeRune(r):
			if r < 0x80 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func needsEscape(s string, lines bool) bool {
	for i, r := range s {
		if r == utf8.RuneError || unsafeRune(r) && !(lines && kept(s, i, r)) {
			return true
		}
	}
	return false
}

// kept reports whether the control character r at s[i] stays raw in a
// multi-line text: a line feed, a tab, the CR of a CRLF.
func kept(s string, i int, r rune) bool {
	return r == '\n' || r == '\t' || r == '\r' && strings.HasPrefix(s[i+1:], "\n")
}

// unsafeRune reports a control character or a bidirectional override.
func unsafeRune(r rune) bool {
	return r < 0x20 || r >= 0x7f && r < 0xa0 || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}
