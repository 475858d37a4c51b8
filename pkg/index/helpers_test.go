package index_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"codectx/pkg/blob"
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

// bucketDriver adapts a Bucket back to a Driver so a test can wrap it.
type bucketDriver struct{ b *blob.Bucket }

func memDriver(b *blob.Bucket) blob.Driver { return bucketDriver{b} }

func (d bucketDriver) Put(ctx context.Context, k string, v []byte) error { return d.b.Put(ctx, k, v) }
func (d bucketDriver) Get(ctx context.Context, k string) ([]byte, error) { return d.b.Get(ctx, k) }
func (d bucketDriver) Delete(ctx context.Context, k string) error        { return d.b.Delete(ctx, k) }
func (d bucketDriver) List(ctx context.Context, p string) ([]string, error) {
	return d.b.List(ctx, p)
}
func (d bucketDriver) Create(ctx context.Context, k string, v []byte) error {
	return d.b.Create(ctx, k, v)
}
func (d bucketDriver) Swap(ctx context.Context, k string, old, new []byte) error {
	return d.b.Swap(ctx, k, old, new)
}
