package source

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// headsRefSpec mirrors the remote branches as local branches, like
// `git clone --bare`, so that a fetch moves HEAD's branch too.
const headsRefSpec = "+refs/heads/*:refs/heads/*"

// openURL clones url bare into the cache (or fetches it when cached) and
// reads opt.Rev from it.
func openURL(ctx context.Context, url string, opt Options) (*Snapshot, error) {
	if opt.CacheDir == "" {
		return nil, errors.New("a clone URL needs Options.CacheDir")
	}
	dir := filepath.Join(opt.CacheDir, cacheName(url))
	repo, err := cached(ctx, dir, url, opt)
	if err != nil {
		return nil, err
	}
	s, err := readRepo(ctx, repo, opt.Rev, "")
	if err != nil {
		return nil, err
	}
	s.Repo = urlName(url)
	return s, nil
}

// cached returns the cached bare clone of url in dir, fetched unless
// offline or unless rev is a full hash already present.
func cached(ctx context.Context, dir, url string, opt Options) (*git.Repository, error) {
	repo, err := git.PlainOpen(dir)
	if err == nil {
		if opt.Offline || hasCommit(repo, opt.Rev) {
			return repo, nil
		}
		if err := fetch(ctx, repo, opt); err != nil {
			return nil, fmt.Errorf("fetch into %s (Options.Offline uses the cached clone): %w", dir, err)
		}
		return repo, nil
	}
	if opt.Offline {
		return nil, fmt.Errorf("offline and no cached clone in %s", dir)
	}
	if _, statErr := os.Stat(dir); statErr == nil {
		// A broken leftover (an interrupted clone): start again.
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
	}
	repo, err = clone(ctx, dir, url, opt)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return repo, nil
}

// clone makes a bare clone of url in dir with all branches and tags.
func clone(ctx context.Context, dir, url string, opt Options) (*git.Repository, error) {
	if err := os.MkdirAll(opt.CacheDir, 0o755); err != nil {
		return nil, err
	}
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		return nil, fmt.Errorf("init %s: %w", dir, err)
	}
	remote, err := repo.CreateRemote(&config.RemoteConfig{
		Name:  git.DefaultRemoteName,
		URLs:  []string{url},
		Fetch: []config.RefSpec{headsRefSpec},
	})
	if err != nil {
		return nil, err
	}
	refs, err := remote.ListContext(ctx, &git.ListOptions{})
	if err != nil {
		return nil, cloneErr(url, err)
	}
	var head *plumbing.Reference
	for _, r := range refs {
		if r.Name() == plumbing.HEAD {
			head = r
		}
	}
	if len(refs) == 0 {
		return nil, ErrEmptyRepo
	}
	if err := fetch(ctx, repo, opt); err != nil {
		return nil, cloneErr(url, err)
	}
	if head != nil {
		if err := repo.Storer.SetReference(head); err != nil {
			return nil, fmt.Errorf("set HEAD: %w", err)
		}
	}
	return repo, nil
}

func cloneErr(url string, err error) error {
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return ErrEmptyRepo
	}
	return fmt.Errorf("clone %s: %w", url, err)
}

// fetch updates all branches and tags from origin.
func fetch(ctx context.Context, repo *git.Repository, opt Options) error {
	err := repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: git.DefaultRemoteName,
		RefSpecs:   []config.RefSpec{headsRefSpec},
		Tags:       git.AllTags,
		Force:      true,
		Progress:   opt.Progress,
	})
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil
	}
	return err
}

// hasCommit reports whether rev is a full commit hash present in repo.
func hasCommit(repo *git.Repository, rev string) bool {
	h, ok := parseHash(rev)
	if !ok {
		return false
	}
	_, err := repo.CommitObject(h)
	return err == nil
}

// cacheName turns url into a directory name: readable, plus a short hash
// so that distinct URLs never share a directory.
func cacheName(url string) string {
	name := url
	if i := strings.Index(name, "://"); i >= 0 {
		name = name[i+3:]
	}
	if i := strings.LastIndexByte(name, '@'); i >= 0 && i < strings.IndexAny(name+"/", "/:") {
		name = name[i+1:] // drop user@
	}
	name = strings.TrimSuffix(strings.TrimRight(name, "/"), ".git")
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			b[i] = '_'
		}
	}
	name = strings.Trim(string(b), "_.")
	if len(name) > 80 {
		name = name[len(name)-80:]
	}
	sum := sha1.Sum([]byte(url))
	return name + "-" + hex.EncodeToString(sum[:4]) + ".git"
}
