package index

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/mapfile"
)

// ShardCache is a local directory of shards downloaded from a store that
// keeps no local files (an object store), so that a query server maps
// them instead of holding them in its heap. Shards are immutable and named
// by their key, so a cached file never goes stale. Each is written to a
// temp file and renamed into place; the directory is bounded in bytes by
// deleting the least recently used files once a new one takes it over the
// bound. A deleted file that is still mapped stays readable (and keeps
// its disk space) until the process exits (see package mapfile), so the
// disk used can pass the bound by the shards mapped since start:
// HeldBytes counts those.
type ShardCache struct {
	dir string
	max int64

	mu    sync.Mutex
	files map[string]*cached // by key
	bytes int64
	held  int64 // of files deleted while mapped
}

type cached struct {
	size int64
	used time.Time
}

const cacheTemp = ".tmp"

// OpenShardCache opens (creating) the cache in dir, bounded to maxBytes
// (<= 0: unbounded). Files already there are kept, last used at their
// modification time; temp files of a crashed writer are removed.
func OpenShardCache(dir string, maxBytes int64) (*ShardCache, error) {
	c := &ShardCache{dir: dir, max: maxBytes, files: map[string]*cached{}}
	os.RemoveAll(filepath.Join(dir, cacheTemp))
	if err := os.MkdirAll(filepath.Join(dir, cacheTemp), 0o755); err != nil {
		return nil, fmt.Errorf("index: shard cache: %w", err)
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == cacheTemp {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		c.files[filepath.ToSlash(rel)] = &cached{size: fi.Size(), used: fi.ModTime()}
		c.bytes += fi.Size()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index: shard cache: %w", err)
	}
	return c, nil
}

func (c *ShardCache) path(key string) (string, error) {
	if err := blob.ValidKey(key); err != nil || strings.HasPrefix(key, cacheTemp) {
		return "", fmt.Errorf("index: shard cache: bad key %q", key)
	}
	return filepath.Join(c.dir, filepath.FromSlash(key)), nil
}

// Open maps the cached copy of the shard at key, downloading it from store
// first if it is not cached.
func (c *ShardCache) Open(ctx context.Context, store *blob.Bucket, key string) (*mapfile.File, error) {
	p, err := c.path(key)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	e := c.files[key]
	if e != nil {
		e.used = time.Now()
	}
	c.mu.Unlock()
	if e != nil {
		f, err := mapfile.Open(p)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		c.Drop(key) // removed behind our back: fetch it again
	}
	data, err := store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if err := c.write(p, data); err != nil {
		return nil, fmt.Errorf("index: shard cache: %w", err)
	}
	f, err := mapfile.Open(p)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if old := c.files[key]; old != nil {
		c.bytes -= old.size
	}
	c.files[key] = &cached{size: int64(len(data)), used: time.Now()}
	c.bytes += int64(len(data))
	c.evict(key)
	c.mu.Unlock()
	return f, nil
}

// write places data at p by a temp file renamed into place.
func (c *ShardCache) write(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Join(c.dir, cacheTemp), "shard-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// evict deletes least recently used files, never keep, until the cache
// fits its bound. Called with c.mu held.
func (c *ShardCache) evict(keep string) {
	if c.max <= 0 || c.bytes <= c.max {
		return
	}
	keys := make([]string, 0, len(c.files))
	for k := range c.files {
		if k != keep {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return c.files[keys[i]].used.Before(c.files[keys[j]].used) })
	for _, k := range keys {
		if c.bytes <= c.max {
			return
		}
		if p, err := c.path(k); err == nil {
			if mapfile.IsMapped(p) {
				c.held += c.files[k].size
			}
			os.Remove(p)
		}
		c.bytes -= c.files[k].size
		delete(c.files, k)
	}
}

// Drop deletes the cached copy of key (a corrupt download).
func (c *ShardCache) Drop(key string) {
	p, err := c.path(key)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.files[key]; e != nil {
		c.bytes -= e.size
		delete(c.files, key)
	}
	os.Remove(p)
}

// HeldBytes is the size of the files the cache deleted while this process
// mapped them: their disk space is held until it exits, beyond the bound.
func (c *ShardCache) HeldBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// Bytes is the size of the cached files.
func (c *ShardCache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
