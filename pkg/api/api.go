// Package api is the HTTP API of codectx and a Go client for it. The query
// routes answer questions over the published index of a repository (its
// HEAD segment, loaded from the blob store through a small LRU cache); the
// admin routes ask the orchestrator to index a repository and report its
// status. Every role of the `codectx` binary serves /healthz, /readyz and
// /metrics from here.
//
// Routes (JSON in and out; errors are {"error": "..."}):
//
//	GET  /healthz                           200 while the process runs
//	GET  /readyz                            200 when every dependency answers, else 503
//	GET  /metrics                           Prometheus text format
//	POST /v1/query                          QueryRequest -> query.Response (docs/query-json.md)
//	POST /v1/mcp                            MCP over Streamable HTTP (stateless): the tools of MCPServer
//	POST /v1/impact                         ImpactInput -> ImpactOutput (the impact tool; across repositories)
//	POST /v1/references                     ReferencesInput -> ReferencesOutput (the references tool)
//	POST /v1/index                          IndexRequest -> IndexResponse
//	GET  /v1/repos/{tenant}/{repo...}/status -> RepoStatus
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"codectx/pkg/index"
	"codectx/pkg/segment"
)

// QueryRequest is the body of POST /v1/query.
type QueryRequest struct {
	Tenant    string   `json:"tenant,omitempty" jsonschema:"tenant whose repositories to search; default: the API key's tenant (a tenant's key), else default"`
	Repo      string   `json:"repo,omitempty" jsonschema:"one repository to search, or * for all of the tenant's; name one in repo or repos"`
	Repos     []string `json:"repos,omitempty" jsonschema:"repositories to search, fused into one ranking and one budget (at most 1000); * stands for all of the tenant's"`
	Query     string   `json:"query" jsonschema:"the question or task, in words, code or both; at most 8 KiB unless the server sets another limit"`
	Budget    int      `json:"budget,omitempty" jsonschema:"token budget of the packed context (o200k tokens), 1 to 1000000; default 8000"`
	Arms      []string `json:"arms,omitempty" jsonschema:"retrieval arms to fuse; default: all the server has (dense needs an embedder)"`
	NoRoute   bool     `json:"no_route,omitempty" jsonschema:"ignore the classifier's per-trigger weights of the arms"`
	Languages []string `json:"languages,omitempty" jsonschema:"only chunks in these languages"`
	Session   string   `json:"session,omitempty" jsonschema:"the caller's session id (letters, digits, _ and -; at most 128): chunks earlier queries of the session were sent are named, not sent again"`

	budgetSet bool // the body named a budget (so an explicit 0 is refused, not defaulted)
}

// UnmarshalJSON decodes a query body and notes whether it named a budget:
// an absent (or null) budget is the default, "budget": 0 is an error. A
// budget is a whole number, written as JSON allows one: 2000 or 2000.0.
func (q *QueryRequest) UnmarshalJSON(b []byte) error {
	type plain QueryRequest
	var aux struct {
		plain
		Budget *float64 `json:"budget"`
	}
	if err := decodeStrict(b, &aux); err != nil {
		return err
	}
	*q = QueryRequest(aux.plain)
	var err error
	q.Budget, q.budgetSet, err = whole("budget", aux.Budget)
	return err
}

// decodeStrict decodes b into v and refuses a field v does not know, as
// readJSON does: a type's own UnmarshalJSON decodes with a decoder of its
// own, which would take any.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// whole reads a JSON number that must be a whole number, written as JSON
// Schema's integer allows (2000 or 2000.0: Go decodes only the first into
// an int); nil: left out or null.
func whole(name string, f *float64) (n int, set bool, err error) {
	if f == nil {
		return 0, false, nil
	}
	if *f != math.Trunc(*f) {
		return 0, false, fmt.Errorf("%s %v: want a whole number", name, *f)
	}
	if math.Abs(*f) > math.MaxInt32 {
		// Written out, not as 1e+11: the number the client sent.
		return 0, false, fmt.Errorf("%s %s: out of range", name, strconv.FormatFloat(*f, 'f', -1, 64))
	}
	return int(*f), true, nil
}

// IndexRequest is the body of POST /v1/index.
type IndexRequest struct {
	Tenant   string `json:"tenant,omitempty" jsonschema:"tenant to index for; default: the API key's tenant (a tenant's key), else default"`
	Repo     string `json:"repo,omitempty" jsonschema:"repository name; default: derived from the location"`
	Location string `json:"location" jsonschema:"clone URL, or a path on the server's machine (an operator's key only); at most 4 KiB"`
	Commit   string `json:"commit,omitempty" jsonschema:"revision to index (hash, branch, tag); default: the location's HEAD"`
	// Forward is set for a webhook push (never sent over the API): the
	// index may move HEAD forward only, never back to an ancestor of the
	// published commit, so a replayed or late delivery cannot roll back.
	Forward bool `json:"-"`
	// Branch is, for a webhook push, the branch pushed: a push of an
	// ancestor of the published commit is published when it is that
	// branch's tip at the location (a reset and force-push).
	Branch string `json:"-"`
}

// IndexResponse is the answer of POST /v1/index: the request was accepted
// and the repository's workflow signalled.
type IndexResponse struct {
	Tenant string `json:"tenant"`
	Repo   string `json:"repo"`
	Commit string `json:"commit,omitempty"`
	RunID  string `json:"run_id"`
}

// Indexing states of RepoStatus.State.
const (
	StateIdle     = "idle"     // nothing to do
	StateIndexing = "indexing" // a snapshot is being indexed
	StateQueued   = "queued"   // a snapshot waits for one of its tenant's slots (--tenant-snapshots)
	StateUnknown  = "unknown"  // no orchestrator configured, or it does not know the repo
)

// RepoStatus is the answer of GET /v1/repos/{tenant}/{repo}/status: what the
// orchestrator is doing for the repository and what is published.
type RepoStatus struct {
	Tenant     string    `json:"tenant"`
	Repo       string    `json:"repo"`
	State      string    `json:"state"`
	Current    string    `json:"current,omitempty"`         // commit being indexed ("" = the location's HEAD)
	Pending    string    `json:"pending,omitempty"`         // commit of a push waiting for the current snapshot
	HasPending bool      `json:"has_pending,omitempty"`     // a push is waiting (Pending may be "" = HEAD)
	Received   int       `json:"received"`                  // pushes received
	Covered    int       `json:"covered"`                   // pushes covered by finished snapshots
	LastCommit string    `json:"last_commit,omitempty"`     // commit of the last finished snapshot
	LastError  string    `json:"last_error,omitempty"`      // error of the last snapshot, "" if it succeeded (tenants: its cause class only)
	LastDetail string    `json:"-"`                         // the error in full: served as last_error to operators only
	Files      int       `json:"files"`                     // files of the last finished snapshot
	Parsed     int       `json:"parsed"`                    // of those, parsed by it
	Reused     int       `json:"reused"`                    // of those, reused from the parse cache
	Failed     int       `json:"failed"`                    // of those, left out because their parse failed
	LeftOut    []LeftOut `json:"left_out,omitempty"`        // the files left out and why
	Already    bool      `json:"already_indexed,omitempty"` // the last snapshot found HEAD complete at its commit
	// NotPublished is the commit of the last snapshot's push when it was
	// not published: a webhook push of a commit its branch no longer has
	// (a late or replayed delivery), or one behind or beside the
	// published commit that is not the branch's tip. An index request or
	// a reindex moves HEAD anywhere.
	NotPublished string      `json:"not_published,omitempty"`
	Embed        string      `json:"embed,omitempty"`    // what the embed stage did
	Embedded     int         `json:"embedded"`           // chunks embedded by the last snapshot
	EmbedReused  int         `json:"embed_reused"`       // chunks whose vector came from the embedding cache
	Restored     int         `json:"restored,omitempty"` // already indexed: vector points of the published snapshot the vector store had lost, written again
	Head         *index.Head `json:"head,omitempty"`     // the published HEAD, nil if none
	// What the published HEAD holds, when no snapshot is running (as GET
	// /v1/repos counts it): Files counts the snapshot's listing, Indexed
	// the files in the index, Skipped those of the listing the parser
	// left out (too large, binary, minified, generated, ...) by reason,
	// Degraded those cut into line windows by reason.
	Indexed  int            `json:"indexed,omitempty"`
	Skipped  map[string]int `json:"skipped,omitempty"`
	Degraded map[string]int `json:"degraded,omitempty"`
	// SkippedFiles and DegradedFiles name those files with their
	// reasons, in path order, at most maxStatusFiles of each: fewer than
	// the counts when there are more, or when the index was built before
	// files were named.
	SkippedFiles  []segment.FileReason `json:"skipped_files,omitempty"`
	DegradedFiles []segment.FileReason `json:"degraded_files,omitempty"`
	// Progress is how far the running snapshot is (nil when idle, or when
	// the orchestrator cannot say yet).
	Progress *Progress `json:"progress,omitempty"`
	// Location is where the last push fetched from: what a reindex
	// fetches again. Not shown: it may be a path on the server.
	Location string `json:"-"`
	// Rev is the revision a reindex indexes: the branch of the last
	// webhook push, or the branch or tag an index request named; "" the
	// location's HEAD.
	Rev string `json:"revision,omitempty"`
	// Closed says the orchestrator's state is that of an ended run (a
	// DELETE ends it): the figures are a deleted repository's, unless it
	// has a HEAD or a registration still. Not shown.
	Closed bool `json:"-"`
}

// Stages of Progress.Stage, in order.
const (
	StageSnapshot = "snapshot"
	StageParse    = "parse"
	StageEmbed    = "embed"
	StageGraph    = "graph"
	StagePublish  = "publish"
)

// Progress is how far the running snapshot is. Files, Planned and Reused
// are known once the snapshot stage is done; Parsed and Failed grow during
// the parse stage.
type Progress struct {
	Stage   string `json:"stage"`            // StageSnapshot ... StagePublish
	Commit  string `json:"commit,omitempty"` // "" until the snapshot stage resolves it
	Files   int    `json:"files"`            // files in the snapshot
	Planned int    `json:"planned"`          // files to parse (no cached result)
	Parsed  int    `json:"parsed"`           // of those, parsed so far
	Failed  int    `json:"failed"`           // of those, left out so far
	Reused  int    `json:"reused"`           // files whose parse result was cached
	Lost    int    `json:"lost,omitempty"`   // a commit already published: its vector points missing from the vector store, being restored
	// Quiet is how long, in seconds, the parse or embed stage has had no
	// result come in while some are still out: long, and no worker of
	// the stage may be consuming.
	Quiet int `json:"quiet_seconds,omitempty"`
}

// LeftOut is a file left out of the published snapshot because it is
// itself bad, with the reason (e.g. its parse panicked or hung).
type LeftOut struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Done reports whether every push received has been covered by a finished
// snapshot.
func (s RepoStatus) Done() bool {
	return s.State != StateIndexing && s.State != StateQueued && !s.HasPending && s.Covered >= s.Received && s.Received > 0
}

// ErrUnknownRepo is returned (wrapped) by an Indexer that has no workflow
// for the repository.
var ErrUnknownRepo = errors.New("unknown repository")

// Indexer is the port to the orchestrator: the services adapt the
// workflows package to it, tests use a fake.
type Indexer interface {
	// Index signals (starting it if needed) the repository's workflow.
	Index(ctx context.Context, req IndexRequest) (runID string, err error)
	// Status queries the repository's workflow. Head is filled in by the API.
	Status(ctx context.Context, tenant, repo string) (RepoStatus, error)
}

// RepoCloser is an optional method of an Indexer: end the repository's
// workflow (DELETE of the repository), so that a deleted repository keeps
// no state in the orchestrator. It reports whether there was one to end.
type RepoCloser interface {
	CloseRepo(ctx context.Context, tenant, repo string) (bool, error)
}
