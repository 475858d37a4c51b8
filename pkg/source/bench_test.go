package source

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// synthetic makes a packed bare repository shaped like a large source tree
// (n files in 100 directories, 100 bytes to 20 kB each, a few per cent
// under 1 kB) and a plain directory with the same files.
func synthetic(b *testing.B, n int) (bare, plain string) {
	b.Helper()
	entries := map[string]entry{}
	files := map[string]string{}
	for i := range n {
		p := fmt.Sprintf("pkg%02d/sub%d/file%05d.go", i%100, i%7, i)
		size := 100 + (i*7919)%20000
		line := fmt.Sprintf("// file %d: func F%d() int { return %d }\n", i, i, i)
		data := strings.Repeat(line, size/len(line)+1)[:size]
		entries[p] = entry{mode: filemode.Regular, data: data}
		files[p] = data
	}
	loose := filepath.Join(b.TempDir(), "loose.git")
	repo, err := git.PlainInit(loose, true)
	if err != nil {
		b.Fatal(err)
	}
	commitTree(b, repo, entries)
	bare = filepath.Join(b.TempDir(), "packed.git")
	if _, err := git.PlainClone(bare, true, &git.CloneOptions{URL: loose}); err != nil {
		b.Fatal(err)
	}
	plain = filepath.Join(b.TempDir(), "plain")
	writeFiles(b, plain, files)
	return bare, plain
}

func BenchmarkOpen(b *testing.B) {
	bare, plain := synthetic(b, 10000)
	for _, loc := range []struct{ name, dir string }{{"git", bare}, {"plain", plain}} {
		b.Run(loc.name, func(b *testing.B) {
			for b.Loop() {
				s, err := Open(ctx, loc.dir, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if len(s.Files) != 10000 {
					b.Fatalf("%d files", len(s.Files))
				}
				s.Close()
			}
		})
	}
}

// BenchmarkRead reads every file of a fresh snapshot (cold object cache)
// from g goroutines.
func BenchmarkRead(b *testing.B) {
	bare, plain := synthetic(b, 10000)
	for _, loc := range []struct{ name, dir string }{{"git", bare}, {"plain", plain}} {
		for _, g := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", loc.name, g), func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					s, err := Open(ctx, loc.dir, Options{})
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					readAll(b, s, g)
					s.Close()
				}
			})
		}
	}
}

func readAll(b *testing.B, s *Snapshot, g int) {
	var wg sync.WaitGroup
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; j < len(s.Files); j += g {
				if _, err := s.Read(s.Files[j]); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
