package minio_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/blob"
	"codectx/pkg/blob/drivertest"
	"codectx/pkg/blob/minio"
)

// serverConfig returns the test server from the environment or skips.
func serverConfig(t *testing.T) minio.Config {
	t.Helper()
	endpoint := os.Getenv("CODECTX_TEST_MINIO_ENDPOINT")
	if endpoint == "" {
		t.Skip(`no MinIO server: run eval "$(scripts/minio.sh start)" to set CODECTX_TEST_MINIO_ENDPOINT, _ACCESS_KEY, _SECRET_KEY`)
	}
	return minio.Config{
		Endpoint:  endpoint,
		AccessKey: os.Getenv("CODECTX_TEST_MINIO_ACCESS_KEY"),
		SecretKey: os.Getenv("CODECTX_TEST_MINIO_SECRET_KEY"),
		Bucket:    "codectx-test",
	}
}

var seq atomic.Int64

// openFresh opens the test bucket under a prefix no other test uses and
// deletes what the test wrote afterwards.
func openFresh(t *testing.T, cfg minio.Config) *blob.Bucket {
	t.Helper()
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	cfg.Prefix = fmt.Sprintf("run-%d-%d/%s", time.Now().UnixNano(), seq.Add(1), name)
	b, err := minio.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background() // t.Context is done by cleanup time
		keys, err := b.List(ctx, "")
		if err != nil {
			t.Logf("cleanup list: %v", err)
			return
		}
		for _, k := range keys {
			if err := b.Delete(ctx, k); err != nil {
				t.Logf("cleanup: %v", err)
			}
		}
	})
	return b
}

func TestConformance(t *testing.T) {
	cfg := serverConfig(t)
	drivertest.RunConformance(t, func(t *testing.T) *blob.Bucket { return openFresh(t, cfg) })
}

func TestPrefixIsolation(t *testing.T) {
	cfg := serverConfig(t)
	a, b := openFresh(t, cfg), openFresh(t, cfg)
	if err := a.Put(t.Context(), "k", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Exists(t.Context(), "k"); err != nil || ok {
		t.Fatalf("other prefix Exists(k) = %v, %v; want false", ok, err)
	}
	if keys, err := a.List(t.Context(), ""); err != nil || len(keys) != 1 || keys[0] != "k" {
		t.Fatalf("List = %q, %v; want [k]", keys, err)
	}
}

func TestBadPrefix(t *testing.T) {
	cfg := minio.Config{Endpoint: "127.0.0.1:1", Bucket: "x", Prefix: "../up"}
	if _, err := minio.Open(t.Context(), cfg); err == nil {
		t.Fatal("Open with prefix ../up succeeded")
	}
}
