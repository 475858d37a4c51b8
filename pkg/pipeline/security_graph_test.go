package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/queue"
)

// A graph job is built only from a manifest of its own tenant and
// repository: a message naming another tenant's manifest (a forged or
// mixed-up job on the queue) must not write that tenant's code into a
// segment under the job's tenant. Before, the worker read whatever
// ManifestKey named, loaded the parse results of the manifest's tenant and
// wrote the segment at the job's key.
func TestGraphJobOfAnotherTenantsManifest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "vault.go"), []byte("package vault\n\nconst Token = \"acme-private\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store, commit, mk := parsed(t, dir, "acme", "vault")
	w := &Workers{Store: store}
	for _, j := range []GraphJob{
		{Tenant: "beta", Repo: "vault", Commit: commit, ManifestKey: mk},
		{Tenant: "acme", Repo: "other", Commit: commit, ManifestKey: mk},
	} {
		job, _ := json.Marshal(j)
		err := w.HandleGraph(ctx, queue.Message{Data: job})
		if err == nil {
			t.Errorf("graph job of %s/%s built from %s", j.Tenant, j.Repo, mk)
		} else if !queue.IsPermanent(err) {
			t.Errorf("graph job of %s/%s: %v, want a permanent error (retrying cannot help)", j.Tenant, j.Repo, err)
		}
		if _, err := store.Get(ctx, j.SegmentKey()); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("segment %s written from %s (err %v)", j.SegmentKey(), mk, err)
		}
	}
	// The job of the manifest's own tenant and repository is built.
	job, _ := json.Marshal(GraphJob{Tenant: "acme", Repo: "vault", Commit: commit, ManifestKey: mk})
	if err := w.HandleGraph(ctx, queue.Message{Data: job}); err != nil {
		t.Fatal(err)
	}
}
