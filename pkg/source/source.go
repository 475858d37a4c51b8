// Package source reads one snapshot of a repository: the list of regular
// files at a revision, their git blob hashes and sizes, their contents, and
// the first-parent history behind that revision.
//
// A location can be
//   - a plain directory without git: the file system is walked, .gitignore
//     files are honoured and blob hashes are computed from content;
//   - a git clone (with a work tree) or a bare git directory: the tree of
//     Options.Rev is read from git objects, never from the work tree;
//   - a subdirectory of a clone: the matching subtree of Options.Rev, with
//     paths relative to that subdirectory;
//   - a clone URL (http(s)://, ssh://, git://, file://, user@host:path): the
//     repository is cloned bare into Options.CacheDir, or fetched when it is
//     already there, then read like a bare directory. Network URLs need the
//     host to be reachable (ssh uses the running ssh-agent); with
//     Options.Offline an existing cached clone is used as it is.
//
// Symlinks, submodules and Git LFS pointer files are never read; they are
// listed in Snapshot.Skipped with the codectx skip reasons.
package source

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"codectx/pkg/location"
	"codectx/pkg/netguard"

	"github.com/go-git/go-git/v5"
)

// ErrEmptyRepo is returned (wrapped) when a git repository has no commits.
var ErrEmptyRepo = errors.New("repository has no commits")

// ErrRevisionNotFound is returned (wrapped) when Options.Rev names nothing.
var ErrRevisionNotFound = errors.New("revision not found")

// SkipMissingObject is the skip reason of a file whose blob is absent from
// the object store (partial clones).
const SkipMissingObject = "missing_object"

// SkipBadName is the skip reason of a tree entry whose name git would not
// check out ("", ".", "..", ".git", a slash, backslash or NUL in it) or
// that its tree names twice; it is listed quoted.
const SkipBadName = "bad_name"

// SkipPathTooLong is the skip reason of a tree entry whose path is longer
// than MaxPathBytes; a directory's entries under it are not walked.
const SkipPathTooLong = "path_too_long"

// MaxPathBytes bounds the length of a listed path (Linux's PATH_MAX). Every
// level of a tree walk holds its path, so without a bound a chain of
// nested trees costs memory quadratic in its depth.
const MaxPathBytes = 4096

// MaxEntries bounds the entries (files, skipped entries and directories)
// a git listing walks. A tree names its subtrees by hash, so a few small
// trees that each name the next one many times describe billions of files.
const MaxEntries = 1 << 21

// ErrTooManyEntries is returned (wrapped) by Open when the tree of the
// revision has more than MaxEntries entries, or paths longer in all than
// MaxListingBytes.
var ErrTooManyEntries = errors.New("the tree has more entries than the server lists")

// Options tune Open.
type Options struct {
	CacheDir string    // where clone URLs are cloned/fetched (bare); required for URLs
	Tenant   string    // whose clone: each tenant has its own clone of a URL in CacheDir
	Rev      string    // revision: branch, tag, full or short hash, "HEAD~2"; "" = HEAD
	Progress io.Writer // optional: clone and fetch progress
	Name     string    // optional: Snapshot.Repo; derived from the location when empty
	Offline  bool      // URLs: use the cached clone without fetching (it must exist)
	// Net, when set (or carried by the context, netguard.With), limits
	// where clone URLs may reach (see pkg/netguard):
	// HTTP(S) connections are checked when dialled, on the resolved
	// address and after every redirect; ssh and git hosts are resolved
	// and checked before the fetch. Nil: no limit (the command line).
	Net *netguard.Policy
	// NoList opens the snapshot for reading only: Files and Skipped stay
	// empty (no tree walk, no directory walk) and Read reads the files it
	// is given, by blob hash in git modes and by path in plain
	// directories. For workers handed the files of a snapshot listed
	// before (the parse stage); Commit is still resolved.
	NoList bool
	// Base is the listing of a tree listed before (an earlier snapshot of
	// the repository): a subtree whose hash is unchanged takes its files
	// and skipped entries from it instead of being walked, and an
	// unchanged file keeps its listed size. The listing is the same as a
	// full walk's: a tree's listing depends only on its content, except
	// for blobs missing from the object store, so a subtree with a file
	// skipped as missing is walked again. Git only; ignored when
	// Base.Tree is empty.
	Base *Listing

	fetchBytes int64 // a remote clone's limit (netguard.Policy.FetchBytes)
}

// Listing is the listing of one git tree: its hash and the files and
// skipped entries a walk of it found (Snapshot.Tree, Files and Skipped).
type Listing struct {
	Tree    string
	Files   []File    // sorted by Path
	Skipped []Skipped // sorted by Path
}

// File is a regular file of the snapshot.
type File struct {
	Path string // slash-separated, relative to the snapshot root
	Blob string // git blob hash, hex (computed like `git hash-object` for plain directories)
	Size int64
}

// Skipped is an entry that is not a readable regular file.
type Skipped struct {
	Path   string // slash-separated; ignored directories end in "/"
	Reason string // codectx.SkipSubmodule, SkipLFSPointer, SkipSymlink, SkipIgnored, SkipMissingObject, SkipPathTooLong, SkipBadName
}

// Commit is one entry of Snapshot.History.
type Commit struct {
	Hash    string
	Author  string // "Name <email>"
	Message string // full message, trailing newlines trimmed
	When    time.Time
	Files   []string // paths changed vs the first parent (added, modified, deleted), sorted
}

// Snapshot is a repository at one revision. Its methods are safe for
// concurrent use.
type Snapshot struct {
	Repo    string    // name: Options.Name, or derived from the URL or directory
	Commit  string    // full hex commit hash; "" for a plain directory without git
	Tree    string    // hash of the tree listed (git; "" for a plain directory or NoList)
	Files   []File    // sorted by Path; regular files only
	Skipped []Skipped // sorted by Path

	src reader
	// onClose runs once at Close (the clone cache's use count).
	onClose func()
}

// OnClose makes Close run f once, after the snapshot's files are closed.
func (s *Snapshot) OnClose(f func()) { s.onClose = f }

// reader is how a snapshot reads contents and history.
type reader interface {
	read(f File) ([]byte, error)
	history(ctx context.Context, limit int, base *HistoryBase) ([]Commit, error)
	close() error
}

// Open reads the snapshot at location (see the package doc for the kinds of
// location).
func Open(ctx context.Context, where string, opt Options) (*Snapshot, error) {
	if where == "" {
		return nil, errors.New("open: empty location")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open %s: %w", Redact(where), err)
	}
	var s *Snapshot
	if opt.Net == nil {
		opt.Net = netguard.From(ctx)
	}
	loc, err := location.Parse(where)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", Redact(where), err)
	}
	if loc.Kind == location.Remote || loc.Scheme == "file" {
		s, err = openURL(ctx, where, loc, opt)
	} else {
		s, err = openPath(ctx, where, opt)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", Redact(where), err)
	}
	if opt.Name != "" {
		s.Repo = opt.Name
	}
	return s, nil
}

// Read returns the content of f: from its blob in git modes, from disk for
// plain directories.
func (s *Snapshot) Read(f File) ([]byte, error) {
	b, err := s.src.read(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Path, err)
	}
	return b, nil
}

// History returns up to limit commits (all when limit <= 0) of the
// first-parent log from s.Commit backwards, newest first, each with the
// files it changed against its first parent (a root commit lists all its
// files). For a subdirectory snapshot only commits touching it are listed,
// with paths relative to it. It is empty for plain directories.
func (s *Snapshot) History(ctx context.Context, limit int) ([]Commit, error) {
	return s.HistoryFrom(ctx, limit, nil)
}

// HistoryBase is the history of an earlier snapshot of the whole tree of
// a repository: its commit, the tree it listed (Snapshot.Tree), the limit
// its history was read with (<= 0: all) and the commits read.
type HistoryBase struct {
	Commit, Tree string
	Limit        int
	Commits      []Commit
}

// HistoryFrom is History taking the commits from base.Commit back from
// base instead of diffing them again, when the first-parent log reaches
// base.Commit and base holds as many commits as are still wanted (or all
// there are). The result is History's: base is used only when it is the
// history of the whole tree of base.Commit in this repository (its Tree is
// that commit's tree) and s is not of a subdirectory.
func (s *Snapshot) HistoryFrom(ctx context.Context, limit int, base *HistoryBase) ([]Commit, error) {
	cs, err := s.src.history(ctx, limit, base)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", s.Repo, err)
	}
	return cs, nil
}

// WorktreePrefix starts the ContentName of a snapshot without a commit.
const WorktreePrefix = "worktree-"

// ContentName names a snapshot by its content, for plain directories that
// have no commit: "worktree-" and 12 hex digits of a hash over every path
// and blob hash, so the same tree always gets the same name.
func (s *Snapshot) ContentName() string {
	h := sha1.New()
	for _, f := range s.Files {
		io.WriteString(h, f.Path)
		h.Write([]byte{0})
		io.WriteString(h, f.Blob)
		h.Write([]byte{'\n'})
	}
	return WorktreePrefix + hex.EncodeToString(h.Sum(nil))[:12]
}

// Close releases the files held by the snapshot.
func (s *Snapshot) Close() error {
	err := s.src.close()
	if f := s.onClose; f != nil {
		s.onClose = nil
		f()
	}
	return err
}

// CloneDir is the directory of tenant's cached clone of location in
// cacheDir, "" when location is not a clone URL (a local path is read in
// place).
func CloneDir(cacheDir, tenant, location string) string {
	if !isURL(location) || cacheDir == "" {
		return ""
	}
	return filepath.Join(cacheDir, cacheName(tenant, location))
}

// openPath opens a local directory: a git repository, a subdirectory of a
// work tree or a plain directory.
func openPath(ctx context.Context, dir string, opt Options) (*Snapshot, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, errors.New("not a directory")
	}
	s, err := openGitDir(ctx, abs, opt)
	if err == nil || !errors.Is(err, errNotGit) {
		return s, err
	}
	s, err = walkDir(ctx, abs, opt.NoList)
	if err != nil {
		return nil, err
	}
	s.Repo = dirName(abs)
	return s, nil
}

// IsURL reports whether Open reads where as a clone URL (a remote location
// or a file:// URL) rather than as a local path; the classifier is
// pkg/location, shared with the API.
func IsURL(where string) bool { return isURL(where) }

func isURL(where string) bool {
	l, err := location.Parse(where)
	return err == nil && (l.Kind == location.Remote || l.Scheme == "file")
}

// Redact drops the user information (user:token@) of a URL, for messages
// and logs.
func Redact(where string) string {
	if i := strings.Index(where, "://"); i >= 0 {
		rest := where[i+3:]
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
			return where[:i+3] + rest[at+1:]
		}
	}
	return where
}

// RepoName is the name Open gives the repository at location: "owner/name"
// for a URL on a host, the directory name (without ".git") for a path.
func RepoName(where string) string {
	if isURL(where) {
		return urlName(where)
	}
	abs, err := filepath.Abs(where)
	if err != nil {
		abs = where
	}
	if repo, err := git.PlainOpenWithOptions(abs, &git.PlainOpenOptions{EnableDotGitCommonDir: true}); err == nil {
		return gitDirName(repo, abs)
	}
	return dirName(abs)
}

// gitDirName names the repository at abs (its work tree, .git or bare
// directory; not a subdirectory) after its origin when that is a network
// URL, so that a local clone of a hosted repository has the name the same
// repository gets by URL ("owner/name"); otherwise after its directory.
func gitDirName(repo *git.Repository, abs string) string {
	if r, err := repo.Remote(git.DefaultRemoteName); err == nil && len(r.Config().URLs) > 0 {
		u := r.Config().URLs[0]
		if l, err := location.Parse(u); err == nil && l.Kind == location.Remote {
			return urlName(u)
		}
	}
	return dirName(abs)
}

// dirName names a repository after its directory: "proj" for proj,
// proj/.git and proj.git.
func dirName(abs string) string {
	abs = filepath.Clean(abs)
	base := filepath.Base(abs)
	if base == ".git" {
		base = filepath.Base(filepath.Dir(abs))
	}
	if b := strings.TrimSuffix(base, ".git"); b != "" {
		base = b
	}
	return base
}

// urlName names a repository after its URL: "owner/name" when the path has
// two or more segments on a host, the last segment for file:// URLs.
func urlName(u string) string {
	rest := u
	local := strings.HasPrefix(u, "file://")
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
		if j := strings.IndexByte(rest, '/'); j >= 0 && !local {
			rest = rest[j+1:] // drop host
		}
	} else if i := strings.IndexByte(rest, ':'); i >= 0 {
		rest = rest[i+1:] // user@host:path
	}
	rest = strings.TrimSuffix(strings.Trim(rest, "/"), ".git")
	rest = strings.TrimSuffix(rest, "/")
	segs := strings.Split(rest, "/")
	if local || len(segs) < 2 {
		return dirName(segs[len(segs)-1])
	}
	return segs[len(segs)-2] + "/" + segs[len(segs)-1]
}
