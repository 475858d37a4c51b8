// Package drivertest is the conformance suite every blob driver must pass,
// so that code written against blob.Bucket behaves the same on a local
// directory and on an S3 server.
package drivertest

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"codectx/pkg/blob"
)

// RunConformance runs the suite. newBucket must return an empty bucket each
// call (a fresh directory or a fresh key prefix) and arrange its cleanup.
func RunConformance(t *testing.T, newBucket func(t *testing.T) *blob.Bucket) {
	tests := []struct {
		name string
		run  func(t *testing.T, b *blob.Bucket)
	}{
		{"PutGet", testPutGet},
		{"NotFound", testNotFound},
		{"List", testList},
		{"Delete", testDelete},
		{"Create", testCreate},
		{"Swap", testSwap},
		{"SwapRace", testSwapRace},
		{"SwapCounter", testSwapCounter},
		{"Large", testLarge},
		{"InvalidKeys", testInvalidKeys},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newBucket(t)) })
	}
}

func mustPut(t *testing.T, b *blob.Bucket, key, data string) {
	t.Helper()
	if err := b.Put(t.Context(), key, []byte(data)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func wantContent(t *testing.T, b *blob.Bucket, key, want string) {
	t.Helper()
	got, err := b.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if string(got) != want {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
}

func testPutGet(t *testing.T, b *blob.Bucket) {
	for _, tc := range []struct{ key, data string }{
		{"a", "first"},
		{"dir/sub/file.txt", "nested"},
		{"space and ünïcode/κλειδί.json", `{"x":1}`},
		{"empty", ""},
	} {
		mustPut(t, b, tc.key, tc.data)
		wantContent(t, b, tc.key, tc.data)
		ok, err := b.Exists(t.Context(), tc.key)
		if err != nil || !ok {
			t.Fatalf("Exists(%q) = %v, %v; want true, nil", tc.key, ok, err)
		}
	}
	mustPut(t, b, "a", "second")
	wantContent(t, b, "a", "second")
}

func testNotFound(t *testing.T, b *blob.Bucket) {
	mustPut(t, b, "dir/x", "x")
	for _, key := range []string{"missing", "dir", "dir/y", "dir/x/deeper"} {
		if _, err := b.Get(t.Context(), key); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Get(%q) err = %v, want ErrNotFound", key, err)
		}
		ok, err := b.Exists(t.Context(), key)
		if err != nil || ok {
			t.Errorf("Exists(%q) = %v, %v; want false, nil", key, ok, err)
		}
	}
}

func testList(t *testing.T, b *blob.Bucket) {
	keys := []string{"a/2", "a/10", "a/1", "a/b/c", "ab", "a-c", "b/1"}
	for _, k := range keys {
		mustPut(t, b, k, k)
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a-c", "a/1", "a/10", "a/2", "a/b/c", "ab", "b/1"}},
		{"a/", []string{"a/1", "a/10", "a/2", "a/b/c"}},
		{"a/1", []string{"a/1", "a/10"}},
		{"a", []string{"a-c", "a/1", "a/10", "a/2", "a/b/c", "ab"}},
		{"a/b/", []string{"a/b/c"}},
		{"b", []string{"b/1"}},
		{"zzz/", nil},
		{"a/b/c/d", nil},
	} {
		got, err := b.List(t.Context(), tc.prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", tc.prefix, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("List(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

func testDelete(t *testing.T, b *blob.Bucket) {
	mustPut(t, b, "d/x", "x")
	mustPut(t, b, "d/y", "y")
	for i := range 2 { // the second delete is of a missing key
		if err := b.Delete(t.Context(), "d/x"); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	if err := b.Delete(t.Context(), "never/existed"); err != nil {
		t.Fatalf("Delete(missing): %v", err)
	}
	if _, err := b.Get(t.Context(), "d/x"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Get after Delete err = %v, want ErrNotFound", err)
	}
	wantContent(t, b, "d/y", "y")
	got, err := b.List(t.Context(), "d/")
	if err != nil || !slices.Equal(got, []string{"d/y"}) {
		t.Fatalf("List after Delete = %q, %v; want [d/y]", got, err)
	}
	// A deleted key can be created again.
	if err := b.Create(t.Context(), "d/x", []byte("again")); err != nil {
		t.Fatalf("Create after Delete: %v", err)
	}
	wantContent(t, b, "d/x", "again")
}

func testCreate(t *testing.T, b *blob.Bucket) {
	if err := b.Create(t.Context(), "c/k", []byte("one")); err != nil {
		t.Fatalf("first Create: %v", err)
	}
	if err := b.Create(t.Context(), "c/k", []byte("two")); !errors.Is(err, blob.ErrExists) {
		t.Fatalf("second Create err = %v, want ErrExists", err)
	}
	wantContent(t, b, "c/k", "one")

	// Racing creators: exactly one wins.
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = b.Create(t.Context(), "c/race", []byte(strconv.Itoa(i))) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("Create winners %d and %d", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, blob.ErrExists):
			t.Fatalf("racing Create %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no racing Create won")
	}
	wantContent(t, b, "c/race", strconv.Itoa(winner))
}

func testSwap(t *testing.T, b *blob.Bucket) {
	ctx := t.Context()
	steps := []struct {
		name     string
		old, new []byte
		wantErr  error
		want     string // content afterwards; "-" = missing
	}{
		{"present old on missing key", []byte("x"), []byte("y"), blob.ErrConflict, "-"},
		{"empty old on missing key", []byte{}, []byte("y"), blob.ErrConflict, "-"},
		{"nil old on missing key", nil, []byte("v1"), nil, "v1"},
		{"nil old on present key", nil, []byte("v9"), blob.ErrConflict, "v1"},
		{"stale old", []byte("v0"), []byte("v9"), blob.ErrConflict, "v1"},
		{"current old", []byte("v1"), []byte("v2"), nil, "v2"},
		{"replaced old is stale", []byte("v1"), []byte("v3"), blob.ErrConflict, "v2"},
		{"to empty", []byte("v2"), []byte{}, nil, ""},
		{"from empty", []byte{}, []byte("v4"), nil, "v4"},
	}
	for _, s := range steps {
		err := b.Swap(ctx, "ptr", s.old, s.new)
		if !errors.Is(err, s.wantErr) || (s.wantErr == nil && err != nil) {
			t.Fatalf("%s: Swap err = %v, want %v", s.name, err, s.wantErr)
		}
		got, err := b.Get(ctx, "ptr")
		switch {
		case s.want == "-" && !errors.Is(err, blob.ErrNotFound):
			t.Fatalf("%s: Get = %q, %v; want ErrNotFound", s.name, got, err)
		case s.want != "-" && (err != nil || string(got) != s.want):
			t.Fatalf("%s: Get = %q, %v; want %q", s.name, got, err, s.want)
		}
	}
}

// testSwapRace: in each round 8 goroutines read the same pointer value and
// all try to advance it; exactly one must win.
func testSwapRace(t *testing.T, b *blob.Bucket) {
	ctx := t.Context()
	const workers, rounds = 8, 10
	if err := b.Swap(ctx, "counter", nil, []byte("0")); err != nil {
		t.Fatal(err)
	}
	for r := range rounds {
		old := []byte(strconv.Itoa(r))
		next := []byte(strconv.Itoa(r + 1))
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, workers)
		for i := range workers {
			wg.Go(func() {
				<-start
				errs[i] = b.Swap(ctx, "counter", old, next)
			})
		}
		close(start)
		wg.Wait()
		wins := 0
		for i, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, blob.ErrConflict):
				t.Fatalf("round %d worker %d: %v", r, i, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d winners, want exactly 1", r, wins)
		}
	}
	wantContent(t, b, "counter", strconv.Itoa(rounds))
}

// testSwapCounter: 8 goroutines each increment a shared counter with a
// read-modify-swap retry loop; no increment may be lost.
func testSwapCounter(t *testing.T, b *blob.Bucket) {
	ctx := t.Context()
	const workers, incs = 8, 5
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for i := range workers {
		wg.Go(func() {
			for range incs {
				if errs[i] = increment(ctx, b, "n"); errs[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	wantContent(t, b, "n", strconv.Itoa(workers*incs))
}

func increment(ctx context.Context, b *blob.Bucket, key string) error {
	for {
		cur, err := b.Get(ctx, key)
		var old []byte // nil: key must not exist yet
		n := 0
		switch {
		case errors.Is(err, blob.ErrNotFound):
		case err != nil:
			return err
		default:
			old = cur
			if n, err = strconv.Atoi(string(cur)); err != nil {
				return err
			}
		}
		err = b.Swap(ctx, key, old, []byte(strconv.Itoa(n+1)))
		if !errors.Is(err, blob.ErrConflict) {
			return err
		}
	}
}

func testLarge(t *testing.T, b *blob.Bucket) {
	data := make([]byte, 5<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if err := b.Put(t.Context(), "big/blob", data); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(t.Context(), "big/blob")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("Get returned %d bytes differing from the %d put", len(got), len(data))
	}
	if err := b.Create(t.Context(), "big/created", data); err != nil {
		t.Fatal(err)
	}
	if err := b.Swap(t.Context(), "big/created", data, []byte("small")); err != nil {
		t.Fatal(err)
	}
	wantContent(t, b, "big/created", "small")
}

func testInvalidKeys(t *testing.T, b *blob.Bucket) {
	ctx := t.Context()
	for _, key := range []string{"", "/abs", "a/../b", "..", ".", "a/./b", "a\x00b", "a//b", "dir/", `a\b`} {
		ops := map[string]error{
			"Put":    b.Put(ctx, key, []byte("x")),
			"Create": b.Create(ctx, key, []byte("x")),
			"Swap":   b.Swap(ctx, key, nil, []byte("x")),
			"Delete": b.Delete(ctx, key),
		}
		_, ops["Get"] = b.Get(ctx, key)
		_, ops["Exists"] = b.Exists(ctx, key)
		for op, err := range ops {
			if !errors.Is(err, blob.ErrInvalidKey) {
				t.Errorf("%s(%q) err = %v, want ErrInvalidKey", op, key, err)
			}
		}
	}
	for _, prefix := range []string{"/", "/abs", "../", "a//", "a\x00"} {
		if _, err := b.List(ctx, prefix); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("List(%q) err = %v, want ErrInvalidKey", prefix, err)
		}
	}
	if got, err := b.List(ctx, ""); err != nil || len(got) != 0 {
		t.Errorf("List after rejected writes = %q, %v; want empty", got, err)
	}
}
