package source

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// The pack headers give every object's size as go-git's own lookup does,
// on a pack git made with deltas (versions of growing files, gc'd), and
// no chain git made is taken for a crafted one.
func TestPackCostsMatchGit(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q")
	var body strings.Builder
	for i := range 40 {
		for j := range 3 {
			fmt.Fprintf(&body, "func f%d_%d() int { return %d }\n", i, j, i*j)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.go", j)), []byte("package p\n"+body.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		run("add", "-A")
		run("commit", "-q", "-m", fmt.Sprintf("c%d", i))
	}
	run("gc", "-q", "--aggressive")

	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := repo.Storer.(*filesystem.Storage)
	costs, err := openPackCosts(st.Filesystem())
	if err != nil {
		t.Fatal(err)
	}
	defer costs.Close()
	if len(costs.packs) != 1 {
		t.Fatalf("%d packs after gc, want 1", len(costs.packs))
	}
	entries, err := costs.packs[0].idx.Entries()
	if err != nil {
		t.Fatal(err)
	}
	n, deltas := 0, 0
	for {
		e, err := entries.Next()
		if err != nil {
			break
		}
		size, ok, err := costs.cost(e.Hash)
		if !ok || err != nil {
			t.Fatalf("object %s: found %v, %v", e.Hash, ok, err)
		}
		want, err := st.EncodedObjectSize(e.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if size != want {
			t.Errorf("object %s: size %d from the pack header, go-git says %d", e.Hash, size, want)
		}
		pos, _ := costs.find(e.Hash)
		if _, c, _ := costs.costAt(pos, 0); c.sum > c.largest {
			deltas++
		}
		n++
	}
	if deltas == 0 {
		t.Fatalf("none of the %d objects is a delta: the check saw no chain", n)
	}
	t.Logf("%d objects, %d deltas", n, deltas)
}
