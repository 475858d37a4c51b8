package natskv_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"codectx/pkg/query"
	"codectx/pkg/queue/natsq"
	"codectx/pkg/session"
	"codectx/pkg/session/natskv"
)

func openJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	srv, err := natsq.StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := natsq.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	return q.JetStream()
}

// The session bucket is bounded (a session id is the caller's choice, so
// one tenant could otherwise fill the disk the embedded NATS shares with
// every tenant's queues), and a tenant that fills it makes the oldest
// sessions go, not other tenants' writes fail.
func TestBucketBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := openJS(t)
	if _, err := natskv.Open(ctx, js, time.Hour); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_"+natskv.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if max := st.CachedInfo().Config.MaxBytes; max != natskv.MaxBytes {
		t.Errorf("session bucket MaxBytes = %d, want %d", max, natskv.MaxBytes)
	}

	// A bucket of 256 KiB; beta's session is written first, then acme
	// writes 40 sessions of about 20 KB each (three times the bucket).
	const limit = 256 << 10
	kv, err := natskv.OpenBounded(ctx, js, time.Hour, limit)
	if err != nil {
		t.Fatal(err)
	}
	sent := func(n int, tag string) *session.Session {
		s := &session.Session{}
		for i := range n {
			s.Add(query.Sent{Repo: "r", Path: fmt.Sprintf("%s/%s/f%d.go", tag, strings.Repeat("x", 100), i), StartLine: 1, EndLine: 2})
		}
		return s
	}
	betaKey, _ := session.Key("beta", "first")
	if err := kv.Save(ctx, betaKey, sent(3, "beta")); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		k, _ := session.Key("acme", fmt.Sprintf("flood-%d", i))
		if err := kv.Save(ctx, k, sent(120, "acme")); err != nil {
			t.Fatalf("acme's session %d of a full bucket: %v (want the oldest dropped instead)", i, err)
		}
	}
	if info, err := js.Stream(ctx, "KV_"+natskv.Bucket); err != nil {
		t.Fatal(err)
	} else if b := info.CachedInfo().State.Bytes; b > limit {
		t.Errorf("bucket holds %d bytes, over its %d", b, limit)
	}
	// beta's old session was dropped (it was the oldest), and beta can
	// still write and read a session.
	if s, err := kv.Load(ctx, betaKey); err != nil || len(s.Sent) != 0 {
		t.Errorf("beta's oldest session after the flood: %d chunks, %v; want it dropped", len(s.Sent), err)
	}
	k, _ := session.Key("beta", "second")
	if err := kv.Save(ctx, k, sent(5, "beta")); err != nil {
		t.Fatalf("beta's save into the full bucket: %v", err)
	}
	if s, err := kv.Load(ctx, k); err != nil || len(s.Sent) != 5 {
		t.Errorf("beta's new session: %d chunks, %v; want 5", len(s.Sent), err)
	}
	// Opening again (another replica, a restart) keeps the policy.
	if _, err := natskv.OpenBounded(ctx, js, time.Hour, limit); err != nil {
		t.Fatal(err)
	}
	k, _ = session.Key("acme", "after-reopen")
	for range 10 {
		if err := kv.Save(ctx, k, sent(120, "acme")); err != nil {
			t.Fatalf("save after reopening: %v", err)
		}
	}
}

// A session of session.MaxSent chunks with long paths encodes to more
// than a value of the bucket holds: Save keeps its newest chunks instead
// of failing (audit 5: the write failed with "maximum payload exceeded",
// and so did every later query of the session).
func TestSaveTrimsToFit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := natskv.Open(ctx, openJS(t), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("d", 1200)
	sess := &session.Session{}
	for i := range session.MaxSent {
		sess.Add(query.Sent{Repo: "r", Commit: strings.Repeat("c", 40), Path: fmt.Sprintf("%s/%d.go", long, i), StartLine: 1, EndLine: 2, Symbol: fmt.Sprintf("F%d", i)})
	}
	if err := st.Save(ctx, "t.beta.big", sess); err != nil {
		t.Fatalf("save of a %d-chunk session with long paths: %v", len(sess.Sent), err)
	}
	got, err := st.Load(ctx, "t.beta.big")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.Sent); n == 0 || n == len(sess.Sent) || got.Sent[n-1].Symbol != sess.Sent[len(sess.Sent)-1].Symbol {
		t.Fatalf("loaded %d chunks ending %+v; want the newest ones, fewer than %d", n, got.Sent[max(n-1, 0):], len(sess.Sent))
	}
}
