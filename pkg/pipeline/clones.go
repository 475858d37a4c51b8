package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"codectx/pkg/source"
)

// CloneLimits bound a clone cache directory: clones unused for longer than
// MaxAge are removed, then the least recently used until the cache holds
// at most MaxBytes. Zero disables a bound. A clone that an open snapshot
// or a running open uses is never removed.
type CloneLimits struct {
	MaxBytes int64
	MaxAge   time.Duration
}

// Default clone cache limits.
const (
	DefaultCloneMaxBytes = 20 << 30 // 20 GiB
	DefaultCloneMaxAge   = 7 * 24 * time.Hour
)

// CloneGCResult is what CollectClones did.
type CloneGCResult struct {
	Kept, Removed int
	Bytes         int64 // bytes of the clones kept
	Freed         int64 // bytes of the clones removed
	InUse         int   // clones over a limit kept because they are in use
}

// clones counts the uses of each clone directory in this process and
// marks those being removed, so that an open waits for a removal to end
// and a removal never starts while an open or a snapshot uses the clone.
var clones = cloneUse{refs: map[string]int{}, removing: map[string]bool{}, doomed: map[string]bool{}}

type cloneUse struct {
	mu       sync.Mutex
	cond     *sync.Cond
	refs     map[string]int
	removing map[string]bool
	doomed   map[string]bool // to be removed when its last use ends (RemoveClone)
}

// pin marks dir in use until the returned func is called; it waits while
// dir is being removed.
func (c *cloneUse) pin(dir string) (unpin func()) {
	c.mu.Lock()
	if c.cond == nil {
		c.cond = sync.NewCond(&c.mu)
	}
	for c.removing[dir] {
		c.cond.Wait()
	}
	c.refs[dir]++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			remove := false
			if c.refs[dir]--; c.refs[dir] <= 0 {
				delete(c.refs, dir)
				if c.doomed[dir] {
					delete(c.doomed, dir)
					c.removing[dir], remove = true, true
				}
			}
			c.mu.Unlock()
			if remove {
				if err := os.RemoveAll(dir); err != nil {
					slog.Warn("remove a deleted repository's clone", "dir", filepath.Base(dir), "err", err)
				}
				c.done(dir)
			}
		})
	}
}

// RemoveClone removes tenant's cached clone of url under cacheDir, whose
// repository was deleted (the clone holds its source). A clone in use by
// a snapshot of this process (one still closing, or still fetching, when
// the repository's workflow ended) is waited for up to wait, and if still
// in use then, removed when its last snapshot closes it: removed while it
// was written, the removal failed ("directory not empty") and DELETE
// answered 503. It reports whether there was a clone; a location that is
// not a URL has none.
func RemoveClone(ctx context.Context, cacheDir, tenant, url string, wait time.Duration) (bool, error) {
	dir := source.CloneDir(cacheDir, tenant, url)
	if dir == "" {
		return false, nil
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	// A worker's cache keeps the snapshots of a commit open for a while
	// after their last batch (snapTTL): those are closed now.
	closeIdleOf(dir)
	c := &clones
	deadline := time.Now().Add(wait)
	for {
		c.mu.Lock()
		if c.refs[dir] == 0 && !c.removing[dir] {
			break // locked
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.doomed[dir] = true
			c.mu.Unlock()
			return true, nil
		}
		c.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	c.removing[dir] = true
	c.mu.Unlock()
	defer c.done(dir)
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("remove the clone of %s: %w", source.Redact(url), err)
	}
	return true, nil
}

// claim marks dir as being removed unless it is in use.
func (c *cloneUse) claim(dir string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refs[dir] > 0 || c.removing[dir] {
		return false
	}
	c.removing[dir] = true
	return true
}

func (c *cloneUse) done(dir string) {
	c.mu.Lock()
	delete(c.removing, dir)
	if c.cond != nil {
		c.cond.Broadcast()
	}
	c.mu.Unlock()
}

// touch records a use of the clone in dir (its modification time is the
// last use that CollectClones orders by).
func touch(dir string) {
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
}

// CollectClones applies lim to the clone cache in cacheDir (as
// OpenSnapshot fills it): it removes the clones of the old layout, which
// every tenant shared and nothing opens any more (source.SharedCacheName),
// the clones unused for longer than MaxAge, then the least recently used
// ones while the cache is larger than MaxBytes, skipping those in use in
// this process.
func CollectClones(cacheDir string, lim CloneLimits) (CloneGCResult, error) {
	var res CloneGCResult
	ents, err := os.ReadDir(cacheDir)
	if errors.Is(err, fs.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return res, err
	}
	type clone struct {
		dir  string
		used time.Time
		size int64
	}
	var cs []clone
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		c := clone{dir: filepath.Join(cacheDir, e.Name()), used: info.ModTime()}
		c.size = dirSize(c.dir)
		res.Bytes += c.size
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b clone) int { return a.used.Compare(b.used) })
	now := time.Now()
	var errs []error
	for _, c := range cs {
		old := lim.MaxAge > 0 && now.Sub(c.used) > lim.MaxAge || source.SharedCacheName(filepath.Base(c.dir))
		big := lim.MaxBytes > 0 && res.Bytes > lim.MaxBytes
		if !old && !big {
			res.Kept++
			continue
		}
		if !clones.claim(c.dir) {
			res.Kept++
			res.InUse++
			continue
		}
		err := os.RemoveAll(c.dir)
		clones.done(c.dir)
		if err != nil {
			// Go on with the others: one entry that cannot be removed
			// must not leave the cache unbounded.
			errs = append(errs, err)
			res.Kept++
			continue
		}
		res.Removed++
		res.Bytes -= c.size
		res.Freed += c.size
	}
	return res, errors.Join(errs...)
}

// dirSize is the total size of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// KeepClones applies lim to the clone cache in cacheDir now and every
// interval until ctx ends, logging what it removes.
func KeepClones(ctx context.Context, cacheDir string, lim CloneLimits, every time.Duration, log *slog.Logger) {
	if lim.MaxBytes <= 0 && lim.MaxAge <= 0 {
		return
	}
	if log == nil {
		log = slog.Default()
	}
	for {
		res, err := CollectClones(cacheDir, lim)
		switch {
		case err != nil:
			log.Warn("clone cache collection failed", "dir", filepath.Base(cacheDir), "error", err)
		case res.Removed > 0 || res.InUse > 0:
			log.Info("clone cache collected", "removed", res.Removed, "freed_bytes", res.Freed, "kept", res.Kept, "kept_bytes", res.Bytes, "over_limit_in_use", res.InUse)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}
