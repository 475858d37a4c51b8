package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"codectx/pkg/location"
	"codectx/pkg/netguard"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// headsRefSpec mirrors the remote branches as local branches, like
// `git clone --bare`, so that a fetch moves HEAD's branch too.
const headsRefSpec = "+refs/heads/*:refs/heads/*"

// openURL clones url bare into the cache (or fetches it when cached) and
// reads opt.Rev from it.
func openURL(ctx context.Context, url string, loc location.Location, opt Options) (*Snapshot, error) {
	if opt.CacheDir == "" {
		return nil, errors.New("a clone URL needs Options.CacheDir")
	}
	if opt.Net != nil && loc.Kind == location.Remote {
		// An early answer without a fetch: every scheme is checked again
		// when dialled (HTTP(S) by guardedHTTP, ssh and git by guard.go).
		host, port := loc.HostPort()
		if err := opt.Net.Check(ctx, host, port); err != nil {
			return nil, err
		}
		ctx = netguard.With(ctx, opt.Net)
	}
	if loc.Kind == location.Remote {
		// Only what a tenant may name is limited: a local repository
		// (an operator's) is on this machine already, and go-git's
		// file transport cannot stop its git-upload-pack mid-pack.
		opt.fetchBytes = fetchLimit(ctx)
	}
	dir := filepath.Join(opt.CacheDir, cacheName(opt.Tenant, url))
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return nil, err
	}
	repo, err := cached(ctx, dir, url, opt)
	unlock()
	if err != nil {
		return nil, err
	}
	s, err := readRepo(ctx, repo, "", opt)
	if err != nil {
		return nil, err
	}
	s.Repo = urlName(url)
	return s, nil
}

// dirLocks holds a lock per clone directory of this process: a clone, a
// fetch or the removal of an unfinished clone is one at a time in a
// directory. Two at once (an activity's retry beside its stuck first
// attempt) saw each other's clone unfinished and removed it, or wrote
// the same packs.
var dirLocks sync.Map // dir -> chan struct{} (one token)

// lockDir takes dir's lock, or fails when ctx ends first.
func lockDir(ctx context.Context, dir string) (unlock func(), err error) {
	v, _ := dirLocks.LoadOrStore(dir, make(chan struct{}, 1))
	ch := v.(chan struct{})
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the clone in %s: %w", filepath.Base(dir), ctx.Err())
	}
}

// cached returns the cached bare clone of url in dir, fetched unless
// offline or unless rev is a full hash already present.
func cached(ctx context.Context, dir, url string, opt Options) (*git.Repository, error) {
	repo, err := git.PlainOpen(dir)
	if err == nil {
		// The directory is this URL's clone only if its origin is this
		// URL: a clone of another location (two names folded onto one
		// directory) would be fetched from that location, with its
		// credentials, and read as this one.
		if r, rerr := repo.Remote(git.DefaultRemoteName); rerr != nil || len(r.Config().URLs) == 0 || r.Config().URLs[0] != url {
			return nil, fmt.Errorf("clone cache: %s holds the clone of another location than %s", filepath.Base(dir), Redact(url))
		}
		if !complete(repo) {
			// A clone interrupted before its fetch ended (its process
			// killed), or one an older version left so: its HEAD may name
			// a branch the origin does not have, or another than the
			// origin's default. Fetched, it would fail at HEAD on every
			// snapshot, or read that other branch.
			err = errInterrupted
		}
	}
	if err == nil {
		if opt.Offline || hasCommit(repo, opt.Rev) {
			return repo, nil
		}
		if limit := opt.fetchBytes; limit > 0 {
			// The fetch writes through a handle that counts its bytes;
			// repo is opened again after it, to see the new packs.
			if repo, err = openBudget(dir, limit); err != nil {
				return nil, err
			}
		}
		if err := fetch(ctx, repo, opt); err != nil {
			removeTemps(dir)
			return nil, fmt.Errorf("fetch %s (Options.Offline uses the cached clone): %w", Redact(url), err)
		}
		if opt.fetchBytes > 0 {
			return git.PlainOpen(dir)
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
	limit := opt.fetchBytes
	if limit > 0 {
		// What the clone writes is counted (ErrTooLarge past the limit);
		// the caller removes the partial clone.
		if repo, err = openBudget(dir, limit); err != nil {
			return nil, err
		}
	}
	remote, err := repo.CreateRemote(&config.RemoteConfig{
		Name:  git.DefaultRemoteName,
		URLs:  []string{url},
		Fetch: []config.RefSpec{headsRefSpec},
	})
	if err != nil {
		return nil, err
	}
	px, done := guardProxy(ctx, url)
	defer done()
	refs, err := remote.ListContext(ctx, &git.ListOptions{ProxyOptions: px})
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
	// HEAD first: a clone cut short after its fetch (branches there, HEAD
	// not yet set) would otherwise name the branch a new repository's
	// HEAD does.
	if head != nil {
		if err := repo.Storer.SetReference(head); err != nil {
			return nil, fmt.Errorf("set HEAD: %w", err)
		}
	}
	if err := fetch(ctx, repo, opt); err != nil {
		return nil, cloneErr(url, err)
	}
	if limit > 0 {
		return git.PlainOpen(dir)
	}
	return repo, nil
}

func cloneErr(url string, err error) error {
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return ErrEmptyRepo
	}
	return fmt.Errorf("clone %s: %w", Redact(url), err)
}

// fetch updates all branches and tags from origin, and removes the
// branches the origin no longer has.
func fetch(ctx context.Context, repo *git.Repository, opt Options) error {
	var px transport.ProxyOptions
	if r, err := repo.Remote(git.DefaultRemoteName); err == nil && len(r.Config().URLs) > 0 {
		var done func()
		px, done = guardProxy(ctx, r.Config().URLs[0])
		defer done()
	}
	err := repo.FetchContext(ctx, &git.FetchOptions{
		ProxyOptions: px,
		RemoteName:   git.DefaultRemoteName,
		RefSpecs:     []config.RefSpec{headsRefSpec},
		Tags:         git.AllTags,
		Force:        true,
		// A branch deleted at the origin goes here too: its old tip was
		// read as the branch's (a reindex, the webhook's branch check).
		Prune:    true,
		Progress: opt.Progress,
	})
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil
	}
	return err
}

// errInterrupted marks a cached clone whose first fetch never ended.
var errInterrupted = errors.New("clone interrupted before its fetch ended")

// complete reports whether repo is a finished clone: it has a branch (a
// clone's fetch writes them last) and its HEAD resolves (a clone sets it
// to the origin's).
func complete(repo *git.Repository) bool {
	it, err := repo.Branches()
	if err != nil {
		return false
	}
	defer it.Close()
	if _, err := it.Next(); err != nil {
		return false
	}
	_, err = repo.Head()
	return err == nil
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

// cacheName turns tenant's url into a directory name: the tenant, "@",
// the URL made readable, and a hash of 128 bits of both, so that distinct
// URLs never share a directory (the readable part folds many URLs into
// one, and a hash of 32 bits was found by brute force for a URL of
// another tenant's) and neither do two tenants' clones of one URL (a
// clone found there, or a fetch with nothing new to bring, would tell a
// tenant by its time that another had fetched the URL). The user
// information of the URL (user:token@) is never part of the readable name.
// Names of the old layout, shared by every tenant, have no "@" (see
// SharedCacheName).
func cacheName(tenant, url string) string {
	name := Redact(url)
	if i := strings.Index(name, "://"); i >= 0 {
		name = name[i+3:]
	} else if i := strings.IndexByte(name, '@'); i >= 0 && i < strings.IndexByte(name, ':') {
		name = name[i+1:] // scp-like user@host:path
	}
	name = strings.TrimSuffix(strings.TrimRight(name, "/"), ".git")
	name = strings.Trim(fold(name), "_.")
	if len(name) > 80 {
		name = name[len(name)-80:]
	}
	t := fold(tenant)
	if len(t) > 64 {
		t = t[:64] // the hash tells tenants apart
	}
	sum := sha256.Sum256([]byte(tenant + "\x00" + url))
	return t + "@" + name + "-" + hex.EncodeToString(sum[:16]) + ".git"
}

// fold turns every byte of s but letters, digits, '.' and '-' into '_'.
func fold(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// SharedCacheName reports whether name, an entry of a clone cache, is a
// clone of the old layout, which every tenant shared: no clone is opened
// there any more. It has that layout's shape exactly (a readable name
// without "@", a hash of 128 bits, or of 32 in older versions, and
// ".git"), so that nothing else an operator keeps there matches.
func SharedCacheName(name string) bool { return sharedName.MatchString(name) }

var sharedName = regexp.MustCompile(`^[A-Za-z0-9._-]*-([0-9a-f]{8}|[0-9a-f]{32})\.git$`)

// guardedHTTP is go-git's HTTP(S) transport for every clone of this
// process: a fetch whose context carries a netguard.Policy dials through
// it (on a transport without pooled connections, so that every connection
// is checked), and follows a redirect only to a host the policy allows.
// Without a policy it is the default transport.
type guardedHTTP struct{ plain, guarded http.RoundTripper }

func (g guardedHTTP) RoundTrip(r *http.Request) (*http.Response, error) {
	if netguard.From(r.Context()) != nil {
		return g.guarded.RoundTrip(r)
	}
	return g.plain.RoundTrip(r)
}

func init() {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // a proxy would dial for us, unchecked
	tr.DisableKeepAlives = true
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		p := netguard.From(ctx)
		if p == nil {
			p = &netguard.Policy{} // unreachable: only requests with a policy come here
		}
		return p.DialContext(ctx, network, addr)
	}
	hc := &http.Client{
		Transport: guardedHTTP{plain: http.DefaultTransport, guarded: tr},
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("too many redirects")
			}
			p := netguard.From(r.Context())
			if p == nil {
				return nil
			}
			if r.URL.Scheme != "https" && r.URL.Scheme != "http" {
				return fmt.Errorf("redirect: %w", netguard.ErrRefused)
			}
			if p.Restricted() && !p.Trusted(r.URL.Hostname(), r.URL.Port()) {
				return fmt.Errorf("redirect to host %s: %w", r.URL.Hostname(), netguard.ErrRefused)
			}
			return nil
		},
	}
	client.InstallProtocol("https", githttp.NewClient(hc))
	client.InstallProtocol("http", githttp.NewClient(hc))
}
