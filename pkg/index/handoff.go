package index

import (
	"bytes"
	"sync"
	"sync/atomic"

	"codectx/pkg/blob"
	"codectx/pkg/graph"
	"codectx/pkg/segment"
)

// A process that builds shard lists and also serves queries from them
// (`codectx up`) hands the graph a build made to the first load of that
// list, which then does not decode the graph section again: the graph of
// a GOROOT-sized repository takes tens of milliseconds to decode on every
// push. The graph is immutable once built, and is taken only for the
// exact bytes it was encoded to (the store, the key and the section's
// bytes compared), so the load answers as one that decoded them.
var handoff struct {
	on   atomic.Bool
	mu   sync.Mutex
	ents []handoffEntry // newest last, at most handoffEntries
}

type handoffEntry struct {
	store *blob.Bucket
	key   string
	sec   []byte // the graph section as written
	g     *graph.Graph
}

// handoffEntries bounds the graphs kept for a load that may never come
// (a repository nobody queries): each is the size of a decoded graph.
const handoffEntries = 2

// HandOffGraphs makes shard-list builds of this process keep their graph
// for the process's first load of the list (KeepGraph, loadList). Call it
// where the same process builds and serves.
func HandOffGraphs() { handoff.on.Store(true) }

// KeepGraph keeps g, the graph of the shard list data stored at key, for
// the first load of that key in this process (when HandOffGraphs was
// called).
func KeepGraph(store *blob.Bucket, key string, data []byte, g *graph.Graph) {
	if !handoff.on.Load() || g == nil {
		return
	}
	sec, err := segment.GraphSection(data)
	if err != nil {
		return
	}
	handoff.mu.Lock()
	defer handoff.mu.Unlock()
	handoff.ents = append(handoff.ents, handoffEntry{store: store, key: key, sec: sec, g: g})
	if n := len(handoff.ents); n > handoffEntries {
		clear(handoff.ents[:n-handoffEntries])
		handoff.ents = append(handoff.ents[:0], handoff.ents[n-handoffEntries:]...)
	}
}

// takeGraph returns and forgets the graph kept for key when sec is the
// section it was encoded to; nil otherwise.
func takeGraph(store *blob.Bucket, key string, sec []byte) *graph.Graph {
	if !handoff.on.Load() {
		return nil
	}
	handoff.mu.Lock()
	defer handoff.mu.Unlock()
	for i, e := range handoff.ents {
		if e.store == store && e.key == key {
			handoff.ents = append(handoff.ents[:i], handoff.ents[i+1:]...)
			if bytes.Equal(e.sec, sec) {
				return e.g
			}
			return nil
		}
	}
	return nil
}

// loadList decodes a shard list read from key, taking the graph a build
// of this process kept for it.
func loadList(store *blob.Bucket, key string, data []byte) (*segment.ShardList, error) {
	return segment.LoadShardListWith(data, func(sec []byte) (*graph.Graph, error) {
		if g := takeGraph(store, key, sec); g != nil {
			return g, nil
		}
		return graph.Load(sec)
	})
}
