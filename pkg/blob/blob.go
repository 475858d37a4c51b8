// Package blob is the portable blob-store port of codectx: a Bucket that
// stores immutable objects by key and a small set of atomic operations
// (conditional create, compare-and-swap of a pointer object) that let several
// processes share one store without a database. Concrete stores implement the
// Driver interface (see blob/local for a directory, blob/minio for S3); the
// Bucket validates keys and wraps errors so callers see one behaviour.
package blob

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Errors returned (wrapped) by every driver. Test with errors.Is.
var (
	ErrNotFound   = errors.New("blob: not found")
	ErrExists     = errors.New("blob: already exists")
	ErrConflict   = errors.New("blob: pointer changed") // CAS precondition failed
	ErrInvalidKey = errors.New("blob: invalid key")
)

// Driver is what a concrete store implements. Keys reaching a driver have
// already been validated by the Bucket.
type Driver interface {
	// Put stores data under key, replacing any previous content.
	Put(ctx context.Context, key string, data []byte) error
	// Get returns the content of key, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the keys starting with prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
	// Create stores data under key only if key does not exist; ErrExists otherwise.
	Create(ctx context.Context, key string, data []byte) error
	// Swap atomically replaces the content of key with new only if its
	// current content equals old; old == nil means key must not exist.
	// It returns ErrConflict when the precondition fails.
	Swap(ctx context.Context, key string, old, new []byte) error
}

// Bucket is the portable blob store used by the rest of codectx.
type Bucket struct{ d Driver }

// NewBucket wraps a driver.
func NewBucket(d Driver) *Bucket { return &Bucket{d: d} }

// ValidKey reports whether key is acceptable: non-empty, no leading "/",
// no NUL byte, no "." or ".." path element, no empty element ("a//b"),
// no trailing "/" and no backslash.
func ValidKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case strings.HasPrefix(key, "/"):
		return fmt.Errorf("%w %q: leading slash", ErrInvalidKey, key)
	case strings.HasSuffix(key, "/"):
		return fmt.Errorf("%w %q: trailing slash", ErrInvalidKey, key)
	case strings.ContainsRune(key, 0):
		return fmt.Errorf("%w %q: NUL byte", ErrInvalidKey, key)
	case strings.ContainsRune(key, '\\'):
		return fmt.Errorf("%w %q: backslash", ErrInvalidKey, key)
	}
	for _, el := range strings.Split(key, "/") {
		switch el {
		case "":
			return fmt.Errorf("%w %q: empty path element", ErrInvalidKey, key)
		case ".", "..":
			return fmt.Errorf("%w %q: %q path element", ErrInvalidKey, key, el)
		}
	}
	return nil
}

// validPrefix accepts "" (everything) or a prefix that would be a valid key
// once completed; a trailing "/" is allowed.
func validPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	p := strings.TrimSuffix(prefix, "/")
	if p == "" {
		return fmt.Errorf("%w: prefix %q", ErrInvalidKey, prefix)
	}
	return ValidKey(p)
}

func wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("blob %s %s: %w", op, key, err)
}

// Put stores data under key, replacing any previous content.
func (b *Bucket) Put(ctx context.Context, key string, data []byte) error {
	if err := ValidKey(key); err != nil {
		return wrap("put", key, err)
	}
	return wrap("put", key, b.d.Put(ctx, key, data))
}

// Get returns the content of key; errors.Is(err, ErrNotFound) if missing.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ValidKey(key); err != nil {
		return nil, wrap("get", key, err)
	}
	data, err := b.d.Get(ctx, key)
	if err != nil {
		return nil, wrap("get", key, err)
	}
	return data, nil
}

// Delete removes key; deleting a missing key succeeds.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := ValidKey(key); err != nil {
		return wrap("delete", key, err)
	}
	return wrap("delete", key, b.d.Delete(ctx, key))
}

// List returns the keys starting with prefix (plain string prefix), sorted.
func (b *Bucket) List(ctx context.Context, prefix string) ([]string, error) {
	if err := validPrefix(prefix); err != nil {
		return nil, wrap("list", prefix, err)
	}
	keys, err := b.d.List(ctx, prefix)
	if err != nil {
		return nil, wrap("list", prefix, err)
	}
	return keys, nil
}

// Create stores data under key only if key does not exist yet;
// errors.Is(err, ErrExists) otherwise.
func (b *Bucket) Create(ctx context.Context, key string, data []byte) error {
	if err := ValidKey(key); err != nil {
		return wrap("create", key, err)
	}
	return wrap("create", key, b.d.Create(ctx, key, data))
}

// Swap atomically sets key to new if its current content equals old
// (old == nil: key must not exist); errors.Is(err, ErrConflict) otherwise.
func (b *Bucket) Swap(ctx context.Context, key string, old, new []byte) error {
	if err := ValidKey(key); err != nil {
		return wrap("swap", key, err)
	}
	if new == nil {
		new = []byte{}
	}
	return wrap("swap", key, b.d.Swap(ctx, key, old, new))
}

// Filer is an optional Driver method: the path of the local file that
// holds key's content (stores that keep objects as files). The file is
// replaced only by rename, never written in place, so it may be mapped.
type Filer interface {
	FilePath(key string) (string, error)
}

// LocalPath returns the path of the local file holding key, and false if
// the store does not keep objects as local files.
func (b *Bucket) LocalPath(key string) (string, bool, error) {
	if err := ValidKey(key); err != nil {
		return "", false, wrap("path", key, err)
	}
	f, ok := b.d.(Filer)
	if !ok {
		return "", false, nil
	}
	p, err := f.FilePath(key)
	return p, err == nil, wrap("path", key, err)
}

// Exister is an optional Driver method: a cheaper existence check than Get.
type Exister interface {
	Exists(ctx context.Context, key string) (bool, error)
}

// Exists reports whether key is present.
func (b *Bucket) Exists(ctx context.Context, key string) (bool, error) {
	if err := ValidKey(key); err != nil {
		return false, wrap("exists", key, err)
	}
	if e, ok := b.d.(Exister); ok {
		ok, err := e.Exists(ctx, key)
		return ok, wrap("exists", key, err)
	}
	_, err := b.d.Get(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, wrap("exists", key, err)
}

// Cacher is an optional Driver method set for objects that can be rebuilt
// (parse-cache entries): PutCache stores like Put but may return before the
// data is durable, and Sync makes every PutCache that returned before it
// durable. A driver without it stores cache objects with Put.
type Cacher interface {
	PutCache(ctx context.Context, key string, data []byte) error
	Sync(ctx context.Context) error
}

// PutCache stores data under key like Put, for an object that is rebuilt
// when lost: the store may not have made it durable when PutCache returns,
// so a crash of the machine (not of the process: the object is replaced
// atomically either way) can lose it or leave it torn. Readers of such
// objects must detect a torn one; Sync before writing anything that names
// them. A key written by PutCache is not one to Swap: the store need not
// order its writes against a Swap's compare.
func (b *Bucket) PutCache(ctx context.Context, key string, data []byte) error {
	if err := ValidKey(key); err != nil {
		return wrap("put", key, err)
	}
	if c, ok := b.d.(Cacher); ok {
		return wrap("put", key, c.PutCache(ctx, key, data))
	}
	return wrap("put", key, b.d.Put(ctx, key, data))
}

// Sync makes every object stored by PutCache before the call durable.
func (b *Bucket) Sync(ctx context.Context) error {
	if c, ok := b.d.(Cacher); ok {
		if err := c.Sync(ctx); err != nil {
			return fmt.Errorf("blob sync: %w", err)
		}
	}
	return nil
}
