package api

import (
	"container/list"
	"context"
	"fmt"
	"sync"

	"codectx/pkg/blob"
	"codectx/pkg/segment"
)

// segCache is an LRU of loaded segments keyed by segment key. Segments are
// immutable, so an entry never goes stale: a new HEAD names a new key.
// Concurrent loads of one key share one read.
type segCache struct {
	store *blob.Bucket
	max   int

	mu  sync.Mutex
	ll  *list.List // of *segEntry, front = most recent
	m   map[string]*list.Element
	hit int
}

type segEntry struct {
	key   string
	ready chan struct{}
	seg   *segment.Segment
	err   error
}

func newSegCache(store *blob.Bucket, max int) *segCache {
	if max <= 0 {
		max = 16
	}
	return &segCache{store: store, max: max, ll: list.New(), m: map[string]*list.Element{}}
}

func (c *segCache) get(ctx context.Context, key string) (*segment.Segment, error) {
	c.mu.Lock()
	if el, ok := c.m[key]; ok {
		c.ll.MoveToFront(el)
		c.hit++
		e := el.Value.(*segEntry)
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
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.m, old.Value.(*segEntry).key)
	}
	c.mu.Unlock()

	e.seg, e.err = c.load(ctx, key)
	close(e.ready)
	if e.err != nil {
		c.mu.Lock()
		if el, ok := c.m[key]; ok && el.Value == e {
			c.ll.Remove(el)
			delete(c.m, key) // never cache a failure
		}
		c.mu.Unlock()
	}
	return e.seg, e.err
}

func (c *segCache) load(ctx context.Context, key string) (*segment.Segment, error) {
	data, err := c.store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read segment: %w", err)
	}
	seg, err := segment.Load(data)
	if err != nil {
		return nil, fmt.Errorf("load segment %s: %w", key, err)
	}
	return seg, nil
}

func (c *segCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
