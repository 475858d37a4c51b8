package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"codectx/pkg/testrepo"

	"github.com/go-git/go-git/v5"
)

// variant spells the same location differently: n trailing path elements
// "/" or "/." chosen by the bits of i. Every spelling names the same
// directory, and the clone cache's readable name drops them all.
func variant(base string, i, n int) string {
	var b strings.Builder
	b.WriteString(base)
	for k := range n {
		if i>>k&1 == 1 {
			b.WriteString("/.")
		} else {
			b.WriteString("/")
		}
	}
	return b.String()
}

// Two locations must never share a clone directory: the clone found there
// is fetched from its own origin (with whatever credentials that origin
// takes: the server's SSH agent for an ssh URL an operator indexed) and
// read as the other location's. The readable part of the name folds every
// character but letters, digits, '.' and '-' into '_' and trims them at
// the ends, so a tenant can spell a URL with the same readable part as
// another tenant's (https://github.com/acme/private?&= and
// git@github.com:acme/private.git), and the name's hash of 32 bits is
// found by brute force (about 2^32 SHA-1 for a given URL; here both sides
// vary, so a birthday search needs about 2^16 each).
func TestSecurityCloneCacheCollision(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string, files map[string]string) string {
		r := testrepo.New(t)
		r.Commit("init", files)
		dst := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := git.PlainClone(dst, false, &git.CloneOptions{URL: r.Dir}); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	acme := mk("acme/private", map[string]string{"vault/secret.go": "package vault\n\nconst Token = \"ACME-PRIVATE\"\n"})
	beta := mk("acme_private", map[string]string{"beta.go": "package beta\n"})

	const bits = 17
	seen := make(map[string]string, 1<<bits)
	for i := range 1 << bits {
		u := variant("file://"+acme, i, bits)
		seen[cacheName("", u)] = u
	}
	var acmeURL, betaURL string
	for j := range 1 << 19 {
		u := variant("file://"+beta, j, 19)
		if a, ok := seen[cacheName("", u)]; ok {
			acmeURL, betaURL = a, u
			break
		}
	}
	if acmeURL == "" {
		return // no two locations found sharing a directory
	}
	t.Errorf("%s and %s share the clone directory %s", acmeURL, betaURL, cacheName("", betaURL))

	cache := t.TempDir()
	ctx := context.Background()
	a, err := Open(ctx, acmeURL, Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	b, err := Open(ctx, betaURL, Options{CacheDir: cache})
	if err != nil {
		return // refused: at least not read as the other location
	}
	defer b.Close()
	for _, f := range b.Files {
		if f.Path == "vault/secret.go" {
			t.Errorf("opening %s read the clone of %s: %v", betaURL, acmeURL, b.Files)
		}
	}
}

// A clone directory whose origin is another URL (a name shared by
// accident, or a directory placed there) is not taken as the clone of
// the URL asked for.
func TestCachedChecksOrigin(t *testing.T) {
	r := testrepo.New(t)
	r.Commit("init", map[string]string{"a.go": "package a\n"})
	other := testrepo.New(t)
	other.Commit("init", map[string]string{"b.go": "package b\n"})
	cache := t.TempDir()
	dir := filepath.Join(cache, "shared.git")
	ctx := context.Background()
	if _, err := cached(ctx, dir, "file://"+r.Dir, Options{CacheDir: cache}); err != nil {
		t.Fatal(err)
	}
	if _, err := cached(ctx, dir, "file://"+other.Dir, Options{CacheDir: cache}); err == nil {
		t.Errorf("the clone of %s was taken for %s", r.Dir, other.Dir)
	}
	if _, err := cached(ctx, dir, "file://"+r.Dir, Options{CacheDir: cache}); err != nil {
		t.Errorf("the clone of its own origin: %v", err)
	}
}
