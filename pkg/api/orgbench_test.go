package api

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/index"
)

// orgStore indexes n small repositories (four Go files each, with names
// and bodies that differ per repository) for tenant "org".
func orgStore(b *testing.B, n int) *blob.Bucket {
	b.Helper()
	ctx := context.Background()
	store := blob.NewMem()
	for i := range n {
		dir := filepath.Join(b.TempDir(), fmt.Sprintf("svc%03d", i))
		files := map[string]string{
			"go.mod":           fmt.Sprintf("module example.com/svc%03d\n\ngo 1.22\n", i),
			"auth/token.go":    fmt.Sprintf("package auth\n\n// ParseToken%d validates a bearer token for service %d.\nfunc ParseToken%d(s string) (string, error) {\n\tif s == \"\" {\n\t\treturn \"\", errEmpty\n\t}\n\treturn s, nil\n}\n\nvar errEmpty = error(nil)\n", i, i, i),
			"store/cache.go":   fmt.Sprintf("package store\n\n// Cache%d keeps recent rows of service %d in memory with an expiry.\ntype Cache%d struct{ rows map[string][]byte }\n\n// Get returns a cached row.\nfunc (c *Cache%d) Get(k string) []byte { return c.rows[k] }\n", i, i, i, i),
			"http/handler.go":  fmt.Sprintf("package http\n\nimport \"example.com/svc%03d/auth\"\n\n// Serve%d checks the token then answers the request.\nfunc Serve%d(tok string) error {\n\t_, err := auth.ParseToken%d(tok)\n\treturn err\n}\n", i, i, i, i),
			"retry/backoff.go": fmt.Sprintf("package retry\n\n// Backoff%d computes the exponential retry delay with jitter.\nfunc Backoff%d(attempt int) int { return 1 << attempt }\n", i, i),
		}
		for name, body := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := index.Build(ctx, store, dir, index.Options{Tenant: "org", Name: fmt.Sprintf("svc%03d", i), Workers: 1}); err != nil {
			b.Fatal(err)
		}
	}
	return store
}

// BenchmarkOrgSearch is one org-wide query (repos "*") over 1, 10 and 100
// indexed repositories, segments already cached: the per-repository
// search, the fusion and one pack into 4000 tokens.
func BenchmarkOrgSearch(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("repos=%d", n), func(b *testing.B) {
			s := &Server{Store: orgStore(b, n), CacheSize: 1 << 30}
			s.init()
			ctx := context.Background()
			q := Search{Tenant: "org", Repos: []string{AllRepos}, Query: "how is the retry backoff delay computed", Budget: 4000}
			if _, err := s.search(ctx, q); err != nil { // warm the segment cache
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				resp, err := s.search(ctx, q)
				if err != nil || len(resp.Repos) != n {
					b.Fatalf("search: %v", err)
				}
			}
		})
	}
}

// BenchmarkCrossGraph is the cross-repository graph of 10 and 100
// repositories: cold (built from the segments, manifests read from the
// store) and warm (the per-tenant cache answers), beside one org-wide
// search of the same repositories as the baseline.
func BenchmarkCrossGraph(b *testing.B) {
	for _, n := range []int{10, 100} {
		s := &Server{Store: orgStore(b, n), CacheSize: 1 << 30}
		s.init()
		ctx := context.Background()
		names, _ := s.repoNames(ctx, "org")
		segs, err := s.loadAll(ctx, "org", names)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("repos=%d/cold", n), func(b *testing.B) {
			for b.Loop() {
				s.xrepo = xrepoCache{}
				if g := s.crossGraph(ctx, "org", segs); g == nil || len(g.Provides("svc000")) != 1 {
					b.Fatal("no graph")
				}
			}
		})
		b.Run(fmt.Sprintf("repos=%d/warm", n), func(b *testing.B) {
			for b.Loop() {
				s.crossGraph(ctx, "org", segs)
			}
		})
		b.Run(fmt.Sprintf("repos=%d/search", n), func(b *testing.B) {
			q := Search{Tenant: "org", Repos: []string{AllRepos}, Query: "how is the retry backoff delay computed", Budget: 4000}
			for b.Loop() {
				if _, err := s.search(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
