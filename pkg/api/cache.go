package api

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/metrics"
	"codectx/pkg/segment"
)

// DefaultCacheBytes is the default memory budget of the loaded segments.
const DefaultCacheBytes = 512 << 20

// segCache is an LRU of loaded segments keyed by segment key, bounded by the
// memory the segments hold, not by their number: each is charged its heap
// (segment.HeapSize, which grows with the tables its queries derive,
// measured again each time it is used) and the pages of its mapped shards
// resident in the process (segment.ResidentSize: a load drops the pages
// its checks read, so these are the pages its queries read, measured
// after each request that used it). Segments are immutable, so an entry
// never goes stale: a new HEAD names a new key. Concurrent loads of one
// key share one read. The segment just loaded is always kept, even alone
// over the budget, so any segment can be served.
type segCache struct {
	store  *blob.Bucket
	max    int64
	shards *index.ShardCache // nil: shards of a store without local files are read into the heap

	mu    sync.Mutex
	ll    *list.List // of *segEntry, front = most recent
	m     map[string]*list.Element
	bySeg map[*segment.Segment]*segEntry // the loaded entries
	last  map[string]*segEntry           // by repository (repoOf): the one last loaded, while cached
	bytes int64                          // sum of the loaded entries' sizes
	owned map[string]int64               // of bytes, by tenant (tenantOf)
	heap  int64                          // of bytes, in the heap
	hit   int
	miss  int // loads started

	onMapped func(int64) // told the mapped bytes (bytes-heap) when they move by 1 MiB
	told     int64       // the mapped bytes last told

	residentEvery time.Duration // how often a used segment's resident pages are measured again
}

// defaultResidentEvery is how often a segment's resident mapped pages are read
// again from the page table as queries use it: reading them on every
// query cost about 9% of the server's CPU under 8 clients; between reads a
// segment is charged what was last measured (its heap is measured on every
// use, which costs an add).
const defaultResidentEvery = 250 * time.Millisecond

type segEntry struct {
	key    string
	ready  chan struct{}
	seg    *segment.Segment
	size   int64 // 0 until loaded
	heap   int64 // of size, in the heap
	mapped int64 // of size, resident pages of mapped shards (when last measured)
	err    error
}

func newSegCache(store *blob.Bucket, maxBytes int64, shards *index.ShardCache) *segCache {
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &segCache{store: store, max: maxBytes, shards: shards, ll: list.New(), m: map[string]*list.Element{}, bySeg: map[*segment.Segment]*segEntry{}, last: map[string]*segEntry{}, owned: map[string]int64{}, residentEvery: defaultResidentEvery}
}

func (c *segCache) get(ctx context.Context, key string) (*segment.Segment, error) {
	c.mu.Lock()
	if el, ok := c.m[key]; ok {
		c.ll.MoveToFront(el)
		c.hit++
		e := el.Value.(*segEntry)
		if e.size > 0 {
			c.charge(e, -1)
		}
		c.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return e.seg, e.err
	}
	e := &segEntry{key: key, ready: make(chan struct{})}
	c.m[key] = c.ll.PushFront(e)
	c.miss++
	// The repository's segment loaded last (usually its previous HEAD)
	// lends the new one the shards they share.
	var prev *segment.Segment
	if p := c.last[repoOf(key)]; p != nil {
		prev = p.seg
	}
	c.mu.Unlock()

	e.seg, e.err = c.load(ctx, key, prev)
	var resident int64
	if e.err == nil {
		e.seg.HeapSize() // its one walk over the segment, outside the lock
		resident = e.seg.ResidentSize()
	}
	c.mu.Lock()
	el, ok := c.m[key]
	switch {
	case e.err != nil:
		if ok && el.Value == e {
			c.ll.Remove(el)
			delete(c.m, key) // never cache a failure
		}
	case ok && el.Value == e:
		c.bySeg[e.seg] = e
		c.last[repoOf(key)] = e
		c.charge(e, resident)
	default:
		// Replaced or dropped while loading: nothing holds it.
		e.seg.Release()
	}
	c.mu.Unlock()
	close(e.ready)
	return e.seg, e.err
}

// charge measures e's heap again and charges it with mapped resident
// bytes (-1: those last measured), evicting others if e grew the cache
// over its budget. Called with c.mu held.
func (c *segCache) charge(e *segEntry, mapped int64) {
	heap := e.seg.HeapSize()
	if mapped < 0 {
		mapped = e.mapped
	}
	size := max(heap+mapped, 1) // > 0: loaded
	c.bytes += size - e.size
	c.owned[tenantOf(e.key)] += size - e.size
	c.heap += heap - e.heap
	e.size, e.heap, e.mapped = size, heap, mapped
	c.evict(e)
}

// tell passes the mapped bytes to onMapped if they moved by 1 MiB since
// last told. Called with c.mu held.
func (c *segCache) tell() {
	if m := c.bytes - c.heap; c.onMapped != nil && (m-c.told >= 1<<20 || c.told-m >= 1<<20) {
		c.told = m
		c.onMapped(m)
	}
}

// used charges the cached segments of segs again once a request has used
// them: the tables and the pages its search added. The pages are counted
// (a read of the page table, at most once per residentEvery per segment)
// before the lock is taken.
func (c *segCache) used(segs []*segment.Segment) {
	resident := make([]int64, len(segs))
	for i, seg := range segs {
		if seg != nil {
			resident[i] = seg.ResidentSizeEvery(c.residentEvery)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, seg := range segs {
		if e := c.bySeg[seg]; seg != nil && e != nil {
			c.charge(e, resident[i])
		}
	}
}

// evict drops loaded entries until the loaded bytes fit the budget,
// never keep (the entry just loaded): each time the least recently used
// entry of the tenant holding the most bytes. With one tenant that is the
// least recently used entry; with several, one tenant's many segments
// cannot push another's few out (a tenant querying its own repositories
// evicts its own first). Entries still loading hold no bytes yet and
// stay. A dropped segment releases its mapped shards (their pages are
// dropped; queries still using the segment page them back in, see
// package mapfile).
func (c *segCache) evict(keep *segEntry) {
	for c.bytes > c.max {
		victim := c.victim(keep)
		if victim == nil {
			break
		}
		e := victim.Value.(*segEntry)
		c.ll.Remove(victim)
		delete(c.m, e.key)
		delete(c.bySeg, e.seg)
		if c.last[repoOf(e.key)] == e {
			delete(c.last, repoOf(e.key))
		}
		c.bytes -= e.size
		c.heap -= e.heap
		if t := tenantOf(e.key); c.owned[t] == e.size {
			delete(c.owned, t)
		} else {
			c.owned[t] -= e.size
		}
		e.seg.Release()
	}
	c.tell()
}

// victim is the entry evict drops next: the least recently used loaded
// entry (not keep) of the tenant holding the most bytes, else, when that
// tenant holds only keep, the least recently used of any; nil when none
// is loaded. Called with c.mu held.
func (c *segCache) victim(keep *segEntry) *list.Element {
	var heavy string
	var most int64 = -1
	for t, b := range c.owned {
		if b > most || (b == most && t < heavy) {
			heavy, most = t, b
		}
	}
	var lru *list.Element
	for el := c.ll.Back(); el != nil; el = el.Prev() {
		e := el.Value.(*segEntry)
		if e == keep || e.size == 0 {
			continue
		}
		if tenantOf(e.key) == heavy {
			return el
		}
		if lru == nil {
			lru = el
		}
	}
	return lru
}

// tenantOf is the tenant of a segment key (segments/TENANT/...).
func tenantOf(key string) string {
	_, rest, _ := strings.Cut(key, "/")
	t, _, _ := strings.Cut(rest, "/")
	return t
}

// load loads the segment at key, taking the shards it shares with prev
// (nil: none) from it.
func (c *segCache) load(ctx context.Context, key string, prev *segment.Segment) (*segment.Segment, error) {
	seg, err := index.LoadSegmentWith(ctx, c.store, key, index.LoadOptions{Cache: c.shards, Prev: prev})
	if err != nil && c.shards != nil && errors.Is(err, segment.ErrCorrupt) {
		// A corrupt cached copy of a shard was dropped by the failed load:
		// the second downloads it again, so the query still answers.
		seg, err = index.LoadSegmentWith(ctx, c.store, key, index.LoadOptions{Cache: c.shards, Prev: prev})
	}
	if err != nil {
		return nil, fmt.Errorf("load segment %s: %w", key, err)
	}
	return seg, nil
}

// repoOf is the part of a segment key that names its repository (the
// keys of one repository's snapshots differ after it).
func repoOf(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return ""
}

func (c *segCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// stats returns the number of cached segments, the bytes they hold and the
// number of hits so far.
func (c *segCache) stats() (n int, bytes int64, hits int) {
	s := c.cacheStats()
	return s.Segments, s.Bytes, int(s.Hits)
}

func (c *segCache) cacheStats() metrics.CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return metrics.CacheStats{Segments: c.ll.Len(), Bytes: c.bytes, HeapBytes: c.heap, MappedBytes: c.bytes - c.heap, Budget: c.max, Hits: int64(c.hit), Misses: int64(c.miss)}
}
