package api

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/blob/minio"
	"codectx/pkg/index"
)

// minioStore opens the test MinIO server of the environment under a fresh
// prefix (deleted afterwards), or skips when there is none; under CI=true
// a missing server is a failure.
func minioStore(t *testing.T) *blob.Bucket {
	t.Helper()
	endpoint := os.Getenv("CODECTX_TEST_MINIO_ENDPOINT")
	if endpoint == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but no MinIO server (CODECTX_TEST_MINIO_ENDPOINT unset): make check starts one (scripts/with-minio.sh)")
		}
		t.Skip(`no MinIO server: run eval "$(scripts/minio.sh start)" to set CODECTX_TEST_MINIO_ENDPOINT, _ACCESS_KEY, _SECRET_KEY`)
	}
	b, err := minio.Open(t.Context(), minio.Config{
		Endpoint:  endpoint,
		AccessKey: os.Getenv("CODECTX_TEST_MINIO_ACCESS_KEY"),
		SecretKey: os.Getenv("CODECTX_TEST_MINIO_SECRET_KEY"),
		Bucket:    "codectx-test",
		Prefix:    fmt.Sprintf("run-%d/%s", time.Now().UnixNano(), t.Name()),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := b.List(ctx, "")
		for _, k := range keys {
			b.Delete(ctx, k)
		}
	})
	return b
}

// cacheFiles lists the shard files in a shard cache dir (relative, slash
// separated) with their sizes, leaving out the temp dir.
func cacheFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	files := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".tmp" {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = fi.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestShardCacheMinIO serves repositories of a real MinIO store through a
// query server with a bounded shard cache and checks, end to end over
// HTTP: answers equal the in-heap path's (no shard cache); the shards land
// in the cache dir, which stays within its bound while more shards than fit
// are served; a cached shard corrupted on disk (a flipped byte, a cut) is
// detected, fetched again, and the query answers as before; and a tenant
// reaches only its own shards (cache files are named by the store key,
// which holds the tenant, and a tenant names only its own HEADs).
func TestShardCacheMinIO(t *testing.T) {
	store := minioStore(t)
	ctx := context.Background()
	repos := []string{"alpha", "beta", "gamma"}
	for _, r := range repos {
		dir := filepath.Join(t.TempDir(), r)
		os.MkdirAll(dir, 0o755)
		for i := range 30 {
			body := fmt.Sprintf("package %s\n\n// Handle%d serves request %d of %s.\nfunc Handle%d(n int) int {\n\treturn n + %d\n}\n", r, i, i, r, i, i)
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.go", i)), []byte(body), 0o644)
		}
		if _, err := index.Build(ctx, store, dir, index.Options{Name: r, Workers: 1, ShardBytes: 1 << 10}); err != nil {
			t.Fatal(err)
		}
	}
	// Another tenant's "alpha", with its own words.
	odir := filepath.Join(t.TempDir(), "alpha")
	os.MkdirAll(odir, 0o755)
	for i := range 10 {
		body := fmt.Sprintf("package secret\n\n// Handle%d hides vault%d of the other tenant.\nfunc Handle%d() {}\n", i, i, i)
		os.WriteFile(filepath.Join(odir, fmt.Sprintf("s%d.go", i)), []byte(body), 0o644)
	}
	if _, err := index.Build(ctx, store, odir, index.Options{Name: "alpha", Tenant: "other", Workers: 1, ShardBytes: 1 << 10}); err != nil {
		t.Fatal(err)
	}

	// Shards per repository, and the bound: the largest repository's
	// worth, so each fits and serving all three must evict.
	shardBytes := map[string]int64{}
	var bound int64
	for _, r := range repos {
		var total int64
		keys, err := store.List(ctx, index.ShardPrefix(index.DefaultTenant, r))
		if err != nil || len(keys) < 2 {
			t.Fatalf("%s: %d shards (%v), want several", r, len(keys), err)
		}
		for _, k := range keys {
			b, err := store.Get(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			shardBytes[k] = int64(len(b))
			total += int64(len(b))
		}
		bound = max(bound, total)
	}

	answer := func(c *Client, tenant, repo string) (string, error) {
		resp, err := c.Query(ctx, QueryRequest{Tenant: tenant, Repo: repo, Query: "Handle7 serves request", Budget: 500})
		if err != nil {
			return "", err
		}
		if len(resp.Chunks) == 0 {
			return "", fmt.Errorf("no chunks")
		}
		return fmt.Sprintf("%s %+v %s", resp.Commit, resp.Chunks, resp.Context), nil
	}
	must := func(c *Client, tenant, repo string) string {
		t.Helper()
		a, err := answer(c, tenant, repo)
		if err != nil {
			t.Fatalf("query %s/%s: %v", tenant, repo, err)
		}
		return a
	}

	// (1) The in-heap path (no shard cache) is the reference.
	_, heap := newServer(t, &Server{Store: store, Routes: QueryRoutes})
	want := map[string]string{}
	for _, r := range repos {
		want[r] = must(heap, "", r)
	}
	wantOther := must(heap, "other", "alpha")

	// (2) A bounded cache, one segment loaded at a time: every query loads
	// its segment again through the cache.
	dir := t.TempDir()
	cache, err := index.OpenShardCache(dir, bound)
	if err != nil {
		t.Fatal(err)
	}
	_, c := newServer(t, &Server{Store: store, Routes: QueryRoutes, ShardCache: cache, CacheSize: 1})
	seen := map[string]bool{}
	for range 2 {
		for _, r := range repos {
			if got := must(c, "", r); got != want[r] {
				t.Fatalf("%s through the shard cache:\n%s\nwant\n%s", r, got, want[r])
			}
			files := cacheFiles(t, dir)
			var sum int64
			for k, n := range files {
				if shardBytes[k] != n {
					t.Fatalf("cache file %s: %d bytes, not a shard of the store (%d)", k, n, shardBytes[k])
				}
				seen[k] = true
				sum += n
			}
			if len(files) == 0 || sum > bound || sum != cache.Bytes() {
				t.Fatalf("after %s: cache dir holds %d files, %d bytes (cache says %d), bound %d", r, len(files), sum, cache.Bytes(), bound)
			}
		}
	}
	if len(seen) != len(shardBytes) {
		t.Fatalf("cache saw %d of %d shards", len(seen), len(shardBytes))
	}

	// (3) Corrupt a cached shard of alpha on disk (a new file renamed in
	// place, as another writer would), make the server load alpha again:
	// the copy is detected, fetched again, and the answer is unchanged.
	dir3 := t.TempDir()
	cache3, err := index.OpenShardCache(dir3, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, c3 := newServer(t, &Server{Store: store, Routes: QueryRoutes, ShardCache: cache3, CacheSize: 1})
	keys, _ := store.List(ctx, index.ShardPrefix(index.DefaultTenant, "alpha"))
	for i, corrupt := range []struct {
		name string
		f    func([]byte) []byte
	}{
		{"flipped byte", func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b }},
		{"cut short", func(b []byte) []byte { return b[:len(b)-1] }},
		{"emptied", func(b []byte) []byte { return nil }},
	} {
		must(c3, "", "alpha")
		key := keys[i%len(keys)]
		p := filepath.Join(dir3, filepath.FromSlash(key))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%s: cached shard: %v", corrupt.name, err)
		}
		if err := os.WriteFile(p+".x", corrupt.f(bytes.Clone(data)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".x", p); err != nil {
			t.Fatal(err)
		}
		must(c3, "", "beta") // evicts alpha's segment
		if got := must(c3, "", "alpha"); got != want["alpha"] {
			t.Fatalf("%s: after corruption:\n%s\nwant\n%s", corrupt.name, got, want["alpha"])
		}
		again, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("%s: the cached copy was not fetched again (%d bytes, %v)", corrupt.name, len(again), err)
		}
	}

	// (4) Tenants: the other tenant's alpha answers its own, default's
	// alpha its own, both through the one cache; cache files are named by
	// store keys, each under its tenant's shard prefix; a tenant without a
	// repository gets no answer although its shards are in the cache.
	if got := must(c, "other", "alpha"); got != wantOther || strings.Contains(got, "serves request") {
		t.Fatalf("other/alpha through the cache:\n%s\nwant\n%s", got, wantOther)
	}
	otherPrefix := index.ShardPrefix("other", "alpha")
	files := cacheFiles(t, dir)
	var otherSeen bool
	for k := range files {
		otherSeen = otherSeen || strings.HasPrefix(k, otherPrefix)
	}
	if !otherSeen {
		t.Errorf("no cache file under %s: %v", otherPrefix, files)
	}
	if got := must(c, "", "alpha"); got != want["alpha"] || strings.Contains(got, "vault") {
		t.Fatalf("default/alpha after other's: %s", got)
	}
	for k := range cacheFiles(t, dir3) {
		files[k] = 0
	}
	for k := range files {
		own := strings.HasPrefix(k, otherPrefix)
		for _, r := range repos {
			own = own || strings.HasPrefix(k, index.ShardPrefix(index.DefaultTenant, r))
		}
		if !own {
			t.Errorf("cache file %s is under no tenant's shard prefix", k)
		}
	}
	for _, q := range []struct{ tenant, repo string }{
		{"other", "beta"}, {"other", "gamma"},
		{"other/../default", "beta"}, {"../default", "beta"}, {"other", "../../default/beta"},
	} {
		if a, err := answer(c, q.tenant, q.repo); err == nil {
			t.Errorf("tenant %q reached default's shards as repo %q: %s", q.tenant, q.repo, a)
		}
	}
}
