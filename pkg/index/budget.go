package index

import (
	"errors"
	"fmt"
	"sync/atomic"

	"codectx/pkg/chunk"
	"codectx/pkg/source"
)

// DefaultMaxSourceBytes bounds the source bytes of one snapshot
// (Options.MaxSourceBytes): the sum of the sizes of the files that would
// be parsed. A tree names a blob by hash, so a repository of a few hundred
// kilobytes of objects can name one 1 MiB blob under thousands of paths,
// and every path is parsed and chunked. 2 GiB holds the largest source
// trees indexed in practice (the Linux kernel's 1.3 GiB of files hold
// about 1.1 GiB under the 1 MiB file cap, an estimate; Chromium's own
// source, without third_party, about 0.8 GiB), and at the chunks real
// code makes (about 750 per MiB) stays under MaxChunks.
const DefaultMaxSourceBytes = 2 << 30

// ErrSourceTooLarge is returned (wrapped) when the files of a snapshot
// that would be parsed are larger in all than the source limit.
var ErrSourceTooLarge = errors.New("the repository's files are larger in all than the server's source limit")

// SourceBytes is the sum of the sizes of the files that would be parsed:
// every listed file up to the file size cap (a larger one is skipped
// too_large unread). A blob named under several paths counts once per
// path, as each path is parsed.
func SourceBytes(files []source.File, opt chunk.Options) int64 {
	var n int64
	for _, f := range files {
		if !tooLarge(f, opt) {
			n += f.Size
		}
	}
	return n
}

// CheckSourceBytes fails with ErrSourceTooLarge when SourceBytes of files
// is over max; max 0 or less: no bound. It reads the listing only, so it
// runs before anything is parsed.
func CheckSourceBytes(files []source.File, opt chunk.Options, max int64) error {
	if max <= 0 {
		return nil
	}
	if n := SourceBytes(files, opt); n > max {
		return fmt.Errorf("%w (%d bytes in %d files over the limit of %d)", ErrSourceTooLarge, n, len(files), max)
	}
	return nil
}

// SourceLimit is the bound a configured source limit means, for
// CheckSourceBytes: 0 is DefaultMaxSourceBytes, negative no bound (0).
func SourceLimit(max int64) int64 { return limit(max, DefaultMaxSourceBytes) }

// limit is the bound a configured limit means: 0 is def, negative no
// bound (0).
func limit[T int | int64](max, def T) T {
	switch {
	case max == 0:
		return def
	case max < 0:
		return 0
	}
	return max
}

// maxSourceBytes is the bound of opt.MaxSourceBytes.
func (opt Options) maxSourceBytes() int64 { return SourceLimit(opt.MaxSourceBytes) }

// MaxChunks is the default bound of the chunks of one snapshot
// (Options.MaxChunks, --max-chunks): the segment build holds
// them all (about 470 bytes of heap each). Real code makes about 750
// chunks per MiB of source (this repository: 5,498 in 7.3 MiB), so the
// bound holds 2.7 GiB of such code, past DefaultMaxSourceBytes; a file of
// tiny functions makes 63,000 per MiB, and one such 1 MiB blob under 50
// paths made 3.3 M chunks and 1.5 GB of peak memory.
const MaxChunks = 1 << 21

// ChunkLimit is the bound a configured chunk limit means: 0 is MaxChunks,
// negative no bound (0).
func ChunkLimit(max int) int { return limit(max, MaxChunks) }

// ErrTooManyChunks is returned (wrapped) when a snapshot's files make more
// chunks than its bound (MaxChunks by default).
var ErrTooManyChunks = errors.New("the repository's files make more chunks than the server indexes")

// checkChunks fails with ErrTooManyChunks when n is over limit (0: no
// bound).
func checkChunks(n, limit int) error {
	if limit > 0 && n > limit {
		return fmt.Errorf("%w (over %d)", ErrTooManyChunks, limit)
	}
	return nil
}

// chunkCount is a build's running count of the snapshot's chunks, to
// which its parser adds each file's as it is parsed: a snapshot over the
// bound fails as soon as the parse has made that many chunks, not after
// it has parsed every file (a shard's, or the whole snapshot's for one
// segment) and held all of their results.
type chunkCount struct {
	limit int // ChunkLimit's: 0 is no bound
	n     atomic.Int64
}

// from sets the count to n, the chunks of the snapshot before a parse
// (those of the shards built or reused so far); nil: no count.
func (c *chunkCount) from(n int) {
	if c != nil {
		c.n.Store(int64(n))
	}
}

// add counts the chunks of r (none when it is skipped) and fails with
// ErrTooManyChunks once the count is over the bound.
func (c *chunkCount) add(r chunk.Result) error {
	if c == nil || c.limit == 0 || r.Skip != "" {
		return nil
	}
	return checkChunks(int(c.n.Add(int64(len(r.Chunks)))), c.limit)
}

// CheckChunks fails with ErrTooManyChunks when the parse results make more
// chunks than limit (ChunkLimit: 0 is MaxChunks, negative no bound); run
// before Assemble.
func CheckChunks(results []Parsed, limit int) error {
	n := 0
	for _, p := range results {
		if p.Result.Skip == "" {
			n += len(p.Result.Chunks)
		}
	}
	return checkChunks(n, ChunkLimit(limit))
}
