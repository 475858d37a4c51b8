package index_test

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"codectx/pkg/index"
	"codectx/pkg/source"
)

// TestSecurityGoModBomb: ReadManifest reads every go.mod for its module
// path, and read them whatever their size: a go.mod of 1 GiB of one byte
// (4.5 MiB as a loose object) took the heap of an index build to 3.7 GB.
// Files over the size cap are never read; a go.mod of 128 MiB must not be
// either.
func TestSecurityGoModBomb(t *testing.T) {
	dir := t.TempDir()
	git := gitIn(t, dir)
	git(nil, "init", "-q", "--bare", ".")
	big := git(io.LimitReader(spaces{}, 128<<20), "hash-object", "-w", "--stdin")
	small := git(strings.NewReader("package main\n\nfunc main() {}\n"), "hash-object", "-w", "--stdin")
	tree := git(strings.NewReader("100644 blob "+big+"\tgo.mod\n100644 blob "+small+"\tmain.go\n"), "mktree")
	commit := git(nil, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit-tree", tree, "-m", "bomb")
	git(nil, "update-ref", "refs/heads/master", commit)

	snap, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := index.ReadManifest(context.Background(), snap, "t", "r", 0); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 32<<20 {
		t.Fatalf("ReadManifest allocated %d MiB for a go.mod of 128 MiB", n>>20)
	}
}

type spaces struct{}

func (spaces) Read(p []byte) (int, error) {
	copy(p, bytes.Repeat([]byte{' '}, len(p)))
	return len(p), nil
}

// gitIn returns a runner of git commands in dir, with stdin, that fails
// the test on an error and returns the trimmed output.
func gitIn(t *testing.T, dir string) func(stdin io.Reader, args ...string) string {
	return func(stdin io.Reader, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Stdin = dir, stdin
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
}
