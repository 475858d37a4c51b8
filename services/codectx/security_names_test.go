package main

import (
	"bytes"
	"codectx/pkg/testrepo"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

type encoder interface {
	Encode(plumbing.EncodedObject) error
}

func putObject(t *testing.T, st storer.EncodedObjectStorer, o encoder) plumbing.Hash {
	t.Helper()
	obj := st.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		t.Fatal(err)
	}
	h, err := st.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// putRawTree writes the entries as they are: go-git's encoder refuses
// unsorted ones, git's refuses the names.
func putRawTree(t *testing.T, st storer.EncodedObjectStorer, es []object.TreeEntry) plumbing.Hash {
	t.Helper()
	obj := st.NewEncodedObject()
	obj.SetType(plumbing.TreeObject)
	w, _ := obj.Writer()
	for _, e := range es {
		w.Write([]byte(e.Mode.String() + " " + e.Name + "\x00"))
		w.Write(e.Hash[:])
	}
	w.Close()
	h, err := st.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// hostileNamesRepo writes a bare repository whose one commit's tree holds
// entry names `git` refuses, and whose files carry terminal escapes.
func hostileNamesRepo(t *testing.T, names []string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "names.git")
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	st := repo.Storer
	var es []object.TreeEntry
	for i, n := range names {
		b := testrepo.PutBlob(t, st, "package p\n\n// Zorblax \x1b]0;pwned\x07\x1b[2J\x1b[31mred\n"+
			"func Zorblax"+string(rune('A'+i))+"() int { return 1 }\n")
		es = append(es, object.TreeEntry{Name: n, Mode: filemode.Regular, Hash: b})
	}
	tree := putRawTree(t, st, es)
	sig := object.Signature{Name: "t", Email: "t@example.com"}
	c := putObject(t, st, &object.Commit{Author: sig, Committer: sig, Message: "names\n", TreeHash: tree})
	if err := st.SetReference(plumbing.NewHashReference("refs/heads/master", c)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSecurityQueryTextEscapes: the repository chooses its file names
// and contents, and `codectx query` printed both raw: an escape sequence
// in either (ESC, BEL, a C1 CSI) reached the terminal of whoever ran the
// query (window title, screen clear, clipboard writes), and a line break
// in a name forged a line of the listing. The text output shows control
// characters escaped; the JSON output stays valid JSON.
func TestSecurityQueryTextEscapes(t *testing.T) {
	dir := hostileNamesRepo(t, []string{"a.go", "esc\x1b]0;t\x07\x1b[31m.go", "nl\n   2. forged.go", "c1\u009b31m.go", "bad\xff\x9b.go"})
	data := t.TempDir()
	if _, err := runCLI(t, "index", "--data", data, "--name", "acme/names", dir); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "query", "--data", data, "--repo", "acme/names", "--budget", "4000", "Zorblax")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range out {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r < 0xa0) || (r == utf8.RuneError && !strings.HasPrefix(out[i:], "\uFFFD")) {
			t.Fatalf("text output holds control character %U at byte %d: %q", r, i, out[max(0, i-40):min(len(out), i+40)])
		}
	}
	if strings.Contains(out, "\n   2. forged.go") {
		t.Errorf("a line break in a file name forged a line of the listing:\n%s", out)
	}
	if !strings.Contains(out, `\x1b`) {
		t.Errorf("the escape is not shown escaped:\n%s", out)
	}
	out, err = runCLI(t, "query", "--data", data, "--repo", "acme/names", "--budget", "4000", "--json", "Zorblax")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("--json output is not JSON: %v", err)
	}
}

// TestSecurityErrorTextEscapes: an error can name a tree entry of the
// repository (a subtree whose object is missing fails the listing with
// "tree NAME: object not found"), and main printed it raw to stderr: an
// escape sequence in the name reached the terminal of whoever indexed. It
// is shown escaped now.
func TestSecurityErrorTextEscapes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing.git")
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	st := repo.Storer
	b := testrepo.PutBlob(t, st, "package p\n")
	tree := putRawTree(t, st, []object.TreeEntry{
		{Name: "\x1b]0;pwned\x07\x1b[2K\rindexed 1 file", Mode: filemode.Dir, Hash: plumbing.NewHash("0123456789abcdef0123456789abcdef01234567")},
		{Name: "a.go", Mode: filemode.Regular, Hash: b},
	})
	sig := object.Signature{Name: "t", Email: "t@example.com"}
	c := putObject(t, st, &object.Commit{Author: sig, Committer: sig, Message: "x\n", TreeHash: tree})
	if err := st.SetReference(plumbing.NewHashReference("refs/heads/master", c)); err != nil {
		t.Fatal(err)
	}
	_, err = runCLI(t, "index", "--data", t.TempDir(), "--name", "acme/missing", dir)
	if err == nil {
		t.Fatal("indexed a tree with a missing subtree")
	}
	var out bytes.Buffer
	printError(&out, err)
	if s := out.String(); strings.ContainsAny(strings.TrimSuffix(s, "\n"), "\x1b\x07\r\n") || !strings.Contains(s, `\x1b]0;pwned\x07`) {
		t.Fatalf("error printed as %q", s)
	}
}
