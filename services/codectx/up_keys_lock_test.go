package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUpKeysAfterLock: a second `up --keys` on a data directory a running
// `up` holds is refused before it writes any key: it left keys.json and an
// admin key behind, in a directory whose running `up` has no keys (and two
// started at once on a fresh directory both wrote an admin key).
func TestUpKeysAfterLock(t *testing.T) {
	if testing.Short() {
		t.Skip("starts codectx up")
	}
	data := t.TempDir()
	up := startUp(t, "--data", data, "--listen", freeAddr(t))
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run(ctx, []string{"up", "--keys", "--data", data, "--listen", freeAddr(t)}, io.Discard, io.Discard)
	if err == nil {
		t.Fatal("a second up on a held data directory: no error")
	}
	for _, name := range []string{"keys.json", "admin.key"} {
		if _, serr := os.Stat(filepath.Join(data, name)); serr == nil {
			t.Errorf("the refused second up (%v) wrote %s", err, name)
		}
	}
}
