package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"codectx/pkg/blob"
	"codectx/pkg/index"
)

// ReadManifest reads the manifest stored at key. A push reads the same
// manifests several times in one process (the snapshot stage reads HEAD's,
// the graph stage the new one and HEAD's again), and a big repository's
// manifest takes tens of milliseconds to decode: the last few decoded are
// kept by the SHA-256 of their bytes, so a read whose bytes are the same
// returns a copy of that decode instead (exact: the same bytes decode to
// the same manifest, whatever key or tenant they are read under).
func ReadManifest(ctx context.Context, store *blob.Bucket, key string) (*index.Manifest, error) {
	data, err := store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	sum := sha256.Sum256(data)
	if m := manifests.get(sum); m != nil {
		return m, nil
	}
	m, err := decodeManifest(sum, data)
	if err != nil {
		return nil, fmt.Errorf("decode manifest %s: %w", key, err)
	}
	return m, nil
}

// decodeManifest decodes data, whose SHA-256 is sum, and keeps the decode
// in the cache.
func decodeManifest(sum [sha256.Size]byte, data []byte) (*index.Manifest, error) {
	var m index.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	manifests.put(sum, int64(len(data)), &m)
	return &m, nil
}

// WriteManifest stores the encoded manifest data at key, then decodes it
// into the cache in the background, so that the graph stage of the same
// push, which reads it next (after the parse stage), finds it decoded: the
// decode is off the path of the push. The cached manifest is the decode of
// the stored bytes, as ReadManifest would make it. A read that comes first
// decodes the bytes itself.
func WriteManifest(ctx context.Context, store *blob.Bucket, key string, data []byte) error {
	if err := store.Put(ctx, key, data); err != nil {
		return err
	}
	go cacheManifest(data)
	return nil
}

// cacheManifest decodes data into the cache (unless it is there).
func cacheManifest(data []byte) {
	sum := sha256.Sum256(data)
	if !manifests.has(sum) {
		decodeManifest(sum, data) // a bad manifest is the reader's error
	}
}

// manifests is the process's cache of decoded manifests.
var manifests = manifestCache{max: 4, maxBytes: 64 << 20}

// manifestCache keeps copies of the last max decoded manifests whose
// encodings total at most maxBytes, most recent last. It hands out and
// takes in copies, so a caller may change what it gets (FilterFailed and
// the graph build keep or reslice the file list) without reaching the
// cache.
type manifestCache struct {
	mu       sync.Mutex
	max      int
	maxBytes int64
	ents     []manifestEntry
}

type manifestEntry struct {
	sum   [sha256.Size]byte
	bytes int64
	m     *index.Manifest
}

func (c *manifestCache) get(sum [sha256.Size]byte) *index.Manifest {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.ents {
		if e.sum == sum {
			c.ents = append(slices.Delete(c.ents, i, i+1), e)
			return copyManifest(e.m)
		}
	}
	return nil
}

func (c *manifestCache) has(sum [sha256.Size]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.ents, func(e manifestEntry) bool { return e.sum == sum })
}

func (c *manifestCache) put(sum [sha256.Size]byte, n int64, m *index.Manifest) {
	if n > c.maxBytes {
		return
	}
	e := manifestEntry{sum: sum, bytes: n, m: copyManifest(m)}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ents = slices.DeleteFunc(c.ents, func(o manifestEntry) bool { return o.sum == sum })
	c.ents = append(c.ents, e)
	total := int64(0)
	for _, o := range c.ents {
		total += o.bytes
	}
	for len(c.ents) > c.max || total > c.maxBytes {
		total -= c.ents[0].bytes
		c.ents = slices.Delete(c.ents, 0, 1)
	}
}

// copyManifest copies m down to its strings (which are immutable): every
// slice and map is its own, nil where m's is nil.
func copyManifest(m *index.Manifest) *index.Manifest {
	c := *m
	c.Files = slices.Clone(m.Files)
	c.Skipped = slices.Clone(m.Skipped)
	c.GoModules = maps.Clone(m.GoModules)
	c.History = slices.Clone(m.History)
	for i := range c.History {
		c.History[i].Files = slices.Clone(c.History[i].Files)
	}
	return &c
}
