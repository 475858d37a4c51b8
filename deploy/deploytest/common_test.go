package deploytest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// roles are the codectx role subcommands that run as separate services.
var roles = []string{
	"orchestrator",
	"parse-worker",
	"graph-worker",
	"embed-worker",
	"query-service",
	"gateway",
}

// requiredEnv is the environment every distributed role needs.
var requiredEnv = []string{
	"CODECTX_DATA",
	"CODECTX_LISTEN",
	"CODECTX_TEMPORAL",
	"CODECTX_NATS",
	"CODECTX_S3_ENDPOINT",
	"CODECTX_S3_ACCESS_KEY",
	"CODECTX_S3_SECRET_KEY",
	"CODECTX_S3_BUCKET",
	"CODECTX_S3_SECURE",
	"CODECTX_QDRANT",
}

// repoRoot is the repository root relative to this package's directory,
// which is the working directory of `go test`.
var repoRoot = filepath.Join("..", "..")

func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return b
}

// mustReplace replaces the first old in s with new and fails the test when
// old does not occur, so a negative test cannot pass by breaking nothing.
func mustReplace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("mutation target %q not found", old)
	}
	return strings.Replace(s, old, new, 1)
}

// wantErrContaining fails unless one of errs mentions want.
func wantErrContaining(t *testing.T, errs []error, want string) {
	t.Helper()
	if len(errs) == 0 {
		t.Fatalf("no error; want one containing %q", want)
	}
	for _, err := range errs {
		if strings.Contains(err.Error(), want) {
			return
		}
	}
	t.Errorf("no error contains %q; got:\n%v", want, errors.Join(errs...))
}

func wantNoErrs(t *testing.T, errs []error) {
	t.Helper()
	if len(errs) > 0 {
		t.Errorf("%d problems:\n%v", len(errs), errors.Join(errs...))
	}
}
