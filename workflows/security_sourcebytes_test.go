package workflows

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"codectx/pkg/blob"

	"go.temporal.io/sdk/temporal"
)

// TestSnapshotSourceLimit: the Snapshot activity plans a snapshot from its
// listing; one whose files to parse are larger in all than the source
// limit (here one blob named under 50 paths) fails there, for good, with
// the public reason, and writes no manifest or plan; under the limit it
// is planned.
func TestSnapshotSourceLimit(t *testing.T) {
	dir := t.TempDir()
	git := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Stdin = dir, strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	git("", "init", "-q", "--bare", ".")
	h := git("package p\n\nfunc a1(){}\n"+strings.Repeat("// pad\n", 1000), "hash-object", "-w", "--stdin")
	var tree strings.Builder
	for i := range 50 {
		fmt.Fprintf(&tree, "100644 blob %s\tf%02d.go\n", h, i)
	}
	commit := git("", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit-tree", git(tree.String(), "mktree"), "-m", "bomb")
	git("", "update-ref", "refs/heads/master", commit)

	ctx := context.Background()
	store := blob.NewMem()
	a := &Activities{Store: store, SourceMaxBytes: 200 << 10} // 50 x 7 KiB: 350 KiB
	_, err := a.Snapshot(ctx, SnapshotInput{Tenant: "acme", Repo: "bomb", Location: dir})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !ae.NonRetryable() || ae.Type() != errSource {
		t.Fatalf("Snapshot = %v, want a final %s error", err, errSource)
	}
	if got := PublicError(err); !strings.Contains(got, "source limit") {
		t.Errorf("status would say %q", got)
	}
	if keys, _ := store.List(ctx, ""); len(keys) != 0 {
		t.Errorf("wrote %v before failing", keys)
	}
	a.SourceMaxBytes = 1 << 20
	p, err := a.Snapshot(ctx, SnapshotInput{Tenant: "acme", Repo: "bomb", Location: dir})
	if err != nil || p.Changed != 50 {
		t.Fatalf("under the limit: %+v, %v; want 50 files planned", p, err)
	}
}
