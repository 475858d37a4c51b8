// Package local is the directory-backed blob driver: every object is a file
// under one root directory, the key's "/" separators becoming directories.
// It is meant for single-machine deployments and tests; several processes may
// share one directory because writes are atomic renames and compare-and-swap
// runs under a lock file.
//
// Layout: <dir>/<key> holds the object; <dir>/.blob/ holds temp files and
// lock files and is never listed (keys whose first element is ".blob" are
// rejected). Because keys are paths, a key cannot be both an object and a
// prefix directory: with "a" stored, Put("a/b") fails (and vice versa).
package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"codectx/pkg/blob"
)

const (
	metaDir = ".blob"
	stripes = 64 // lock files; keys hash onto them
)

// Open returns a Bucket storing objects under dir, creating dir if needed.
func Open(dir string) (*blob.Bucket, error) {
	d, err := newDriver(dir)
	if err != nil {
		return nil, err
	}
	return blob.NewBucket(d), nil
}

type driver struct {
	root      string
	tmp       string
	lock      string
	lockNames [stripes]string // the lock files, by stripe
}

func newDriver(dir string) (*driver, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blob local %s: %w", dir, err)
	}
	d := &driver{
		root: root,
		tmp:  filepath.Join(root, metaDir, "tmp"),
		lock: filepath.Join(root, metaDir, "locks"),
	}
	for i := range d.lockNames {
		d.lockNames[i] = filepath.Join(d.lock, fmt.Sprintf("%02x.lock", i))
	}
	for _, p := range []string{d.tmp, d.lock} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, fmt.Errorf("blob local %s: %w", dir, err)
		}
	}
	d.sweepTemp(time.Hour)
	return d, nil
}

// sweepTemp removes temp files older than age, left by crashed writers.
func (d *driver) sweepTemp(age time.Duration) {
	entries, err := os.ReadDir(d.tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > age {
			os.Remove(filepath.Join(d.tmp, e.Name()))
		}
	}
}

func (d *driver) path(key string) (string, error) {
	if key == metaDir || strings.HasPrefix(key, metaDir+"/") {
		return "", fmt.Errorf("%w: %q is reserved by the local driver", blob.ErrInvalidKey, metaDir)
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// writeTemp writes data to a new temp file, fsynced when durable, and
// returns its name.
func (d *driver) writeTemp(data []byte, durable bool) (string, error) {
	return createTemp(d.tmp, data, durable)
}

// install moves the temp file tmp to path with place (rename or link),
// creating parent directories, and fsyncs the directory when durable; it
// retries when a concurrent Delete prunes a freshly created parent.
func (d *driver) install(tmp, path string, place func(string, string) error, durable bool) error {
	// The parent usually exists (a store has few directories and many
	// objects): placed first, and the parents made only when missing.
	err := place(tmp, path)
	for range 5 {
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return parentErr(err)
		}
		err = place(tmp, path)
	}
	if err != nil {
		return parentErr(err)
	}
	if durable {
		syncDir(filepath.Dir(path))
	}
	return nil
}

func parentErr(err error) error {
	if errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w: a parent of the key is an object: %w", blob.ErrInvalidKey, err)
	}
	if errors.Is(err, syscall.EISDIR) {
		return fmt.Errorf("%w: the key is a prefix of other keys: %w", blob.ErrInvalidKey, err)
	}
	return err
}

func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		f.Sync()
		f.Close()
	}
}

// put replaces path atomically with data, durably unless it is a cache
// object (PutCache): then a crash of the machine may lose or tear it.
func (d *driver) put(path string, data []byte, durable bool) error {
	tmp, err := d.writeTemp(data, durable)
	if err != nil {
		return err
	}
	if err := d.install(tmp, path, renameFile, durable); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// create places data at path only if path does not exist; a hard link is
// atomic and fails with EEXIST when the name is taken.
func (d *driver) create(path string, data []byte) error {
	tmp, err := d.writeTemp(data, true)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	err = d.install(tmp, path, os.Link, true)
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Lstat(path); serr == nil && fi.IsDir() {
			return parentErr(&fs.PathError{Op: "link", Path: path, Err: syscall.EISDIR})
		}
		return blob.ErrExists
	}
	return err
}

func (d *driver) Put(ctx context.Context, key string, data []byte) error {
	return d.store(ctx, key, data, true)
}

// PutCache is Put without the fsyncs of the file and its directory (two of
// the four system calls that cost most of a small Put): the rename is still
// atomic for every process, but a crash of the machine can lose or tear the
// object until Sync. It takes no lock either (four more system calls): the
// lock orders writes against Swap's read-compare-write, and a cache object
// is never swapped (blob.Bucket.PutCache); against another write or a
// Delete, the rename alone decides which lands last, as the lock would.
func (d *driver) PutCache(ctx context.Context, key string, data []byte) error {
	path, err := d.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.put(path, data, !writeBack)
}

// Sync flushes the file system of the store (syncfs; without it PutCache
// was durable already): every PutCache before it is durable.
func (d *driver) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return syncFS(d.root)
}

func (d *driver) store(ctx context.Context, key string, data []byte, durable bool) error {
	path, err := d.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock, err := d.lockKey(key)
	if err != nil {
		return err
	}
	defer unlock()
	return d.put(path, data, durable)
}

func (d *driver) Get(ctx context.Context, key string) ([]byte, error) {
	path, err := d.path(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return read(path)
}

// read returns the file content; a missing file, a directory or a path
// through a file all mean ErrNotFound.
func read(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR) {
		return nil, blob.ErrNotFound
	}
	return data, err
}

// FilePath is the file holding key (written by rename, never in place).
func (d *driver) FilePath(key string) (string, error) { return d.path(key) }

func (d *driver) Exists(ctx context.Context, key string) (bool, error) {
	path, err := d.path(key)
	if err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return fi.Mode().IsRegular(), nil
}

func (d *driver) Delete(ctx context.Context, key string) error {
	path, err := d.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock, err := d.lockKey(key)
	if err != nil {
		return err
	}
	defer unlock()
	if fi, err := os.Lstat(path); err != nil || fi.IsDir() {
		return nil // missing (or only a prefix): nothing to delete
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// Prune now-empty parents so the prefix can become a key again.
	for dir := filepath.Dir(path); dir != d.root && strings.HasPrefix(dir, d.root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

func (d *driver) List(ctx context.Context, prefix string) ([]string, error) {
	// Walk only the deepest directory the prefix names.
	start := d.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = filepath.Join(d.root, filepath.FromSlash(prefix[:i]))
	}
	var keys []string
	err := filepath.WalkDir(start, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == start && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if e.IsDir() {
			if key == metaDir {
				return fs.SkipDir
			}
			// Skip directories that cannot contain a match.
			if key != "." && !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if e.Type().IsRegular() && strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(keys)
	return keys, nil
}

func (d *driver) Create(ctx context.Context, key string, data []byte) error {
	path, err := d.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.create(path, data)
}

func (d *driver) Swap(ctx context.Context, key string, old, new []byte) error {
	path, err := d.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if old == nil {
		if err := d.create(path, new); errors.Is(err, blob.ErrExists) {
			return blob.ErrConflict
		} else {
			return err
		}
	}
	unlock, err := d.lockKey(key)
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := read(path)
	if errors.Is(err, blob.ErrNotFound) {
		return blob.ErrConflict
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(cur, old) {
		return blob.ErrConflict
	}
	return d.put(path, new, true)
}

// Process-wide mutexes, one per lock file, so goroutines of one process
// queue on a mutex instead of each holding a descriptor blocked in flock.
var mus sync.Map // lock file path -> *sync.Mutex

// lockKey takes the process mutex and the flock of the key's lock stripe.
func (d *driver) lockKey(key string) (unlock func(), err error) {
	h := fnv.New32a()
	h.Write([]byte(key))
	name := d.lockNames[h.Sum32()%stripes]
	m, ok := mus.Load(name)
	if !ok {
		m, _ = mus.LoadOrStore(name, new(sync.Mutex))
	}
	mu := m.(*sync.Mutex)
	mu.Lock()
	unlockFile, err := lockFile(name)
	if err != nil {
		mu.Unlock()
		return nil, fmt.Errorf("lock: %w", err)
	}
	return func() {
		unlockFile()
		mu.Unlock()
	}, nil
}
