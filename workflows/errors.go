package workflows

import (
	"errors"
	"strings"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/location"
	"codectx/pkg/netguard"
	"codectx/pkg/source"

	"go.temporal.io/sdk/temporal"
)

// Application error types of failures with a cause a tenant may be told.
const (
	errRefused  = "LocationRefused"
	errLocation = "InvalidLocation"
	errRevision = "RevisionNotFound"
	errEmpty    = "EmptyRepository"
	errRejected = "PublishRejected"
	errTooLarge = "RepositoryTooLarge"
	errTooMany  = "TooManyEntries"
	errSource   = "SourceTooLarge"
	errChunks   = "TooManyChunks"
)

// public messages by error type: all a tenant learns of a failed snapshot.
var public = map[string]string{
	errRefused:  "location refused: its host is not allowed, or does not resolve to an allowed address",
	errLocation: "invalid location",
	errRevision: "revision not found",
	errEmpty:    "the repository has no commits",
	errRejected: "the index could not be published under this repository name",
	errTooLarge: "the repository is larger than the server's clone limit",
	errTooMany:  "the repository's tree has more entries than the server lists",
	errSource:   "the repository's files are larger in all than the server's source limit",
	errChunks:   "the repository's files make more chunks than the server indexes",
}

// classify turns an activity's error into an application error whose
// message is public when its cause is known; other errors pass unchanged
// (and are retried).
func classify(err error) error {
	typ := ""
	switch {
	case err == nil:
		return nil
	case errors.Is(err, netguard.ErrRefused):
		typ = errRefused
	case errors.Is(err, location.ErrInvalid):
		typ = errLocation
	case errors.Is(err, source.ErrRevisionNotFound):
		typ = errRevision
	case errors.Is(err, source.ErrEmptyRepo):
		typ = errEmpty
	case errors.Is(err, blob.ErrInvalidKey):
		typ = errRejected
	case errors.Is(err, source.ErrTooLarge):
		typ = errTooLarge
	case errors.Is(err, source.ErrTooManyEntries):
		typ = errTooMany
	case errors.Is(err, index.ErrSourceTooLarge):
		typ = errSource
	default:
		return err
	}
	return temporal.NewNonRetryableApplicationError(public[typ], typ, err)
}

// graphPoison is the final error of a dead-lettered graph job. A bound a
// tenant may be told of (index.ErrTooManyChunks) gets its public message;
// a dead letter keeps only the job's error text, so the bound is known by
// its sentinel's message. Anything else is GraphFailed, whose reason
// stays in the log.
func graphPoison(reason string) error {
	if strings.Contains(reason, index.ErrTooManyChunks.Error()) {
		return temporal.NewNonRetryableApplicationError(public[errChunks], errChunks, errors.New(firstLine(reason)))
	}
	return temporal.NewNonRetryableApplicationError("graph job dead-lettered: "+firstLine(reason), "GraphFailed", nil)
}

// stages name the steps of SnapshotWorkflow by the prefix of its errors.
var stages = []struct{ prefix, msg string }{
	{"snapshot ", "could not read the repository"},
	{"fan out parse", "could not schedule the parse"},
	{"wait for parse", "the parse did not finish"},
	{"wait for embed", "the embedding did not finish"},
	{"graph", "could not build the index"},
	{"publish", "could not publish the index"},
}

// PublicError is what the status tells about a failed snapshot: the known
// cause, or the step that failed, never the messages behind it, which name
// paths on the server, addresses and store keys (the log has them).
func PublicError(err error) string {
	stage := ""
	for e := err; e != nil; e = errors.Unwrap(e) {
		a, ok := e.(*temporal.ApplicationError)
		if !ok {
			continue
		}
		if msg, ok := public[a.Type()]; ok {
			return msg
		}
		if stage == "" {
			for _, s := range stages {
				if strings.HasPrefix(a.Error(), s.prefix) {
					stage = s.msg
					break
				}
			}
		}
	}
	if stage == "" {
		stage = "indexing failed"
	}
	return stage + " (the server log has the details)"
}
