package source

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"

	"codectx/pkg/codectx"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// dirReader reads files of a plain directory. os.Root keeps reads inside
// the directory and is safe for concurrent use.
type dirReader struct {
	root *os.Root
}

// walkDir lists the regular files under abs, honouring .gitignore files
// (none when noList: the snapshot only reads).
func walkDir(ctx context.Context, abs string, noList bool) (*Snapshot, error) {
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{src: &dirReader{root: root}}
	if noList {
		return s, nil
	}
	w := dirWalker{ctx: ctx, root: root, snap: s}
	if err := w.walk(".", nil, nil); err != nil {
		root.Close()
		return nil, err
	}
	sortSnapshot(s)
	return s, nil
}

type dirWalker struct {
	ctx  context.Context
	root *os.Root
	snap *Snapshot
	n    int
}

// walk lists directory dir (slash path, "." for the root) whose path
// components are parts, under the ignore patterns of its parents.
func (w *dirWalker) walk(dir string, parts []string, patterns []gitignore.Pattern) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	f, err := w.root.Open(dir)
	if err != nil {
		return err
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	ps, err := w.ignoreFile(dir, parts)
	if err != nil {
		return err
	}
	if len(ps) > 0 {
		patterns = append(patterns[:len(patterns):len(patterns)], ps...)
	}
	m := gitignore.NewMatcher(patterns)
	for _, e := range entries {
		name := e.Name()
		if name == ".git" {
			continue
		}
		if !validName(name) {
			// Not UTF-8: as in a git tree, listed quoted, not a path.
			w.skip(path.Join(dir, strconv.Quote(name)), SkipBadName)
			continue
		}
		p := path.Join(dir, name)
		sub := append(parts[:len(parts):len(parts)], name)
		switch t := e.Type(); {
		case t&fs.ModeSymlink != 0:
			w.skip(p, codectx.SkipSymlink)
		case t.IsDir():
			if m.Match(sub, true) {
				w.skip(p+"/", codectx.SkipIgnored)
				continue
			}
			if err := w.walk(p, sub, patterns); err != nil {
				return err
			}
		case t.IsRegular():
			if m.Match(sub, false) {
				w.skip(p, codectx.SkipIgnored)
				continue
			}
			if err := w.file(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// ignoreFile parses the .gitignore of dir, if any.
func (w *dirWalker) ignoreFile(dir string, parts []string) ([]gitignore.Pattern, error) {
	data, err := w.root.ReadFile(path.Join(dir, ".gitignore"))
	if err != nil {
		// Absent, a directory or unreadable: it ignores nothing.
		return nil, nil
	}
	var ps []gitignore.Pattern
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, parts))
	}
	return ps, nil
}

// file hashes one regular file the way `git hash-object` does.
func (w *dirWalker) file(p string) error {
	if w.n++; w.n%256 == 0 {
		if err := w.ctx.Err(); err != nil {
			return err
		}
	}
	f, err := w.root.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	var h plumbing.Hash
	if size < lfsMaxSize {
		data, err := io.ReadAll(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		if bytes.HasPrefix(data, []byte(lfsPrefix)) {
			w.skip(p, codectx.SkipLFSPointer)
			return nil
		}
		size = int64(len(data))
		h = plumbing.ComputeHash(plumbing.BlobObject, data)
	} else {
		hasher := plumbing.NewHasher(plumbing.BlobObject, size)
		n, err := io.Copy(hasher, io.LimitReader(f, size))
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		if n != size {
			return fmt.Errorf("read %s: file shrank while hashing", p)
		}
		h = hasher.Sum()
	}
	w.snap.Files = append(w.snap.Files, File{Path: p, Blob: h.String(), Size: size})
	return nil
}

func (w *dirWalker) skip(p, reason string) {
	w.snap.Skipped = append(w.snap.Skipped, Skipped{Path: p, Reason: reason})
}

func (d *dirReader) read(f File) ([]byte, error) {
	return d.root.ReadFile(f.Path)
}

func (d *dirReader) history(context.Context, int, *HistoryBase) ([]Commit, error) { return nil, nil }

func (d *dirReader) close() error { return d.root.Close() }
