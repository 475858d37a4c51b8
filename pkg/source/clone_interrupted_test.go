package source

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
)

// A clone interrupted before it set HEAD (its process killed during the
// fetch) is not taken for the clone of the origin's default branch: the
// next Open at HEAD reads the origin's default branch, not the branch a
// new bare repository's HEAD names (master, which the origin may have at
// another commit, or not have at all). So is the leftover an older
// version fetched into since.
func TestInterruptedCloneHead(t *testing.T) {
	f := newFixture(t)
	old := f.commit("first", map[string]string{"a.go": "a"})
	main := plumbing.NewBranchReferenceName("main")
	if err := f.repo.Storer.SetReference(plumbing.NewHashReference(main, old)); err != nil {
		t.Fatal(err)
	}
	if err := f.repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, main)); err != nil {
		t.Fatal(err)
	}
	tip := f.commit("second", map[string]string{"b.go": "b"}) // on main; master stays at first
	url := "file://" + filepath.ToSlash(f.dir)

	// leftover makes what clone left when killed before HEAD was set,
	// fetched into by an older version when fetched is set.
	leftover := func(fetched bool) string {
		cache := t.TempDir()
		repo, err := git.PlainInit(filepath.Join(cache, cacheName("", url)), true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := repo.CreateRemote(&config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{url}, Fetch: []config.RefSpec{headsRefSpec}}); err != nil {
			t.Fatal(err)
		}
		if fetched {
			if err := fetch(ctx, repo, Options{}); err != nil {
				t.Fatal(err)
			}
		}
		return cache
	}
	open := func(what, cache string) {
		t.Helper()
		s, err := Open(ctx, url, Options{CacheDir: cache})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		s.Close()
		if s.Commit != tip.String() {
			t.Errorf("%s: Open at HEAD = %s, want the origin's default branch main %s (master is %s)", what, s.Commit, tip, old)
		}
	}
	open("killed during the fetch", leftover(false))

	// The origin without master: the leftover's HEAD names no branch.
	if err := f.repo.Storer.RemoveReference(plumbing.Master); err != nil {
		t.Fatal(err)
	}
	open("fetched since by an older version", leftover(true))
}

// Opens of one URL at once in one process (an activity's retry beside
// its stuck first attempt) clone it once: without a lock on the
// directory, each saw the other's clone unfinished and removed it.
func TestConcurrentClones(t *testing.T) {
	f := newFixture(t)
	for i := range 30 {
		f.commit(fmt.Sprintf("c%d", i), map[string]string{fmt.Sprintf("f%d.go", i): strings.Repeat("x", 4096)})
	}
	head, err := f.repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	url := "file://" + filepath.ToSlash(f.dir)
	cache := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(ctx, url, Options{CacheDir: cache})
			if err == nil {
				if s.Commit != head.Hash().String() {
					err = fmt.Errorf("commit %s, want %s", s.Commit, head.Hash())
				}
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
		}
	}
}
