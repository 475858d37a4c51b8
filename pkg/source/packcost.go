package source

import (
	"bufio"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
)

// MaxInflateBytes bounds what reading one blob may inflate: the blob and,
// for a delta, every base and delta of its chain. A repository chooses
// its packs, and a blob of a few bytes stored as a delta against a base
// of gigabytes passes every size cap while go-git inflates the whole
// base to read it. Git itself chains at most 50 deltas by default.
const MaxInflateBytes = 256 << 20

// maxBaseRatio bounds the largest object of a delta chain against the
// blob read (at least minBase): go-git holds that object whole while it
// reads the blob. Git pairs objects of like size (it tries no delta
// against a base over 32 times its target), so only a crafted pack
// reaches it.
const (
	maxBaseRatio = 32
	minBase      = 1 << 20
)

// maxChain bounds the delta chain packCosts follows.
const maxChain = 4096

// errCostly is packCosts.cost's answer for a blob over MaxInflateBytes.
var errCostly = errors.New("inflating the blob costs more than the server reads")

// packCosts reads, from the headers of a repository's packs alone, the
// size of a packed object and what inflating it costs: go-git's own size
// lookup inflates a delta's instructions to find the size at their
// start, and reading a delta inflates its whole chain.
type packCosts struct {
	packs []packFile
	zr    io.ReadCloser // reused zlib reader (zlib.Resetter)
	memo  map[packPos]chainCost
}

// chainCost is what inflating an object costs: the bytes inflated over
// its delta chain, and the largest object of the chain.
type chainCost struct{ sum, largest int64 }

type packFile struct {
	idx  *idxfile.MemoryIndex
	data billy.File
}

type packPos struct {
	pack int
	off  int64
}

// openPackCosts opens the packs of the git directory fs (objects/pack).
func openPackCosts(fs billy.Filesystem) (*packCosts, error) {
	dir := fs.Join("objects", "pack")
	entries, err := fs.ReadDir(dir)
	if err != nil {
		return &packCosts{}, nil // no packs: every object is loose
	}
	p := &packCosts{memo: map[packPos]chainCost{}}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "pack-") || !strings.HasSuffix(name, ".idx") {
			continue
		}
		f, err := fs.Open(fs.Join(dir, name))
		if err != nil {
			p.Close()
			return nil, err
		}
		idx := idxfile.NewMemoryIndex()
		err = idxfile.NewDecoder(bufio.NewReader(f)).Decode(idx)
		f.Close()
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("pack index %s: %w", name, err)
		}
		data, err := fs.Open(fs.Join(dir, strings.TrimSuffix(name, ".idx")+".pack"))
		if err != nil {
			p.Close()
			return nil, err
		}
		p.packs = append(p.packs, packFile{idx: idx, data: data})
	}
	return p, nil
}

// Close closes the pack files.
func (p *packCosts) Close() error {
	for _, f := range p.packs {
		f.data.Close()
	}
	p.packs = nil
	return nil
}

// find locates h in the packs.
func (p *packCosts) find(h plumbing.Hash) (packPos, bool) {
	for i, f := range p.packs {
		if off, err := f.idx.FindOffset(h); err == nil {
			return packPos{i, off}, true
		}
	}
	return packPos{}, false
}

// cost returns the size of the packed object h; ok is false when h is in
// no pack (a loose object, whose size is its header's and whose read
// inflates it alone). errCostly when inflating it passes MaxInflateBytes
// or holds an object more than maxBaseRatio times its size.
func (p *packCosts) cost(h plumbing.Hash) (size int64, ok bool, err error) {
	pos, ok := p.find(h)
	if !ok {
		return 0, false, nil
	}
	size, c, err := p.costAt(pos, 0)
	if err != nil {
		return 0, true, err
	}
	if c.largest > maxBaseRatio*max(size, minBase) {
		return 0, true, fmt.Errorf("%w: a %d-byte blob inflates a %d-byte object of its delta chain", errCostly, size, c.largest)
	}
	return size, true, nil
}

// costAt is cost for the object at pos, depth deltas down a chain.
func (p *packCosts) costAt(pos packPos, depth int) (size int64, cost chainCost, err error) {
	if depth > maxChain {
		return 0, cost, fmt.Errorf("%w: a delta chain of more than %d objects", errCostly, maxChain)
	}
	f := p.packs[pos.pack].data
	var hdr [32]byte
	n, err := f.ReadAt(hdr[:], pos.off)
	if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
		return 0, cost, fmt.Errorf("pack object at %d: %w", pos.off, err)
	}
	b := hdr[:n]
	i := 0
	next := func() (byte, error) {
		if i >= len(b) {
			return 0, fmt.Errorf("pack object at %d: header too long", pos.off)
		}
		c := b[i]
		i++
		return c, nil
	}
	c, err := next()
	if err != nil {
		return 0, cost, err
	}
	typ := c >> 4 & 7
	stored := int64(c & 0x0f) // the object's size, or a delta's instructions'
	for shift := 4; c&0x80 != 0; shift += 7 {
		if c, err = next(); err != nil {
			return 0, cost, err
		}
		if shift > 56 {
			return 0, cost, fmt.Errorf("pack object at %d: size overflows", pos.off)
		}
		stored |= int64(c&0x7f) << shift
	}
	var base packPos
	switch typ {
	case 1, 2, 3, 4: // commit, tree, blob, tag
		return stored, chainCost{stored, stored}, nil
	case 6: // a delta against the object at a smaller offset
		if c, err = next(); err != nil {
			return 0, cost, err
		}
		rel := int64(c & 0x7f)
		for c&0x80 != 0 {
			if c, err = next(); err != nil {
				return 0, cost, err
			}
			if rel > 1<<48 {
				return 0, cost, fmt.Errorf("pack object at %d: delta offset overflows", pos.off)
			}
			rel = (rel+1)<<7 | int64(c&0x7f)
		}
		if rel <= 0 || rel > pos.off {
			return 0, cost, fmt.Errorf("pack object at %d: delta base out of the pack", pos.off)
		}
		base = packPos{pos.pack, pos.off - rel}
	case 7: // a delta against the object of a hash
		if i+20 > len(b) {
			return 0, cost, fmt.Errorf("pack object at %d: header too long", pos.off)
		}
		var h plumbing.Hash
		copy(h[:], b[i:i+20])
		i += 20
		var found bool
		if base, found = p.find(h); !found {
			// A thin pack's base is loose or missing: go-git reports a
			// missing one when read; a loose one is bounded by its size,
			// which is its header's.
			return 0, cost, fmt.Errorf("pack object at %d: delta base %s: %w", pos.off, h, plumbing.ErrObjectNotFound)
		}
	default:
		return 0, cost, fmt.Errorf("pack object at %d: unknown type %d", pos.off, typ)
	}
	// The delta's instructions start with the sizes of its base and of
	// its result: inflate just those.
	if err := p.reset(io.NewSectionReader(f, pos.off+int64(i), 1<<20)); err != nil {
		return 0, cost, fmt.Errorf("pack object at %d: %w", pos.off, err)
	}
	br := bufio.NewReaderSize(p.zr, 16)
	if _, err := readLEB(br); err != nil { // the base's size, checked below by its own header
		return 0, cost, fmt.Errorf("pack object at %d: %w", pos.off, err)
	}
	size, err = readLEB(br)
	if err != nil {
		return 0, cost, fmt.Errorf("pack object at %d: %w", pos.off, err)
	}
	baseCost, ok := p.memo[base]
	if !ok {
		if _, baseCost, err = p.costAt(base, depth+1); err != nil {
			return 0, cost, err
		}
		p.memo[base] = baseCost
	}
	cost = chainCost{sum: baseCost.sum + stored + size, largest: max(baseCost.largest, stored, size)}
	if cost.sum > MaxInflateBytes {
		return 0, cost, fmt.Errorf("%w (%d bytes over its delta chain)", errCostly, cost.sum)
	}
	return size, cost, nil
}

// reset points the reused zlib reader at r.
func (p *packCosts) reset(r io.Reader) error {
	if p.zr == nil {
		zr, err := zlib.NewReader(r)
		p.zr = zr
		return err
	}
	return p.zr.(zlib.Resetter).Reset(r, nil)
}

// readLEB reads a size of the delta format (7 bits a byte, least
// significant first).
func readLEB(r io.ByteReader) (int64, error) {
	var n int64
	for shift := 0; ; shift += 7 {
		c, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		if shift > 56 {
			return 0, errors.New("delta size overflows")
		}
		n |= int64(c&0x7f) << shift
		if c&0x80 == 0 {
			return n, nil
		}
	}
}
