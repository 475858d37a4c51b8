// Package minio is the S3 blob driver, built on minio-go and tested against
// a real MinIO server. Create and Swap use conditional PUTs (If-None-Match
// "*" and If-Match <etag>), which MinIO and current AWS S3 evaluate
// atomically on the server, so several processes can share one bucket.
package minio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"codectx/pkg/blob"

	mc "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Config says where the bucket lives.
type Config struct {
	Endpoint  string // host:port, no scheme
	AccessKey string
	SecretKey string
	Bucket    string
	Secure    bool   // use HTTPS
	Prefix    string // optional key prefix inside the bucket, e.g. "codectx/"
	// MustExist refuses a bucket that does not exist (ErrNoBucket)
	// instead of creating it: for a command that only cleans up, a
	// mistyped name is not a new empty bucket.
	MustExist bool
}

// ErrNoBucket is Open's error for a missing bucket with Config.MustExist.
var ErrNoBucket = errors.New("bucket does not exist")

// Open connects to the server and returns a Bucket, creating the S3 bucket
// if it does not exist (unless Config.MustExist).
func Open(ctx context.Context, cfg Config) (*blob.Bucket, error) {
	d, err := newDriver(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("blob minio %s/%s: %w", cfg.Endpoint, cfg.Bucket, err)
	}
	return blob.NewBucket(d), nil
}

type driver struct {
	c      *mc.Client
	bucket string
	prefix string
}

func newDriver(ctx context.Context, cfg Config) (*driver, error) {
	prefix := cfg.Prefix
	if prefix != "" {
		prefix = strings.TrimSuffix(prefix, "/")
		if err := blob.ValidKey(prefix); err != nil {
			return nil, fmt.Errorf("prefix: %w", err)
		}
		prefix += "/"
	}
	c, err := mc.New(cfg.Endpoint, &mc.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: cfg.Secure,
	})
	if err != nil {
		return nil, err
	}
	ok, err := c.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, err
	}
	if !ok && cfg.MustExist {
		return nil, ErrNoBucket
	}
	if !ok {
		err := c.MakeBucket(ctx, cfg.Bucket, mc.MakeBucketOptions{})
		if code := mc.ToErrorResponse(err).Code; err != nil && code != "BucketAlreadyOwnedByYou" && code != "BucketAlreadyExists" {
			return nil, err
		}
	}
	return &driver{c: c, bucket: cfg.Bucket, prefix: prefix}, nil
}

// errPrecondition marks a failed If-Match / If-None-Match; errInFlight (a
// kind of it) a 409 for a competing conditional write still in progress.
var (
	errPrecondition = errors.New("precondition failed")
	errInFlight     = fmt.Errorf("%w: conflicting write in flight", errPrecondition)
)

// mapErr turns S3 error responses into the blob sentinels.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	r := mc.ToErrorResponse(err)
	switch {
	case r.Code == mc.NoSuchKey || r.StatusCode == http.StatusNotFound && r.Code != mc.NoSuchBucket:
		return fmt.Errorf("%w: %v", blob.ErrNotFound, err)
	case r.Code == mc.PreconditionFailed || r.StatusCode == http.StatusPreconditionFailed:
		return fmt.Errorf("%w: %v", errPrecondition, err)
	case r.Code == "ConditionalRequestConflict" || r.StatusCode == http.StatusConflict:
		// S3 answers 409 when a conflicting conditional write is in flight.
		return fmt.Errorf("%w: %v", errInFlight, err)
	}
	return err
}

func (d *driver) put(ctx context.Context, key string, data []byte, opts mc.PutObjectOptions) error {
	opts.DisableMultipart = true // a single PUT, so conditions apply atomically
	opts.ContentType = "application/octet-stream"
	_, err := d.c.PutObject(ctx, d.bucket, d.prefix+key, bytes.NewReader(data), int64(len(data)), opts)
	return mapErr(err)
}

func (d *driver) Put(ctx context.Context, key string, data []byte) error {
	return d.put(ctx, key, data, mc.PutObjectOptions{})
}

// get returns the object's content and its ETag. Reading first makes the
// ETag come from the same response as the content; should the object be
// replaced while a large body is read in parts, the read is retried.
func (d *driver) get(ctx context.Context, key string) ([]byte, string, error) {
	for try := 0; ; try++ {
		data, etag, err := d.getOnce(ctx, key)
		if !errors.Is(err, errPrecondition) || try == 3 {
			return data, etag, err
		}
	}
}

func (d *driver) getOnce(ctx context.Context, key string) ([]byte, string, error) {
	obj, err := d.c.GetObject(ctx, d.bucket, d.prefix+key, mc.GetObjectOptions{})
	if err != nil {
		return nil, "", mapErr(err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		return nil, "", mapErr(err)
	}
	info, err := obj.Stat()
	if err != nil {
		return nil, "", mapErr(err)
	}
	return data, info.ETag, nil
}

func (d *driver) Get(ctx context.Context, key string) ([]byte, error) {
	data, _, err := d.get(ctx, key)
	return data, err
}

func (d *driver) Exists(ctx context.Context, key string) (bool, error) {
	_, err := d.c.StatObject(ctx, d.bucket, d.prefix+key, mc.StatObjectOptions{})
	err = mapErr(err)
	if errors.Is(err, blob.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (d *driver) Delete(ctx context.Context, key string) error {
	err := mapErr(d.c.RemoveObject(ctx, d.bucket, d.prefix+key, mc.RemoveObjectOptions{}))
	if errors.Is(err, blob.ErrNotFound) {
		return nil
	}
	return err
}

func (d *driver) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	for o := range d.c.ListObjects(ctx, d.bucket, mc.ListObjectsOptions{Prefix: d.prefix + prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, mapErr(o.Err)
		}
		keys = append(keys, strings.TrimPrefix(o.Key, d.prefix))
	}
	sort.Strings(keys)
	return keys, nil
}

func (d *driver) Create(ctx context.Context, key string, data []byte) error {
	var opts mc.PutObjectOptions
	opts.SetMatchETagExcept("*")
	err := d.put(ctx, key, data, opts)
	for try := 0; try < 5 && errors.Is(err, errInFlight); try++ {
		// A competing conditional write was in flight; its outcome decides.
		time.Sleep(time.Duration(try+1) * 20 * time.Millisecond)
		err = d.put(ctx, key, data, opts)
	}
	if errors.Is(err, errPrecondition) {
		return fmt.Errorf("%w: %v", blob.ErrExists, err)
	}
	return err
}

func (d *driver) Swap(ctx context.Context, key string, old, new []byte) error {
	var opts mc.PutObjectOptions
	if old == nil {
		opts.SetMatchETagExcept("*")
	} else {
		cur, etag, err := d.get(ctx, key)
		if errors.Is(err, blob.ErrNotFound) {
			return fmt.Errorf("%w: key missing", blob.ErrConflict)
		}
		if err != nil {
			return err
		}
		if !bytes.Equal(cur, old) {
			return fmt.Errorf("%w: content differs", blob.ErrConflict)
		}
		opts.SetMatchETag(etag)
	}
	err := d.put(ctx, key, new, opts)
	if errors.Is(err, errPrecondition) {
		return fmt.Errorf("%w: %v", blob.ErrConflict, err)
	}
	return err
}
