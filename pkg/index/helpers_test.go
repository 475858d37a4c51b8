package index_test

import (
	"os"
	"path/filepath"
	"testing"

	"codectx/pkg/chunk"
)

func chunkOptions(maxSize int64) chunk.Options { return chunk.Options{MaxFileSize: maxSize} }

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
