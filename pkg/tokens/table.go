package tokens

import (
	"hash/maphash"
	"unsafe"
)

// The caches of counts (pieces of texts, header cuts) were maps with string
// keys: the garbage collector followed every key on every cycle, and a key
// that was a substring of the caller's text kept all of that text alive
// (the packer's header buffer of a whole query, for one header). strTab
// holds the same mapping without pointers, as bpe holds the vocabulary:
// the keys' bytes copied into one arena, and an open-addressing table of
// slots that name a key by its offset and length. The collector does not
// look inside either, and a caller's text is never referenced once the
// call returns.

// strTab maps strings to values of V, which must hold no pointers. It is
// not safe for concurrent use (the caches lock their shards around it).
type strTab[V any] struct {
	arena []byte
	slots []tabSlot[V]
	n     int // slots in use
}

type tabSlot[V any] struct {
	hash uint64 // the key's hash, 0 for an empty slot (see hashOf)
	off  uint32 // the key is arena[off:off+len]
	len  uint32
	val  V
}

var tabSeed = maphash.MakeSeed()

// hashOf is the hash of s, never 0 (0 marks an empty slot).
func hashOf(s string) uint64 { return maphash.String(tabSeed, s) | 1 }

// get returns the value of key and whether it is there.
func (t *strTab[V]) get(key string) (V, bool) {
	var zero V
	if t.n == 0 {
		return zero, false
	}
	h := hashOf(key)
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		switch {
		case s.hash == 0:
			return zero, false
		case s.hash == h && int(s.len) == len(key) && t.key(s) == key:
			return s.val, true
		}
	}
}

// key returns the key of slot s, a view of the arena.
func (t *strTab[V]) key(s *tabSlot[V]) string {
	if s.len == 0 {
		return ""
	}
	return unsafe.String(&t.arena[s.off], int(s.len))
}

// put sets the value of key, copying key's bytes into the arena when it is
// new.
func (t *strTab[V]) put(key string, v V) {
	if len(key) > 1<<31 || len(t.arena)+len(key) > 1<<32-1 {
		return // beyond the offsets' range: not kept (the caches stay far below)
	}
	if 4*(t.n+1) > 3*len(t.slots) {
		t.grow()
	}
	h := hashOf(key)
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		switch {
		case s.hash == 0:
			*s = tabSlot[V]{hash: h, off: uint32(len(t.arena)), len: uint32(len(key)), val: v}
			t.arena = append(t.arena, key...)
			t.n++
			return
		case s.hash == h && int(s.len) == len(key) && t.key(s) == key:
			s.val = v
			return
		}
	}
}

// grow doubles the slots (16 at first) and places the entries again.
func (t *strTab[V]) grow() {
	old := t.slots
	t.slots = make([]tabSlot[V], max(16, 2*len(old)))
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s.hash == 0 {
			continue
		}
		i := s.hash & mask
		for t.slots[i].hash != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// len returns the number of keys.
func (t *strTab[V]) len() int { return t.n }
