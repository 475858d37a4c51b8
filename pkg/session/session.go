// Package session keeps what a query session was already sent: the chunks
// of its earlier packs, so later packs name them instead of resending
// them, and a "the function we looked at before" query can find them
// again. A session lives for a TTL after its last write.
//
// Store is the port; Mem is the in-process driver (tests, `codectx mcp
// --data`), package natskv the NATS JetStream key-value driver shared by
// stateless query replicas (and by `codectx up`, on its embedded NATS).
// sessiontest is the conformance suite both pass.
package session

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"codectx/pkg/query"
)

// DefaultTTL is how long a session is kept after its last query.
const DefaultTTL = 2 * time.Hour

// MaxSent caps the chunks a session remembers (oldest forgotten first).
const MaxSent = 2000

// Session is what one session was sent, oldest first.
type Session struct {
	Sent []query.Sent `json:"sent"`
}

// Add appends chunks to the session, forgetting the oldest beyond MaxSent.
func (s *Session) Add(sent ...query.Sent) {
	s.Sent = append(s.Sent, sent...)
	if n := len(s.Sent) - MaxSent; n > 0 {
		s.Sent = append([]query.Sent(nil), s.Sent[n:]...)
	}
}

// entryBytes is about what an entry's encoding adds to its strings: the
// field names, quotes and numbers.
const entryBytes = 90

// Bytes is about the size of a session's encoding, what a Store writes
// for it.
func (s *Session) Bytes() int {
	n := 16
	for _, c := range s.Sent {
		n += entryBytes + len(c.Repo) + len(c.Commit) + len(c.Path) + len(c.Symbol)
	}
	return n
}

// Store keeps sessions by key. Load of an unknown or expired key returns
// an empty session and no error. Append adds chunks to a session in one
// step, whatever else writes it meanwhile, and returns the session as
// written: an agent's tool calls in one session may run at once, and
// each query's Load and Save kept only the last one's chunks.
type Store interface {
	Load(ctx context.Context, key string) (*Session, error)
	Save(ctx context.Context, key string, s *Session) error
	Append(ctx context.Context, key string, sent []query.Sent) (*Session, error)
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// ErrBadID is returned (wrapped) by Key for an unusable session id.
var ErrBadID = errors.New("session id: want 1-128 letters, digits, _ or -")

// Key is the store key of a tenant's session id.
func Key(tenant, id string) (string, error) {
	if !idRE.MatchString(id) {
		return "", fmt.Errorf("%w: %q", ErrBadID, id)
	}
	return "t." + tenant + "." + id, nil
}

// DefaultMaxSessions bounds the sessions a Mem keeps.
const DefaultMaxSessions = 10000

// Mem is an in-process Store. It keeps at most Max sessions: a session id
// is the caller's choice, so a full store forgets the session written
// longest ago (a forgotten session sends its chunks again).
type Mem struct {
	TTL time.Duration // default DefaultTTL
	Max int           // sessions kept; default DefaultMaxSessions
	Now func() time.Time

	mu sync.Mutex
	m  map[string]*list.Element // of memEntry, in order of expiry
	// order holds the sessions written longest ago first: with one TTL
	// that is the order they expire in, so expiry and the bound look at
	// its front only.
	order list.List
}

type memEntry struct {
	key string
	s   Session
	exp time.Time
}

func (m *Mem) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Load implements Store.
func (m *Mem) Load(_ context.Context, key string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.load(key), nil
}

// load reads a session (a copy); with m.mu held.
func (m *Mem) load(key string) *Session {
	el, ok := m.m[key]
	if !ok {
		return &Session{}
	}
	e := el.Value.(*memEntry)
	if !m.now().Before(e.exp) {
		m.order.Remove(el)
		delete(m.m, key)
		return &Session{}
	}
	return &Session{Sent: append([]query.Sent(nil), e.s.Sent...)}
}

// Save implements Store.
func (m *Mem) Save(_ context.Context, key string, s *Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.save(key, s)
	return nil
}

// Append implements Store.
func (m *Mem) Append(_ context.Context, key string, sent []query.Sent) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.load(key)
	s.Add(sent...)
	m.save(key, s)
	return s, nil
}

// save writes a session; with m.mu held.
func (m *Mem) save(key string, s *Session) {
	ttl := m.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if m.m == nil {
		m.m = map[string]*list.Element{}
	}
	now := m.now()
	if el, ok := m.m[key]; ok { // written again: it goes to the back
		m.order.Remove(el)
		delete(m.m, key)
	}
	for el := m.order.Front(); el != nil && !now.Before(el.Value.(*memEntry).exp); el = m.order.Front() {
		m.order.Remove(el) // expired sessions go on any write
		delete(m.m, el.Value.(*memEntry).key)
	}
	limit := m.Max
	if limit <= 0 {
		limit = DefaultMaxSessions
	}
	for len(m.m) >= limit {
		el := m.order.Front()
		m.order.Remove(el)
		delete(m.m, el.Value.(*memEntry).key)
	}
	sent := append([]query.Sent(nil), s.Sent...)
	for i := range sent {
		// A session outlives the segment its strings came from, which may
		// alias a shard's bytes (read into the heap and used in place):
		// copies do not pin them.
		c := &sent[i]
		c.Repo, c.Commit, c.Path, c.Symbol = strings.Clone(c.Repo), strings.Clone(c.Commit), strings.Clone(c.Path), strings.Clone(c.Symbol)
	}
	m.m[key] = m.order.PushBack(&memEntry{key: key, s: Session{Sent: sent}, exp: now.Add(ttl)})
}
