package source

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"codectx/pkg/netguard"
	"codectx/pkg/testrepo"
)

// randomText is n bytes that do not compress.
func randomText(t *testing.T, n int) string {
	b := make([]byte, n/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// A remote clone or fetch past the policy's FetchBytes fails with
// ErrTooLarge and leaves nothing of itself in the clone cache: no partial
// clone, no temporary pack, the cached clone as it was.
func TestFetchLimit(t *testing.T) {
	f := newFixture(t)
	first := f.commit("first", map[string]string{"big.txt": randomText(t, 300<<10)})
	url := testrepo.SmartHTTP(t, filepath.Dir(f.dir)) + "/proj/.git"
	small := netguard.With(ctx, &netguard.Policy{AllowPrivate: true, FetchBytes: 64 << 10})
	large := netguard.With(ctx, &netguard.Policy{AllowPrivate: true, FetchBytes: 16 << 20})

	cache := t.TempDir()
	if _, err := Open(small, url, Options{CacheDir: cache}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("clone of 300 KB under a 64 KiB limit: %v, want ErrTooLarge", err)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("the refused clone left %d entries in the cache", len(entries))
	}
	s, err := Open(large, url, Options{CacheDir: cache})
	if err != nil {
		t.Fatalf("clone under a 16 MiB limit: %v", err)
	}
	s.Close()
	if s.Commit != first.String() {
		t.Fatalf("Commit = %s, want %s", s.Commit, first)
	}

	// A push of another 300 KB: the fetch into the cached clone is refused
	// under the small limit, and taken under the large one.
	second := f.commit("second", map[string]string{"big2.txt": randomText(t, 300<<10)})
	if _, err := Open(small, url, Options{CacheDir: cache, Rev: second.String()}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("fetch of 300 KB under a 64 KiB limit: %v, want ErrTooLarge", err)
	}
	clone := filepath.Join(cache, cacheName("", url))
	if tmps, _ := filepath.Glob(filepath.Join(clone, "objects", "pack", "tmp_*")); len(tmps) != 0 {
		t.Errorf("the refused fetch left %d temporary files: %v", len(tmps), tmps)
	}
	s, err = Open(ctx, url, Options{CacheDir: cache, Offline: true, Rev: first.String()})
	if err != nil {
		t.Fatalf("the cached clone after a refused fetch: %v", err)
	}
	s.Close()
	s, err = Open(large, url, Options{CacheDir: cache, Rev: second.String()})
	if err != nil {
		t.Fatalf("fetch under a 16 MiB limit: %v", err)
	}
	for _, file := range s.Files {
		if _, err := s.Read(file); err != nil {
			t.Errorf("read %s of the fetched commit: %v", file.Path, err)
		}
	}
	if len(s.Files) != 2 {
		t.Errorf("the fetched commit has %d files, want 2", len(s.Files))
	}
	s.Close()
	if s.Commit != second.String() {
		t.Errorf("Commit = %s, want %s", s.Commit, second)
	}

	// A local repository (an operator's) has no limit.
	s, err = Open(small, "file://"+filepath.ToSlash(f.dir), Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatalf("local clone under the 64 KiB limit: %v", err)
	}
	s.Close()
}
