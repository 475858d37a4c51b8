package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"codectx/pkg/netguard"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// ErrTooLarge is returned (wrapped) by a clone or fetch that would write
// more than its limit (netguard.Policy.FetchBytes) to the clone cache.
var ErrTooLarge = errors.New("the repository is larger than the server's clone limit")

// fetchLimit is the bytes a clone or fetch under ctx's policy may write;
// 0: no limit.
func fetchLimit(ctx context.Context) int64 {
	if p := netguard.From(ctx); p != nil && p.FetchBytes > 0 {
		return p.FetchBytes
	}
	return 0
}

// openBudget opens the bare repository in dir for a clone or fetch that
// may write at most limit bytes into it (packs, loose objects, refs,
// config): past that, a write fails with ErrTooLarge and the fetch with
// it. The count is of what reaches the disk, whatever the transport.
func openBudget(dir string, limit int64) (*git.Repository, error) {
	left := new(atomic.Int64)
	left.Store(limit)
	fs := budgetFS{Filesystem: osfs.New(dir), left: left, limit: limit}
	return git.Open(filesystem.NewStorage(fs, cache.NewObjectLRUDefault()), nil)
}

// budgetFS counts the bytes written through its files against left.
type budgetFS struct {
	billy.Filesystem
	left  *atomic.Int64
	limit int64
}

func (f budgetFS) wrap(file billy.File, err error) (billy.File, error) {
	if err != nil {
		return nil, err
	}
	return budgetFile{File: file, fs: f}, nil
}

func (f budgetFS) Create(name string) (billy.File, error) { return f.wrap(f.Filesystem.Create(name)) }

func (f budgetFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	return f.wrap(f.Filesystem.OpenFile(name, flag, perm))
}

func (f budgetFS) TempFile(dir, prefix string) (billy.File, error) {
	return f.wrap(f.Filesystem.TempFile(dir, prefix))
}

func (f budgetFS) Chroot(path string) (billy.Filesystem, error) {
	c, err := f.Filesystem.Chroot(path)
	if err != nil {
		return nil, err
	}
	return budgetFS{Filesystem: c, left: f.left, limit: f.limit}, nil
}

type budgetFile struct {
	billy.File
	fs budgetFS
}

func (f budgetFile) Write(p []byte) (int, error) {
	if f.fs.left.Add(-int64(len(p))) < 0 {
		return 0, fmt.Errorf("%w (%d bytes)", ErrTooLarge, f.fs.limit)
	}
	return f.File.Write(p)
}

// removeTemps removes what a failed fetch left in the bare repository in
// dir: go-git writes a pack (and loose objects) to temporary files in
// objects/pack and leaves them when the fetch fails, so fetches that keep
// failing at the clone limit would otherwise fill the disk a limit at a
// time. Fetches of one clone are serialised by the caller.
func removeTemps(dir string) {
	tmps, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "tmp_*"))
	for _, t := range tmps {
		os.Remove(t)
	}
}
