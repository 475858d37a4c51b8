package index_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/source"
)

// bombRepo makes a bare repository whose tree names one blob of size bytes
// of tiny Go functions under paths paths: git stores the blob once, and
// every path is parsed.
func bombRepo(t *testing.T, size, paths int) string {
	t.Helper()
	dir := t.TempDir()
	git := gitIn(t, dir)
	git(nil, "init", "-q", "--bare", ".")
	var b strings.Builder
	b.WriteString("package p\n")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "func a%d(){}\n", i)
	}
	h := git(strings.NewReader(b.String()[:size]), "hash-object", "-w", "--stdin")
	var tree strings.Builder
	for i := range paths {
		fmt.Fprintf(&tree, "100644 blob %s\tf%03d.go\n", h, i)
	}
	commit := git(nil, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit-tree", git(strings.NewReader(tree.String()), "mktree"), "-m", "bomb")
	git(nil, "update-ref", "refs/heads/master", commit)
	return dir
}

// TestSecurityNamedBlobBomb: a tree may name one blob under many paths,
// and each path is parsed and chunked (the parse cache is keyed by path):
// one 1 MiB blob of `func a1(){}` under 50 paths (168 KiB of objects) made
// 3.1 M chunks, 1.5 GB of peak memory and 25 s of work. The sum of the
// sizes of the files to parse is bounded (Options.MaxSourceBytes), and a
// snapshot over it fails before anything is parsed; one under it indexes.
func TestSecurityNamedBlobBomb(t *testing.T) {
	ctx := context.Background()
	dir := bombRepo(t, 16<<10, 50) // 800 KiB to parse
	for _, shard := range []int64{0, -1} {
		store := blob.NewMem()
		sum, err := index.Build(ctx, store, dir, index.Options{Name: "t/bomb", MaxSourceBytes: 256 << 10, ShardBytes: shard})
		if !errors.Is(err, index.ErrSourceTooLarge) {
			t.Fatalf("shard bytes %d: Build = %+v, %v, want ErrSourceTooLarge", shard, sum, err)
		}
		if !strings.Contains(err.Error(), "source limit") || !strings.Contains(err.Error(), "819200 bytes in 50 files") {
			t.Errorf("error %q does not name the limit and the size", err)
		}
		if keys, _ := store.List(ctx, "parse/"); len(keys) != 0 {
			t.Errorf("shard bytes %d: %d files parsed before the bound was checked", shard, len(keys))
		}
	}
	snap, err := source.Open(ctx, dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if _, _, err := index.BuildSegment(ctx, blob.NewMem(), snap, "bomb", index.Options{MaxSourceBytes: 256 << 10}); !errors.Is(err, index.ErrSourceTooLarge) {
		t.Fatalf("BuildSegment (codectx eval) = %v, want ErrSourceTooLarge", err)
	}
	// Under the limit (and with no limit), the same repository indexes.
	for _, max := range []int64{1 << 20, -1} {
		sum, err := index.Build(ctx, blob.NewMem(), dir, index.Options{Name: "t/bomb", MaxSourceBytes: max})
		if err != nil {
			t.Fatalf("limit %d: %v", max, err)
		}
		if sum.Files != 50 || sum.Chunks == 0 {
			t.Errorf("limit %d: indexed %d files, %d chunks, want 50 files", max, sum.Files, sum.Chunks)
		}
	}
	// Files over the file size cap are skipped unread: they do not count.
	if n := index.SourceBytes(snap.Files, chunkOptions(8<<10)); n != 0 {
		t.Errorf("SourceBytes under an 8 KiB file cap = %d, want 0", n)
	}
}

// TestSecurityChunkBomb: tiny functions make some 63,000 chunks per MiB of
// source, where real code makes about 750, and the segment build holds
// every chunk. A snapshot making more than MaxChunks fails, sharded or
// not; one under it indexes.
func TestSecurityChunkBomb(t *testing.T) {
	ctx := context.Background()
	dir := bombRepo(t, 16<<10, 20) // about 1,300 chunks a path
	for _, shard := range []int64{0, 64 << 10, -1} {
		_, err := index.Build(ctx, blob.NewMem(), dir, index.Options{Name: "t/bomb", ShardBytes: shard, MaxChunks: 10000})
		if !errors.Is(err, index.ErrTooManyChunks) || !strings.Contains(err.Error(), "more chunks than the server indexes (over 10000)") {
			t.Fatalf("shard bytes %d: Build = %v, want ErrTooManyChunks over 10000", shard, err)
		}
	}
	for _, max := range []int{100000, -1} {
		sum, err := index.Build(ctx, blob.NewMem(), dir, index.Options{Name: "t/bomb", MaxChunks: max})
		if err != nil {
			t.Fatalf("MaxChunks %d: %v", max, err)
		}
		if sum.Chunks <= 10000 {
			t.Errorf("MaxChunks %d: %d chunks, want more than the lower bound above", max, sum.Chunks)
		}
	}
}

// TestChunkBoundStopsParse: the chunk bound is counted as files are
// parsed, so a snapshot over it stops parsing at the file that puts it
// over, rather than after the parse of its shard (or, for one segment, of
// the whole snapshot). Each path of the repository makes the same c
// chunks; the bound is in those, and the parse is counted by the entries
// it adds to the parse cache (one worker: files are parsed in order).
func TestChunkBoundStopsParse(t *testing.T) {
	ctx := context.Background()
	const size = 4 << 10 // about 300 chunks a path
	sum, err := index.Build(ctx, blob.NewMem(), bombRepo(t, size, 1), index.Options{Name: "t/one"})
	if err != nil {
		t.Fatal(err)
	}
	c := sum.Chunks
	for _, tc := range []struct {
		name  string
		prior int // paths of an earlier snapshot indexed first (0: none)
		shard int64
		bound float64 // in chunks of a path
		parse int     // files the build parses
		over  bool
	}{
		// 20 paths are one shard (or one segment): the parse stops at
		// the second path, not after the twentieth.
		{name: "shard", shard: 0, bound: 1.5, parse: 2, over: true},
		{name: "segment", shard: -1, bound: 1.5, parse: 2, over: true},
		{name: "at the bound", shard: 0, bound: 20, parse: 20},
		{name: "segment at the bound", shard: -1, bound: 20, parse: 20},
		// Shards of 3 paths (10 KiB): the first 9 paths' shards are
		// reused from the earlier snapshot, and their chunks count from
		// the start of the next shard's parse (its first path is read
		// from the parse cache, its second parsed and over).
		{name: "after reused shards", prior: 10, shard: 10 << 10, bound: 10.5, parse: 1, over: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := blob.NewMem()
			opt := index.Options{Name: "t/bomb", ShardBytes: tc.shard, Workers: 1}
			if tc.prior > 0 {
				if _, err := index.Build(ctx, store, bombRepo(t, size, tc.prior), opt); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := store.List(ctx, "parse/")
			opt.MaxChunks = int(tc.bound * float64(c))
			sum, err := index.Build(ctx, store, bombRepo(t, size, 20), opt)
			if tc.over {
				want := fmt.Sprintf("index: t/bomb: the repository's files make more chunks than the server indexes (over %d)", opt.MaxChunks)
				if !errors.Is(err, index.ErrTooManyChunks) || err.Error() != want {
					t.Fatalf("Build = %v, want %q", err, want)
				}
			} else if err != nil || sum.Chunks != 20*c {
				t.Fatalf("Build = %+v, %v, want %d chunks", sum, err, 20*c)
			}
			after, _ := store.List(ctx, "parse/")
			if n := len(after) - len(before); n != tc.parse {
				t.Errorf("%d files parsed, want %d", n, tc.parse)
			}
		})
	}
}
