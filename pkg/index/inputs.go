package index

import (
	"container/list"
	"encoding/binary"
	"slices"
	"sync"

	"codectx/pkg/blob"
	"codectx/pkg/graph"
	"codectx/pkg/segment"
)

// InputCacheBytes bounds the shard inputs a process keeps between builds
// (an estimate of their heap); 0 keeps none.
var InputCacheBytes int64 = 64 << 20

// shardInput is what a build takes from a shard it reuses: its counts and
// graph input (symbol ids local to the shard), its encoded size and
// checksum.
type shardInput struct {
	stats   segment.ShardStats
	graphIn []graph.FileInput
	size    int
	sum     uint32
	bytes   int64 // estimated heap
}

// inputCache keeps the inputs of the shards a process built or reused
// last, by store and shard key, so that the next build of the repository
// reads each reused shard once to check it (CheckShard) instead of
// decoding its counts and graph input again. Least recently used first
// out.
type inputCache struct {
	mu    sync.Mutex
	order *list.List // of *inputEntry, most recent at the front
	m     map[inputKey]*list.Element
	bytes int64
}

type inputKey struct {
	store *blob.Bucket
	key   string
}

type inputEntry struct {
	k  inputKey
	in *shardInput
}

var inputs inputCache

func (c *inputCache) get(store *blob.Bucket, key string) *shardInput {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[inputKey{store, key}]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	return e.Value.(*inputEntry).in
}

func (c *inputCache) put(store *blob.Bucket, key string, in *shardInput) {
	limit := InputCacheBytes
	if in.bytes > limit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m, c.order = map[inputKey]*list.Element{}, list.New()
	}
	k := inputKey{store, key}
	if e, ok := c.m[k]; ok {
		c.bytes -= e.Value.(*inputEntry).in.bytes
		c.order.Remove(e)
	}
	c.m[k] = c.order.PushFront(&inputEntry{k, in})
	c.bytes += in.bytes
	for c.bytes > limit {
		e := c.order.Back()
		c.order.Remove(e)
		ie := e.Value.(*inputEntry)
		delete(c.m, ie.k)
		c.bytes -= ie.in.bytes
	}
}

// newShardInput keeps a copy of the inputs of sh, encoded as data (the
// build offsets the ids of the shard's own).
func newShardInput(sh *segment.Shard, data []byte) *shardInput {
	in := &shardInput{stats: sh.Stats, graphIn: cloneGraphIn(sh.GraphIn), size: len(data)}
	if len(data) >= 4 {
		in.sum = binary.LittleEndian.Uint32(data[len(data)-4:])
	}
	n := int64(256)
	for _, f := range in.graphIn {
		n += 96 + int64(len(f.Path)+len(f.Package))
		for _, s := range f.Imports {
			n += 16 + int64(len(s))
		}
		for _, s := range f.Symbols {
			n += 80 + int64(len(s.Name))
			for _, c := range s.Calls {
				n += 16 + int64(len(c))
			}
			for _, t := range s.Types {
				n += 16 + int64(len(t))
			}
		}
	}
	in.bytes = n
	return in
}

// shard returns a shard holding in's counts and a copy of its graph input.
func (in *shardInput) shard() *segment.Shard {
	return &segment.Shard{Stats: in.stats, GraphIn: cloneGraphIn(in.graphIn)}
}

// cloneGraphIn copies files and their symbol lists (the strings are
// shared: they never change).
func cloneGraphIn(files []graph.FileInput) []graph.FileInput {
	out := slices.Clone(files)
	for i := range out {
		out[i].Symbols = slices.Clone(out[i].Symbols)
	}
	return out
}

// graphMemoRepos is how many repositories' graph memos a process keeps.
const graphMemoRepos = 2

// graphMemos keep the last graph build of the repositories built last
// (graph.Memo), so that a one-file push resolves the references of only
// the symbols whose resolution could change. None are kept when
// InputCacheBytes is 0.
var graphMemos struct {
	mu    sync.Mutex
	order []graphMemoKey // most recent last
	m     map[graphMemoKey]*graph.Memo
}

type graphMemoKey struct {
	store        *blob.Bucket
	tenant, repo string
}

// buildGraph is graph.Build of in, through the repository's memo.
func buildGraph(store *blob.Bucket, tenant, repo string, in graph.Input) *graph.Graph {
	if InputCacheBytes <= 0 {
		return graph.Build(in)
	}
	k := graphMemoKey{store, tenant, repo}
	gm := &graphMemos
	gm.mu.Lock()
	if gm.m == nil {
		gm.m = map[graphMemoKey]*graph.Memo{}
	}
	memo := gm.m[k]
	if memo == nil {
		memo = &graph.Memo{}
		gm.m[k] = memo
	}
	gm.order = append(slices.DeleteFunc(gm.order, func(o graphMemoKey) bool { return o == k }), k)
	for len(gm.order) > graphMemoRepos {
		delete(gm.m, gm.order[0])
		gm.order = gm.order[1:]
	}
	gm.mu.Unlock()
	return memo.Build(in)
}
