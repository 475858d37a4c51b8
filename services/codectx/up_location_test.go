package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob/local"
	"codectx/pkg/testrepo"
)

// A repository indexed by a version that kept its location only in the
// orchestrator has it recorded in the store when up starts again, so a
// later loss of Temporal's state does not lose it.
func TestUpRecordsLocationsAtStart(t *testing.T) {
	lib := testrepo.New(t)
	commit := lib.Commit("initial", testrepo.Small)
	data := t.TempDir()
	addr := freeAddr(t)
	cl := &api.Client{BaseURL: "http://" + addr}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	up := startUp(t, "--data", data, "--listen", addr)
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	if _, err := cl.Index(ctx, api.IndexRequest{Repo: "lib", Location: lib.Dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.WaitIndexed(ctx, "", "lib", commit); err != nil {
		t.Fatal(err)
	}
	up.stop(t)

	// As an earlier version left it: no location recorded.
	store, err := local.Open(filepath.Join(data, "store"))
	if err != nil {
		t.Fatal(err)
	}
	const key = "repos/default/lib/@/LOCATION"
	if err := store.Delete(ctx, key); err != nil {
		t.Fatalf("the index request recorded no location: %v", err)
	}

	up = startUp(t, "--data", data, "--listen", addr)
	up.waitFor(t, "the location recorded", time.Minute, func() bool {
		got, err := store.Get(ctx, key)
		return err == nil && string(got) == lib.Dir
	})
}
