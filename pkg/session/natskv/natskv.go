// Package natskv is the session.Store driver on a NATS JetStream
// key-value bucket: stateless query replicas share sessions through it,
// and the bucket's TTL expires them.
package natskv

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"codectx/pkg/query"
	"codectx/pkg/session"
)

// Bucket is the key-value bucket sessions are kept in.
const Bucket = "CODECTX_SESSIONS"

// Store is a session.Store on a JetStream key-value bucket.
type Store struct{ kv jetstream.KeyValue }

// MaxBytes bounds the bucket: a session id is the caller's choice, so
// without a bound one tenant's sessions could fill the disk the embedded
// NATS shares with the delivery log and the work queues.
const MaxBytes = 1 << 30

// Open creates or updates the bucket with the TTL (default
// session.DefaultTTL), bounded at MaxBytes, and returns its store.
func Open(ctx context.Context, js jetstream.JetStream, ttl time.Duration) (*Store, error) {
	return OpenBounded(ctx, js, ttl, MaxBytes)
}

// OpenBounded is Open with the bucket bounded at maxBytes. A full bucket
// drops its oldest writes, not the new one: the sessions written longest
// ago are forgotten (a forgotten session sends its chunks again), so
// a tenant that fills the bucket cannot make other tenants' session
// queries fail.
func OpenBounded(ctx context.Context, js jetstream.JetStream, ttl time.Duration, maxBytes int64) (*Store, error) {
	if ttl <= 0 {
		ttl = session.DefaultTTL
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: Bucket, Description: "codectx query sessions: chunks already sent", TTL: ttl, History: 1,
		Storage: jetstream.FileStorage, MaxValueSize: maxValue, MaxBytes: maxBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("natskv: open %s: %w", Bucket, err)
	}
	// A key-value bucket refuses writes once full (DiscardNew); sessions
	// are a cache, so the oldest go instead.
	st, err := js.Stream(ctx, "KV_"+Bucket)
	if err != nil {
		return nil, fmt.Errorf("natskv: open %s: %w", Bucket, err)
	}
	if cfg := st.CachedInfo().Config; cfg.Discard != jetstream.DiscardOld {
		cfg.Discard = jetstream.DiscardOld
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			return nil, fmt.Errorf("natskv: open %s: drop the oldest sessions when full: %w", Bucket, err)
		}
	}
	return &Store{kv: kv}, nil
}

// kvKey makes any session key a valid key-value key.
func kvKey(key string) string { return "s" + base64.RawURLEncoding.EncodeToString([]byte(key)) }

// Load implements session.Store.
func (s *Store) Load(ctx context.Context, key string) (*session.Session, error) {
	e, err := s.kv.Get(ctx, kvKey(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return &session.Session{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("natskv: load session: %w", err)
	}
	var out session.Session
	if err := json.Unmarshal(e.Value(), &out); err != nil {
		return nil, fmt.Errorf("natskv: decode session: %w", err)
	}
	return &out, nil
}

// maxValue is the largest session the bucket takes.
const maxValue = 1 << 20

// fitValue is what Save writes at most: under maxValue and the NATS
// server's default 1 MB message payload, with room for the headers.
const fitValue = 1000 << 10

// Save implements session.Store. The bucket's TTL runs from this write.
// A session whose encoding would not fit a value (session.MaxSent chunks
// with long paths and names do not) forgets its oldest chunks until it
// fits: before, the write failed and so did every later query of the
// session, until its TTL ran out.
func (s *Store) Save(ctx context.Context, key string, sess *session.Session) error {
	data, _, err := fit(sess)
	if err != nil {
		return err
	}
	if _, err := s.kv.Put(ctx, kvKey(key), data); err != nil {
		return fmt.Errorf("natskv: save session: %w", err)
	}
	return nil
}

// appendTries bounds Append's rounds when other writes of the session
// keep coming between its read and its write; between rounds it waits a
// random while, longer each round, so that writers at once spread out.
const appendTries = 32

// Append implements session.Store: it reads the session and its
// revision, adds sent, and writes it only if the session's revision is
// still the one read, else reads again (another replica or query wrote
// it meanwhile).
func (s *Store) Append(ctx context.Context, key string, sent []query.Sent) (*session.Session, error) {
	k := kvKey(key)
	for try := range appendTries {
		if try > 0 {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("natskv: append to session: %w", ctx.Err())
			case <-time.After(time.Duration(rand.Int64N(int64(try)*int64(time.Millisecond) + 1))):
			}
		}
		var sess session.Session
		var rev uint64
		switch e, err := s.kv.Get(ctx, k); {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, fmt.Errorf("natskv: append to session: %w", err)
		default:
			if err := json.Unmarshal(e.Value(), &sess); err != nil {
				return nil, fmt.Errorf("natskv: decode session: %w", err)
			}
			rev = e.Revision()
		}
		sess.Add(sent...)
		data, out, err := fit(&sess)
		if err != nil {
			return nil, err
		}
		if rev == 0 {
			_, err = s.kv.Create(ctx, k, data)
		} else {
			_, err = s.kv.Update(ctx, k, data, rev)
		}
		switch {
		case err == nil:
			return out, nil
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue // written meanwhile: read it again
		default:
			return nil, fmt.Errorf("natskv: append to session: %w", err)
		}
	}
	return nil, fmt.Errorf("natskv: append to session: written by others %d times in a row", appendTries)
}

// fit encodes a session, forgetting its oldest chunks until it fits a
// value, and returns the encoding and the session it holds.
func fit(sess *session.Session) ([]byte, *session.Session, error) {
	data, err := json.Marshal(sess)
	if err != nil {
		return nil, nil, err
	}
	for len(data) > fitValue && len(sess.Sent) > 0 {
		drop := max(1, len(sess.Sent)*(len(data)-fitValue)/len(data)+len(sess.Sent)/16)
		sess = &session.Session{Sent: sess.Sent[min(drop, len(sess.Sent)):]}
		if data, err = json.Marshal(sess); err != nil {
			return nil, nil, err
		}
	}
	return data, sess, nil
}
