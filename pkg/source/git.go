package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"codectx/pkg/codectx"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// errNotGit means a directory is to be walked as a plain directory.
var errNotGit = errors.New("not a git repository")

// lfsPrefix starts every Git LFS pointer file; pointers are under 1024 bytes.
const (
	lfsPrefix  = "version https://git-lfs.github.com/spec/v1"
	lfsMaxSize = 1024
)

// gitReader reads blobs and history of one repository. go-git's object
// storage is not safe for concurrent use, so every access holds mu.
type gitReader struct {
	mu     sync.Mutex
	repo   *git.Repository
	closer io.Closer // the storage of repo, when it holds open files
	commit *object.Commit
	sub    string     // subtree the snapshot is rooted at, "" for the whole tree
	costs  *packCosts // opened on first use; nil without packs on disk
	cerr   error      // why costs could not be opened
	copen  bool
}

// packCosts returns the repository's pack header reader (nil when its
// storage is not on disk). The caller holds g.mu, or is the listing.
func (g *gitReader) packCosts() (*packCosts, error) {
	if !g.copen {
		g.copen = true
		if st, ok := g.repo.Storer.(*filesystem.Storage); ok {
			g.costs, g.cerr = openPackCosts(st.Filesystem())
		}
	}
	return g.costs, g.cerr
}

// maxOpenPacks bounds the pack files a snapshot keeps open.
const maxOpenPacks = 64

// objectCacheBytes bounds go-git's cache of decoded objects (delta bases
// among them). Its default, 96 MiB, stays live for the snapshot's life:
// indexing reads each blob once, and under the indexer's soft memory limit
// a cache that size made the collector mark it over and over.
const objectCacheBytes = 16 * cache.MiByte

// reopen returns repo with an object storage that keeps pack files open
// between reads: go-git otherwise reopens the pack for every object, which
// dominates the cost of listing a large tree. The caller closes the
// returned io.Closer (nil when repo is returned as it is).
func reopen(repo *git.Repository) (*git.Repository, io.Closer, error) {
	st, ok := repo.Storer.(*filesystem.Storage)
	if !ok {
		return repo, nil, nil
	}
	fst := filesystem.NewStorageWithOptions(st.Filesystem(), cache.NewObjectLRU(objectCacheBytes),
		filesystem.Options{MaxOpenDescriptors: maxOpenPacks})
	r, err := git.Open(fst, nil)
	if err != nil {
		return nil, nil, err
	}
	return r, fst, nil
}

// openGitDir opens abs as a git repository (work tree, .git or bare
// directory) or as a subdirectory of a work tree. It returns errNotGit when
// abs is to be walked as a plain directory instead.
func openGitDir(ctx context.Context, abs string, opt Options) (*Snapshot, error) {
	repo, err := git.PlainOpenWithOptions(abs, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if err == nil {
		s, err := readRepo(ctx, repo, "", opt)
		if err != nil {
			return nil, err
		}
		s.Repo = gitDirName(repo, abs)
		return s, nil
	}
	if !errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, err
	}
	repo, err = git.PlainOpenWithOptions(abs, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		return nil, errNotGit
	}
	sub, ok := subdir(repo, abs)
	if !ok {
		return nil, errNotGit
	}
	s, err := readRepo(ctx, repo, sub, opt)
	if errors.Is(err, errNoSubtree) || (opt.Rev == "" && errors.Is(err, ErrEmptyRepo)) {
		// Untracked, ignored, or inside a repository without commits.
		return nil, errNotGit
	}
	if err != nil {
		return nil, err
	}
	s.Repo = dirName(abs)
	return s, nil
}

// subdir returns the slash path of abs inside the work tree of repo.
func subdir(repo *git.Repository, abs string) (string, bool) {
	wt, err := repo.Worktree()
	if err != nil {
		return "", false
	}
	root, err := filepath.EvalSymlinks(wt.Filesystem.Root())
	if err != nil {
		return "", false
	}
	dir, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", false
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

var errNoSubtree = errors.New("directory not in the tree")

// readRepo lists the tree of opt.Rev (under sub when not empty), from
// opt.Base where its subtrees are unchanged; with opt.NoList it lists
// nothing.
func readRepo(ctx context.Context, repo *git.Repository, sub string, opt Options) (_ *Snapshot, err error) {
	repo, closer, err := reopen(repo)
	if err != nil {
		return nil, err
	}
	g := &gitReader{repo: repo, closer: closer, sub: sub}
	defer func() {
		if err != nil {
			g.close()
		}
	}()
	commit, err := resolve(repo, opt.Rev)
	if err != nil {
		return nil, err
	}
	g.commit = commit
	tree, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", commit.Hash, err)
	}
	if sub != "" {
		tree, err = tree.Tree(sub)
		if err != nil {
			return nil, fmt.Errorf("%s at %s: %w", sub, commit.Hash, errNoSubtree)
		}
	}
	s := &Snapshot{Commit: commit.Hash.String(), src: g}
	if opt.NoList {
		return s, nil
	}
	s.Tree = tree.Hash.String()
	w := treeWalker{ctx: ctx, repo: repo, snap: s}
	if sz, ok := repo.Storer.(objectSizer); ok {
		w.sizer = sz
	}
	if w.costs, err = g.packCosts(); err != nil {
		return nil, err
	}
	var base *object.Tree
	if b := opt.Base; b != nil && b.Tree != "" {
		if h, ok := parseHash(b.Tree); ok {
			if base, err = repo.TreeObject(h); err == nil {
				w.base = b
			} else {
				base = nil // not in this repository: walk it all
			}
		}
	}
	if err := w.walk(tree, "", base); err != nil {
		return nil, err
	}
	sortSnapshot(s)
	return s, nil
}

// resolve finds the commit of rev ("" = HEAD).
func resolve(repo *git.Repository, rev string) (*object.Commit, error) {
	if rev == "" {
		rev = "HEAD"
	}
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		// go-git peels one tag: a tag of a tag is not resolved.
		if ref, rerr := repo.Tag(rev); rerr == nil {
			if c, perr := peelTags(repo, ref.Hash()); perr == nil {
				return c, nil
			}
		}
	}
	if err != nil && !strings.HasPrefix(rev, "HEAD") {
		// A branch known only as a remote-tracking ref.
		if h2, err2 := repo.ResolveRevision(plumbing.Revision("origin/" + rev)); err2 == nil {
			h, err = h2, nil
		}
	}
	if err != nil {
		if isEmpty(repo) {
			return nil, ErrEmptyRepo
		}
		if errors.Is(err, plumbing.ErrReferenceNotFound) || errors.Is(err, plumbing.ErrObjectNotFound) {
			return nil, fmt.Errorf("%w: %q", ErrRevisionNotFound, rev)
		}
		return nil, fmt.Errorf("%w: %q: %v", ErrRevisionNotFound, rev, err)
	}
	c, err := repo.CommitObject(*h)
	if err != nil {
		return nil, fmt.Errorf("commit %s of %q: %w", h, rev, err)
	}
	return c, nil
}

// maxTagDepth bounds the tags of tags peelTags follows: a chain of
// crafted tag objects cannot keep it walking.
const maxTagDepth = 16

// peelTags follows annotated tags from h to the commit they name.
func peelTags(repo *git.Repository, h plumbing.Hash) (*object.Commit, error) {
	for range maxTagDepth {
		t, err := repo.TagObject(h)
		if err != nil {
			return repo.CommitObject(h)
		}
		h = t.Target
	}
	return nil, fmt.Errorf("more than %d tags of tags", maxTagDepth)
}

// isEmpty reports whether repo has no reference to any object.
func isEmpty(repo *git.Repository) bool {
	refs, err := repo.References()
	if err != nil {
		return false
	}
	empty := true
	_ = refs.ForEach(func(r *plumbing.Reference) error {
		if r.Type() == plumbing.HashReference {
			empty = false
			return storer.ErrStop
		}
		return nil
	})
	return empty
}

// objectSizer is implemented by go-git's file system storage: the size of
// an object without inflating it.
type objectSizer interface {
	EncodedObjectSize(plumbing.Hash) (int64, error)
}

// treeWalker lists the entries of a tree recursively.
type treeWalker struct {
	ctx   context.Context
	repo  *git.Repository
	sizer objectSizer
	costs *packCosts // sizes of packed objects from their headers, and their delta chains' cost
	snap  *Snapshot
	n     int
	// entries counts the entries walked or taken from base, against
	// MaxEntries, and bytes the length of their paths, against
	// MaxListingBytes.
	entries int
	bytes   int
	base    *Listing // the listing of the base tree, when walking beside one
}

// walk lists tree t at prefix. base is the tree at the same prefix in the
// base listing's tree (nil when there is none): a subtree with the same
// hash in both is taken from the listing.
func (w *treeWalker) walk(t *object.Tree, prefix string, base *object.Tree) error {
	seen := make(map[string]bool, len(t.Entries))
	for _, e := range t.Entries {
		p := e.Name
		if prefix != "" {
			p = prefix + "/" + e.Name
		}
		if w.entries++; w.entries > maxEntries {
			return fmt.Errorf("%w (%d)", ErrTooManyEntries, maxEntries)
		}
		// Charged before the path is made: a name may be megabytes long.
		if w.bytes += len(prefix) + 1 + len(e.Name); w.bytes > maxListingBytes {
			return fmt.Errorf("%w (paths of %d bytes)", ErrTooManyEntries, maxListingBytes)
		}
		if !validName(e.Name) || seen[e.Name] {
			// Listed quoted: the name is not a path to open. A quoted
			// name is up to four times as long (a byte not UTF-8 is
			// \xff): the difference is charged too.
			q := strconv.Quote(e.Name)
			if w.bytes += len(q) - len(e.Name); w.bytes > maxListingBytes {
				return fmt.Errorf("%w (paths of %d bytes)", ErrTooManyEntries, maxListingBytes)
			}
			if prefix != "" {
				q = prefix + "/" + q
			}
			w.skip(q, SkipBadName)
			continue
		}
		seen[e.Name] = true
		if len(p) > MaxPathBytes {
			if e.Mode == filemode.Dir {
				p += "/"
			}
			w.skip(p, SkipPathTooLong)
			continue
		}
		switch e.Mode {
		case filemode.Dir:
			var bsub *object.Tree
			if base != nil {
				if be, err := base.FindEntry(e.Name); err == nil && be.Mode == filemode.Dir {
					if be.Hash == e.Hash && w.reuse(p) {
						continue
					}
					bsub, _ = w.repo.TreeObject(be.Hash) // unreadable: walked without
				}
			}
			sub, err := w.repo.TreeObject(e.Hash)
			if err != nil {
				return fmt.Errorf("tree %s: %w", p, err)
			}
			if err := w.walk(sub, p, bsub); err != nil {
				return err
			}
		case filemode.Submodule:
			w.skip(p, codectx.SkipSubmodule)
		case filemode.Symlink:
			w.skip(p, codectx.SkipSymlink)
		case filemode.Regular, filemode.Executable, filemode.Deprecated:
			if w.n++; w.n%1024 == 0 {
				if err := w.ctx.Err(); err != nil {
					return err
				}
			}
			if err := w.file(p, e.Hash); err != nil {
				return err
			}
		}
	}
	return nil
}

// reuse appends the base listing's entries under dir, unless one of them
// is a blob missing from the store (it may be there now): a subtree of the
// same hash lists the same.
func (w *treeWalker) reuse(dir string) bool {
	lo, hi := w.base.under(dir)
	slo, shi := w.base.skippedUnder(dir)
	for _, s := range w.base.Skipped[slo:shi] {
		if s.Reason == SkipMissingObject {
			return false
		}
	}
	// A listing stored before names had to be UTF-8 holds such a name
	// as U+FFFD (a manifest is JSON), several files under one path: the
	// subtree is walked again, and lists them as bad names.
	for _, f := range w.base.Files[lo:hi] {
		if strings.ContainsRune(f.Path, utf8.RuneError) {
			return false
		}
	}
	if w.entries += (hi - lo) + (shi - slo); w.entries > maxEntries {
		return false // walked, to fail there
	}
	n := 0
	for _, f := range w.base.Files[lo:hi] {
		n += len(f.Path) + 1
	}
	for _, s := range w.base.Skipped[slo:shi] {
		n += len(s.Path) + 1
	}
	if w.bytes += n; w.bytes > maxListingBytes {
		return false // walked, to fail there
	}
	w.snap.Files = append(w.snap.Files, w.base.Files[lo:hi]...)
	w.snap.Skipped = append(w.snap.Skipped, w.base.Skipped[slo:shi]...)
	return true
}

// under returns the range of l.Files under directory dir ("dir/..."):
// with paths sorted, they are the paths in ["dir/", "dir0").
func (l *Listing) under(dir string) (lo, hi int) {
	from, to := dir+"/", dir+"0" // '0' follows '/'
	lo = sort.Search(len(l.Files), func(i int) bool { return l.Files[i].Path >= from })
	hi = lo + sort.Search(len(l.Files)-lo, func(i int) bool { return l.Files[lo+i].Path >= to })
	return lo, hi
}

// skippedUnder is under for l.Skipped.
func (l *Listing) skippedUnder(dir string) (lo, hi int) {
	from, to := dir+"/", dir+"0"
	lo = sort.Search(len(l.Skipped), func(i int) bool { return l.Skipped[i].Path >= from })
	hi = lo + sort.Search(len(l.Skipped)-lo, func(i int) bool { return l.Skipped[lo+i].Path >= to })
	return lo, hi
}

// file lists the blob h at p; a blob listed at p in the base listing keeps
// its listed size (the same blob is the same content).
func (w *treeWalker) file(p string, h plumbing.Hash) error {
	if w.base != nil {
		fs := w.base.Files
		if i := sort.Search(len(fs), func(i int) bool { return fs[i].Path >= p }); i < len(fs) && fs[i].Path == p && fs[i].Blob == h.String() {
			w.snap.Files = append(w.snap.Files, fs[i])
			return nil
		}
	}
	size, err := w.size(h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		w.skip(p, SkipMissingObject)
		return nil
	}
	if errors.Is(err, errCostly) {
		// A blob whose delta chain inflates far more than the blob: the
		// repository's packs were made to cost the reader, not by git.
		w.skip(p, codectx.SkipTooLarge)
		return nil
	}
	if err != nil {
		return fmt.Errorf("blob %s of %s: %w", h, p, err)
	}
	if size >= int64(len(lfsPrefix)) && size < lfsMaxSize {
		lfs, err := w.isLFS(h)
		if err != nil {
			return fmt.Errorf("blob %s of %s: %w", h, p, err)
		}
		if lfs {
			w.skip(p, codectx.SkipLFSPointer)
			return nil
		}
	}
	w.snap.Files = append(w.snap.Files, File{Path: p, Blob: h.String(), Size: size})
	return nil
}

func (w *treeWalker) size(h plumbing.Hash) (int64, error) {
	if w.costs != nil {
		// go-git's size lookup inflates a delta's instructions whole to
		// read the size at their start; the pack's headers say it.
		if size, ok, err := w.costs.cost(h); ok || err != nil {
			return size, err
		}
	}
	if w.sizer != nil {
		return w.sizer.EncodedObjectSize(h)
	}
	o, err := w.repo.Storer.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return 0, err
	}
	return o.Size(), nil
}

func (w *treeWalker) isLFS(h plumbing.Hash) (bool, error) {
	o, err := w.repo.Storer.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return false, err
	}
	r, err := o.Reader()
	if err != nil {
		return false, err
	}
	defer r.Close()
	head := make([]byte, len(lfsPrefix))
	if _, err := io.ReadFull(r, head); err != nil {
		return false, err
	}
	return string(head) == lfsPrefix, nil
}

func (w *treeWalker) skip(p, reason string) {
	w.snap.Skipped = append(w.snap.Skipped, Skipped{Path: p, Reason: reason})
}

func sortSnapshot(s *Snapshot) {
	sort.Slice(s.Files, func(i, j int) bool { return s.Files[i].Path < s.Files[j].Path })
	sort.Slice(s.Skipped, func(i, j int) bool { return s.Skipped[i].Path < s.Skipped[j].Path })
}

func (g *gitReader) read(f File) ([]byte, error) {
	h, ok := parseHash(f.Blob)
	if !ok {
		return nil, fmt.Errorf("bad blob hash %q", f.Blob)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// Checked again here: a listing reused from an earlier snapshot was
	// not made by this reader.
	if costs, err := g.packCosts(); err != nil {
		return nil, fmt.Errorf("blob %s: %w", f.Blob, err)
	} else if costs != nil {
		if _, _, err := costs.cost(h); err != nil {
			return nil, fmt.Errorf("blob %s: %w", f.Blob, err)
		}
	}
	o, err := g.repo.Storer.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", f.Blob, err)
	}
	r, err := o.Reader()
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", f.Blob, err)
	}
	defer r.Close()
	b := bytes.NewBuffer(make([]byte, 0, o.Size()))
	if _, err := io.Copy(b, r); err != nil {
		return nil, fmt.Errorf("blob %s: %w", f.Blob, err)
	}
	return b.Bytes(), nil
}

func parseHash(s string) (plumbing.Hash, bool) {
	if len(s) != 40 {
		return plumbing.ZeroHash, false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return plumbing.ZeroHash, false
		}
	}
	return plumbing.NewHash(s), true
}

func (g *gitReader) history(ctx context.Context, limit int, base *HistoryBase) ([]Commit, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if base != nil && !g.isRootOf(base) {
		base = nil
	}
	var out []Commit
	left := historyBudget{paths: MaxHistoryPaths, bytes: maxHistoryBytes}
	for c := g.commit; c != nil && (limit <= 0 || len(out) < limit); {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if base != nil && c.Hash.String() == base.Commit {
			if rest, ok := base.take(limit, len(out)); ok {
				return capHistory(append(out, rest...)), nil
			}
			base = nil
		}
		var parent *object.Commit
		if c.NumParents() > 0 {
			p, err := c.Parent(0)
			if err != nil && !errors.Is(err, plumbing.ErrObjectNotFound) {
				return nil, fmt.Errorf("parent of %s: %w", c.Hash, err)
			}
			parent = p // nil past a shallow boundary
		}
		files, err := g.changed(ctx, c, parent, &left)
		if parent != nil && errors.Is(err, plumbing.ErrObjectNotFound) {
			// The parent's trees are not here (a treeless partial
			// clone, git clone --filter=tree:0, has only HEAD's): a
			// boundary, as past a shallow one.
			parent = nil
			files, err = g.changed(ctx, c, nil, &left)
		}
		if errors.Is(err, plumbing.ErrObjectNotFound) && c != g.commit {
			break // nor are this commit's: the history ends before it
		}
		if errors.Is(err, errHistoryFull) {
			break // the history ends before the commit that spends the budget
		}
		if err != nil {
			return nil, err
		}
		if g.sub == "" || len(files) > 0 {
			out = append(out, Commit{
				Hash:    c.Hash.String(),
				Author:  capBytes(c.Author.Name, MaxAuthorBytes) + " <" + capBytes(c.Author.Email, MaxAuthorBytes) + ">",
				Message: capBytes(strings.TrimRight(c.Message, "\n"), MaxMessageBytes),
				When:    c.Author.When,
				Files:   files,
			})
		}
		c = parent
	}
	return out, nil
}

// isRootOf reports whether base can stand for the history of this
// snapshot from base.Commit back: the snapshot is of the whole tree, and
// base lists the whole tree of a commit of this repository.
func (g *gitReader) isRootOf(base *HistoryBase) bool {
	if g.sub != "" {
		return false
	}
	h, ok := parseHash(base.Commit)
	if !ok {
		return false
	}
	c, err := g.repo.CommitObject(h)
	return err == nil && c.TreeHash.String() == base.Tree
}

// take returns the commits of b that a history of limit commits (<= 0:
// all) holding n already goes on with, and whether b has them all: b's
// own history is complete (not cut at its limit), or it holds at least
// the commits still wanted.
func (b *HistoryBase) take(limit, n int) ([]Commit, bool) {
	complete := b.Limit <= 0 || len(b.Commits) < b.Limit
	if limit <= 0 {
		return b.Commits, complete
	}
	want := limit - n
	if want <= len(b.Commits) {
		return b.Commits[:want], true
	}
	return b.Commits, complete
}

// MaxHistoryPaths bounds the changed paths a history holds over all its
// commits: it ends before the commit that would pass the bound. Tree
// objects are shared, so a small repository can make every commit of its
// history change every file of a large tree.
const MaxHistoryPaths = 1 << 20

// MaxListingBytes bounds the length of the paths a listing walks, all
// entries counted (files, skipped entries and directories), and
// MaxHistoryBytes that of the paths a history's diffs walk. MaxEntries
// and MaxHistoryPaths count paths, but a path is up to MaxPathBytes long
// and a tree entry's name of any length: a 208 KB repository whose tree
// names one subtree 64 times, holding a file of a 4 MiB name, grew up's
// heap by 900 MB and wrote a manifest of 268 MB, and 2^21 such paths
// are terabytes.
const (
	MaxListingBytes = 1 << 27
	MaxHistoryBytes = 1 << 27
)

// maxListingBytes and maxHistoryBytes are MaxListingBytes and
// MaxHistoryBytes; tests lower them.
var (
	maxListingBytes = MaxListingBytes
	maxHistoryBytes = MaxHistoryBytes
)

// historyBudget is what the diffs of a history may still walk: changed
// paths listed, and bytes of the paths walked.
type historyBudget struct{ paths, bytes int }

// MaxMessageBytes bounds a commit message kept in the history, and
// MaxAuthorBytes its author's name and its e-mail address each: the
// repository writes them, of any length, into every manifest and segment.
const (
	MaxMessageBytes = 64 << 10
	MaxAuthorBytes  = 256
)

// maxEntries is MaxEntries; tests lower it.
var maxEntries = MaxEntries

var errHistoryFull = errors.New("history: changed paths past MaxHistoryPaths or MaxHistoryBytes")

// capHistory cuts cs before the commit whose files take the sum of files
// past MaxHistoryPaths, or of their paths' bytes past MaxHistoryBytes, as
// the history walk does.
func capHistory(cs []Commit) []Commit {
	n, b := 0, 0
	for i, c := range cs {
		for _, f := range c.Files {
			b += len(f) + 1
		}
		if n += len(c.Files); n > MaxHistoryPaths || b > maxHistoryBytes {
			return cs[:i]
		}
	}
	return cs
}

// capBytes cuts m to at most n bytes, on a UTF-8 boundary.
func capBytes(m string, n int) string {
	if len(m) <= n {
		return m
	}
	m = m[:n]
	for i := 0; i < utf8.UTFMax && len(m) > 0; i++ {
		if r, size := utf8.DecodeLastRuneInString(m); r != utf8.RuneError || size != 1 {
			break
		}
		m = m[:len(m)-1]
	}
	return m
}

// changed lists the paths c changed against parent (nil: all its files),
// taking them, and the bytes of every path walked, from *left
// (errHistoryFull when it runs out). Paths longer than MaxPathBytes are
// not listed, as in the snapshot's listing.
func (g *gitReader) changed(ctx context.Context, c, parent *object.Commit, left *historyBudget) ([]string, error) {
	to, err := g.tree(c)
	if err != nil {
		return nil, err
	}
	var from *object.Tree
	if parent != nil {
		if from, err = g.tree(parent); err != nil {
			return nil, err
		}
	}
	if from == nil && to == nil {
		return nil, nil
	}
	d := differ{ctx: ctx, g: g, left: *left}
	if err := d.diff(from, to, ""); err != nil {
		return nil, fmt.Errorf("diff %s: %w", c.Hash, err)
	}
	*left = d.left
	sort.Strings(d.out)
	return slices.Compact(d.out), nil
}

// differ lists the paths that differ between two trees, walking only the
// subtrees whose hashes differ.
type differ struct {
	ctx  context.Context
	g    *gitReader
	out  []string
	left historyBudget
	n    int
}

// diff adds the paths under prefix that differ between trees a and b
// (either may be nil: all the paths of the other).
func (d *differ) diff(a, b *object.Tree, prefix string) error {
	var ae, be []object.TreeEntry
	if a != nil {
		ae = a.Entries
	}
	if b != nil {
		be = b.Entries
	}
	old := make(map[string]int, len(ae))
	for i, e := range ae {
		old[e.Name] = i
	}
	seen := make(map[string]bool, len(be))
	for i := range be {
		e := &be[i]
		seen[e.Name] = true
		var o *object.TreeEntry
		if j, ok := old[e.Name]; ok {
			o = &ae[j]
			if o.Hash == e.Hash && o.Mode == e.Mode {
				continue
			}
		}
		if err := d.entry(prefix, o, e); err != nil {
			return err
		}
	}
	for i := range ae {
		if !seen[ae[i].Name] {
			if err := d.entry(prefix, &ae[i], nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// entry adds the paths of a changed entry: a (old) and b (new), either nil.
func (d *differ) entry(prefix string, a, b *object.TreeEntry) error {
	if d.n++; d.n%1024 == 0 {
		if err := d.ctx.Err(); err != nil {
			return err
		}
	}
	name := b
	if name == nil {
		name = a
	}
	if d.left.bytes -= len(prefix) + 1 + len(name.Name); d.left.bytes < 0 {
		return errHistoryFull
	}
	p := name.Name
	if prefix != "" {
		p = prefix + "/" + p
	}
	if len(p) > MaxPathBytes || !validName(name.Name) {
		return nil
	}
	var ta, tb *object.Tree
	file := false
	for _, e := range []*object.TreeEntry{a, b} {
		if e == nil {
			continue
		}
		if e.Mode != filemode.Dir {
			file = true
			continue
		}
		t, terr := d.g.repo.TreeObject(e.Hash)
		if terr != nil {
			return fmt.Errorf("tree %s: %w", p, terr)
		}
		if e == a {
			ta = t
		} else {
			tb = t
		}
	}
	if file {
		if d.left.paths--; d.left.paths < 0 {
			return errHistoryFull
		}
		d.out = append(d.out, path.Clean(p))
	}
	if ta == nil && tb == nil {
		return nil
	}
	return d.diff(ta, tb, p)
}

// tree returns the (sub)tree of c, nil when the subdirectory is absent.
func (g *gitReader) tree(c *object.Commit) (*object.Tree, error) {
	t, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", c.Hash, err)
	}
	if g.sub == "" {
		return t, nil
	}
	st, err := t.Tree(g.sub)
	if errors.Is(err, object.ErrDirectoryNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", g.sub, c.Hash, err)
	}
	return st, nil
}

func (g *gitReader) close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.costs != nil {
		g.costs.Close()
		g.costs = nil
	}
	if g.closer == nil {
		return nil
	}
	return g.closer.Close()
}

// validName reports whether a tree entry's name is one git itself would
// check out: not empty, ".", "..", ".git" in any case, and without a
// slash, backslash or NUL. A repository writes its trees with any tool,
// and an answer's path is opened by its reader relative to a checkout:
// "..", or "a\..\x" on Windows, would lead it outside. The name must
// also be UTF-8: a path reaches every answer as a JSON string, and in
// the pipeline's messages, where a byte that is not UTF-8 becomes U+FFFD,
// so "a\xe9.go" and "a\xe8.go" were indexed as one path "a\ufffd.go",
// each file's chunks under it and read answering another's text.
func validName(name string) bool {
	switch {
	case name == "", name == ".", name == "..", isDotGit(name):
		return false
	}
	return !strings.ContainsAny(name, "/\\\x00") && utf8.ValidString(name)
}

// isDotGit reports a name that a checkout on some file system opens as
// ".git", as git's own checks (core.protectNTFS, core.protectHFS) find
// them: in any case, NTFS ignoring trailing dots and spaces and a stream
// after ':' (".git.", ".git ::$DATA") and taking the short name "git~1";
// HFS+ ignoring some invisible code points (".g\u200cit").
func isDotGit(name string) bool {
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[:i]
	}
	name = strings.TrimRight(name, ". ")
	if strings.EqualFold(name, ".git") || strings.EqualFold(name, "git~1") {
		return true
	}
	return strings.EqualFold(strings.Map(func(r rune) rune {
		if hfsIgnored(r) {
			return -1
		}
		return r
	}, name), ".git")
}

// hfsIgnored reports a code point HFS+ leaves out of a name when it
// compares names (the list of git's is_hfs_dotgit).
func hfsIgnored(r rune) bool {
	switch {
	case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return true
	}
	return false
}
