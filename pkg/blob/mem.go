package blob

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"sync"
)

// NewMem returns a Bucket held in memory, for tests of code that uses a
// Bucket. It passes the same conformance suite as the real drivers.
func NewMem() *Bucket { return NewBucket(&mem{m: map[string][]byte{}}) }

type mem struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *mem) Put(_ context.Context, key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = bytes.Clone(data)
	return nil
}

func (s *mem) Get(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.m[key]
	if !ok {
		return nil, ErrNotFound
	}
	return bytes.Clone(data), nil
}

func (s *mem) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

func (s *mem) List(_ context.Context, prefix string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.m {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

func (s *mem) Create(_ context.Context, key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[key]; ok {
		return ErrExists
	}
	s.m[key] = bytes.Clone(data)
	return nil
}

func (s *mem) Swap(_ context.Context, key string, old, new []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.m[key]
	if old == nil && ok || old != nil && (!ok || !bytes.Equal(cur, old)) {
		return ErrConflict
	}
	s.m[key] = bytes.Clone(new)
	return nil
}
