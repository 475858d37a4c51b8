package main

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/blob/local"
	"codectx/pkg/index"
)

// TestUpShardsDeltaPublish runs codectx up with small shards: a repository
// of 34 files is published in several shards, a push that changes one
// file writes exactly one new shard, the running server answers from the
// new snapshot, and that snapshot's joined shards equal a single segment
// built from the same commit.
func TestUpShardsDeltaPublish(t *testing.T) {
	repoDir, _ := gitFixture(t)
	commitFiles(t, repoDir, manyFiles(30, "Widget"))
	data := t.TempDir()
	addr := freeAddr(t)
	base := "http://" + addr
	cl := &api.Client{BaseURL: base}
	up := startUp(t, "--data", data, "--listen", addr, "--shard-bytes", "400")
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	index1 := func() {
		t.Helper()
		var out syncBuffer
		if err := run(ctx, []string{"index", "--server", base, "--timeout", "2m", repoDir}, &out, &syncBuffer{}); err != nil {
			t.Fatalf("index --server: %v\n%s", err, up.errs.String())
		}
	}
	store, err := local.Open(filepath.Join(data, "store"))
	if err != nil {
		t.Fatal(err)
	}
	shards := func() []string {
		t.Helper()
		keys, err := store.List(ctx, index.ShardPrefix(index.DefaultTenant, "shop"))
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	index1()
	first := shards()
	if len(first) < 5 {
		t.Fatalf("%d shards, want several: %v", len(first), first)
	}

	commit := commitFiles(t, repoDir, map[string]string{"pkg3/f13.go": "package pkg3\n\n// Sprocket13 replaces Widget13.\nfunc Sprocket13() int { return 13 }\n"})
	index1()
	var added []string
	for _, k := range shards() {
		if !slices.Contains(first, k) {
			added = append(added, k)
		}
	}
	if len(added) != 1 {
		t.Fatalf("a one-file push wrote shards %v, want one", added)
	}
	resp, err := cl.Query(ctx, api.QueryRequest{Repo: "shop", Query: "Sprocket13", Budget: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Commit != commit || len(resp.Chunks) == 0 || resp.Chunks[0].Path != "pkg3/f13.go" {
		t.Fatalf("query after the push: commit %s, chunks %+v", resp.Commit, resp.Chunks)
	}

	got, err := index.LoadHead(ctx, store, index.DefaultTenant, "shop")
	if err != nil {
		t.Fatal(err)
	}
	one := blob.NewMem()
	if _, err := index.Build(ctx, one, repoDir, index.Options{Name: "shop", ShardBytes: -1}); err != nil {
		t.Fatal(err)
	}
	want, err := index.LoadHead(ctx, one, index.DefaultTenant, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Files, want.Files) || !reflect.DeepEqual(got.Chunks, want.Chunks) {
		t.Fatal("the published shards' files or chunks differ from one segment's")
	}
	a, _ := got.BM25.MarshalBinary()
	b, _ := want.BM25.MarshalBinary()
	if !bytes.Equal(a, b) {
		t.Fatal("the published shards' BM25 index differs from one segment's")
	}
}
