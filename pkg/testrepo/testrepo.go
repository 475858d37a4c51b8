// Package testrepo builds small git repositories for tests: a working tree
// with commits made through go-git, so tests need no git binary.
package testrepo

import (
	"errors"
	"io"
	"log"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Repo is a non-bare repository in a temp dir.
type Repo struct {
	Dir string
	r   *git.Repository
	t   testing.TB
	n   int
}

// New creates an empty repository.
func New(t testing.TB) *Repo {
	t.Helper()
	dir := t.TempDir()
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatalf("testrepo: init: %v", err)
	}
	return &Repo{Dir: dir, r: r, t: t}
}

// Commit writes files (path -> content; "" content deletes the file) and
// commits them, returning the commit hash.
func (r *Repo) Commit(msg string, files map[string]string) string {
	r.t.Helper()
	return r.CommitAs(object.Signature{Name: "Test", Email: "test@example.com"}, msg, files)
}

// CommitAs is Commit by author (its When, if zero, is the next minute of
// the repository's clock, as Commit's).
func (r *Repo) CommitAs(author object.Signature, msg string, files map[string]string) string {
	r.t.Helper()
	wt, err := r.r.Worktree()
	if err != nil {
		r.t.Fatalf("testrepo: worktree: %v", err)
	}
	// Deletions through the worktree; the rest written and staged in the
	// index directly, in one write: wt.Add reads the whole worktree's
	// status for each path, so a commit of 3,000 files took over a minute.
	for p, content := range files {
		if content == "" {
			if _, err := wt.Remove(p); err != nil {
				r.t.Fatalf("testrepo: remove %s: %v", p, err)
			}
		}
	}
	idx, err := r.r.Storer.Index()
	if err != nil {
		r.t.Fatalf("testrepo: index: %v", err)
	}
	for p, content := range files {
		if content == "" {
			continue
		}
		full := filepath.Join(r.Dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatalf("testrepo: %v", err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			r.t.Fatalf("testrepo: %v", err)
		}
		fi, err := os.Stat(full)
		if err != nil {
			r.t.Fatalf("testrepo: %v", err)
		}
		h := PutBlob(r.t, r.r.Storer, content)
		e, err := idx.Entry(p)
		if err != nil {
			e = idx.Add(p)
		}
		e.Hash, e.Mode, e.Size, e.ModifiedAt = h, filemode.Regular, uint32(fi.Size()), fi.ModTime()
	}
	if err := r.r.Storer.SetIndex(idx); err != nil {
		r.t.Fatalf("testrepo: index: %v", err)
	}
	r.n++
	if author.When.IsZero() {
		author.When = time.Date(2024, 1, 1, 0, r.n, 0, 0, time.UTC)
	}
	h, err := wt.Commit(msg, &git.CommitOptions{Author: &author})
	if err != nil {
		r.t.Fatalf("testrepo: commit: %v", err)
	}
	return h.String()
}

// PutBlob writes a blob of content into st and returns its hash.
func PutBlob(t testing.TB, st storer.EncodedObjectStorer, content string) plumbing.Hash {
	t.Helper()
	obj := st.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	if err == nil {
		_, err = io.WriteString(w, content)
	}
	if err == nil {
		err = w.Close()
	}
	h, err2 := st.SetEncodedObject(obj)
	if err = errors.Join(err, err2); err != nil {
		t.Fatalf("testrepo: blob: %v", err)
	}
	return h
}

// Bare makes a bare clone of the repository and returns its directory.
func (r *Repo) Bare() string {
	r.t.Helper()
	dir := filepath.Join(r.t.TempDir(), "bare.git")
	if _, err := git.PlainClone(dir, true, &git.CloneOptions{URL: r.Dir}); err != nil {
		r.t.Fatalf("testrepo: bare clone: %v", err)
	}
	return dir
}

// Small is a tiny multi-language project used across tests.
var Small = map[string]string{
	"go.mod": "module example.com/shop\n\ngo 1.22\n",
	"cart/cart.go": `// Package cart holds shopping carts.
package cart

import "example.com/shop/price"

// Cart is a shopping cart.
type Cart struct {
	Items []Item
}

// Item is one line of a cart.
type Item struct {
	SKU   string
	Count int
}

// Total sums the cart with the current prices.
func (c *Cart) Total() int {
	sum := 0
	for _, it := range c.Items {
		sum += price.Lookup(it.SKU) * it.Count
	}
	return sum
}
`,
	"price/price.go": `// Package price looks up prices.
package price

var table = map[string]int{"apple": 3}

// Lookup returns the price of a SKU in cents.
func Lookup(sku string) int {
	return table[sku]
}
`,
	"auth/session.py": `"""Session handling."""

import hashlib


class SessionStore:
    """Stores login sessions."""

    def create_session(self, user_id):
        """Create a session token for a user."""
        return hashlib.sha256(str(user_id).encode()).hexdigest()

    def expire_sessions(self, before):
        """Drop sessions older than before."""
        return []
`,
	"README.md": "# shop\n\nA tiny shop used in tests.\n",
}

// SmartHTTP serves the repositories under root by git's smart HTTP
// protocol on loopback until the test ends, and returns its base URL
// (http://127.0.0.1:PORT; ROOT/NAME/.git is URL/NAME/.git). It runs git
// http-backend, so unlike the rest of this package it needs git.
func SmartHTTP(t testing.TB, root string) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	srv := httptest.NewServer(&cgi.Handler{
		Path:   filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env:    []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
		Logger: log.New(io.Discard, "", 0), // a fetch the client refuses breaks its pipe
	})
	t.Cleanup(srv.Close)
	return srv.URL
}
