package index_test

import (
	"bytes"
	"context"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/segment"
)

// TestHandOffGraph checks that the first load of a shard list takes the
// graph kept for it (KeepGraph) instead of decoding the section, that the
// segment answers as a fresh load does, that a graph is taken once and
// only for the bytes it was kept with, and that only the newest two are
// kept.
func TestHandOffGraph(t *testing.T) {
	index.HandOffGraphs()
	ctx := context.Background()
	r := goRepo(t)
	store := blob.NewMem()
	var keys []string
	lists := map[string][]byte{}
	for i, change := range []string{"", "func HandOffOne() {}\n", "func HandOffTwo() {}\n", "func HandOffThree() {}\n"} {
		if i > 0 {
			r.Commit(change, map[string]string{"encoding/hex/handoff.go": "package hex\n\n" + change})
		}
		if _, err := index.Build(ctx, store, r.Dir, index.Options{Name: "std", ShardBytes: 40 << 10}); err != nil {
			t.Fatal(err)
		}
		h, err := index.ReadHead(ctx, store, index.DefaultTenant, "std")
		if err != nil {
			t.Fatal(err)
		}
		data, err := store.Get(ctx, h.Segment)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, h.Segment)
		lists[h.Segment] = data
	}
	kept := func(key string, data []byte) *segment.ShardList {
		t.Helper()
		l, err := segment.LoadShardList(data, true)
		if err != nil {
			t.Fatal(err)
		}
		index.KeepGraph(store, key, data, l.Graph)
		return l
	}
	load := func(key string) *segment.Segment {
		t.Helper()
		s, err := index.LoadSegmentWith(ctx, store, key, index.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	encoding := func(s *segment.Segment) []byte {
		t.Helper()
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	k := keys[0]
	l := kept(k, lists[k])
	got := load(k)
	if got.Graph != l.Graph {
		t.Fatal("the load decoded the graph instead of taking the one kept")
	}
	fresh := load(k)
	if fresh.Graph == l.Graph {
		t.Fatal("the graph was taken twice")
	}
	if !bytes.Equal(encoding(got), encoding(fresh)) {
		t.Fatal("the segment with the graph taken differs from a fresh load")
	}
	sameAnswers(t, got, fresh)

	// Kept with other bytes than the key holds (a graph without the
	// file the commits added): decoded.
	l = kept(keys[1], lists[keys[0]])
	if got := load(keys[1]); got.Graph == l.Graph {
		t.Fatal("a graph kept for other bytes was taken")
	}

	// Three kept: the oldest is forgotten.
	var ls []*segment.ShardList
	for _, k := range keys[1:] {
		ls = append(ls, kept(k, lists[k]))
	}
	for i, k := range keys[1:] {
		if taken := load(k).Graph == ls[i].Graph; taken != (i > 0) {
			t.Fatalf("graph %d of 3 kept: taken %v", i+1, taken)
		}
	}
}
