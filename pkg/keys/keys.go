// Package keys is the API key store: a JSON file of key hashes, each for
// one tenant (or "*", every tenant) with a scope. `codectx key` creates,
// lists and revokes keys in it; servers re-read it when it changes, so a
// new or revoked key takes effect without a restart. Only SHA-256 hashes
// are stored: a key is shown once, when it is created.
package keys

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"codectx/pkg/index"
)

// Scope is what a key may do; each scope includes the ones before it.
type Scope string

const (
	Query Scope = "query" // query, MCP, status, repository list
	Index Scope = "index" // and index requests, reindex
	Admin Scope = "admin" // and delete repositories; with tenant "*", paths on the server
)

func (s Scope) rank() int {
	switch s {
	case Query:
		return 1
	case Index:
		return 2
	case Admin:
		return 3
	}
	return 0
}

// Valid reports whether s is a known scope.
func (s Scope) Valid() bool { return s.rank() > 0 }

// Allows reports whether a key of scope s may do what need requires.
func (s Scope) Allows(need Scope) bool { return s.rank() >= need.rank() && need.rank() > 0 }

// AllTenants as a key's tenant reaches every tenant.
const AllTenants = "*"

// Key is one entry of the store.
type Key struct {
	ID      string `json:"id"`
	Hash    string `json:"hash"` // SHA-256 of the key, hex
	Tenant  string `json:"tenant"`
	Scope   Scope  `json:"scope"`
	Created string `json:"created"` // RFC 3339
}

type fileFormat struct {
	Keys []Key `json:"keys"`
}

// Hash is the form a key is stored under.
func Hash(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// Parse reads a key file: {"keys": [...]}, or the older object of
// hash -> tenant (scope index; "*" admin).
func Parse(data []byte) ([]Key, error) {
	var f fileFormat
	if err := json.Unmarshal(data, &f); err == nil && f.Keys != nil {
		for i, k := range f.Keys {
			b, err := hex.DecodeString(k.Hash)
			if err != nil || len(b) != 32 {
				return nil, fmt.Errorf("key %s: hash is not a SHA-256 in hex", k.ID)
			}
			f.Keys[i].Hash = hex.EncodeToString(b) // one spelling: upper-case hex matches too
			if !k.Scope.Valid() {
				return nil, fmt.Errorf("key %s: unknown scope %q", k.ID, k.Scope)
			}
			if k.Tenant != AllTenants && !index.ValidTenant(k.Tenant) {
				return nil, fmt.Errorf("key %s: invalid tenant %q", k.ID, k.Tenant)
			}
		}
		return f.Keys, noDuplicates(f.Keys)
	}
	var legacy map[string]string
	if err := json.Unmarshal(data, &legacy); err != nil {
		return nil, fmt.Errorf(`want {"keys": [...]} or an object of key SHA-256 to tenant: %w`, err)
	}
	var out []Key
	for h, t := range legacy {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 32 {
			return nil, fmt.Errorf("%q is not a SHA-256 in hex (printf %%s KEY | sha256sum)", h)
		}
		h = hex.EncodeToString(b)
		if t != AllTenants && !index.ValidTenant(t) {
			return nil, fmt.Errorf("invalid tenant %q", t)
		}
		sc := Index
		if t == AllTenants {
			sc = Admin
		}
		out = append(out, Key{ID: "k" + h[:10], Hash: h, Tenant: t, Scope: sc})
	}
	slices.SortFunc(out, func(a, b Key) int { return cmpString(a.ID, b.ID) })
	return out, noDuplicates(out)
}

// noDuplicates refuses one key listed twice for different tenants or scopes.
func noDuplicates(ks []Key) error {
	seen := map[string]Key{}
	for _, k := range ks {
		if prev, ok := seen[k.Hash]; ok && (prev.Tenant != k.Tenant || prev.Scope != k.Scope) {
			return fmt.Errorf("one key listed for tenants %q and %q", prev.Tenant, k.Tenant)
		}
		seen[k.Hash] = k
	}
	return nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// File is a key file that is re-read whenever it changes on disk.
//
// While the file cannot be read or does not parse (a hand edit left a
// stray comma, the file was deleted), no key is valid: the keys read
// before are not kept, because an edit that removed a key must not leave
// it working. Err says why, for the server's log and /readyz.
type File struct {
	Path string

	mu     sync.Mutex
	loaded bool // held, id, mod and size are those of the last read, good or bad
	// held is the version of the file last read, kept open: while it is,
	// no other file can take its identity (a freed inode number reused
	// by the next write), so id compares true only for that version.
	held    *os.File
	id      os.FileInfo
	mod     time.Time
	size    int64
	byHash  map[[sha256.Size]byte]Key
	loadErr error
}

// Open reads a key file; it must exist and parse.
func Open(path string) (*File, error) {
	f := &File{Path: path}
	if err := f.refresh(); err != nil {
		f.mu.Lock()
		f.drop()
		f.mu.Unlock()
		return nil, err
	}
	return f, nil
}

// refresh re-reads the file when it is another file than the one last
// read (update writes a new file and renames it over the old), or its
// modification time or size changed. On a read or parse error it holds
// no key until the file is mended.
//
// The time and size alone missed a change: every entry of one tenant and
// scope has the same length, so revoking a key and creating another of
// the same tenant and scope gives a file of the same size, and within the
// timestamp granularity of the file system (a second or coarser on some
// network and FUSE mounts) of the same time: the revoked key went on
// working until the next change.
func (f *File) refresh() error {
	st, err := os.Stat(f.Path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.drop()
		f.byHash, f.loadErr = nil, fmt.Errorf("keys: %w", err)
		return f.loadErr
	}
	if f.loaded && os.SameFile(st, f.id) && st.ModTime().Equal(f.mod) && st.Size() == f.size {
		return f.loadErr
	}
	f.drop()
	data, err := f.read()
	if err != nil {
		f.byHash, f.loadErr = nil, fmt.Errorf("keys: %w", err)
		return f.loadErr
	}
	ks, err := Parse(data)
	if err != nil {
		f.byHash, f.loadErr = nil, fmt.Errorf("keys %s: %w", f.Path, err)
		return f.loadErr
	}
	m := make(map[[sha256.Size]byte]Key, len(ks))
	for _, k := range ks {
		var h [sha256.Size]byte
		hex.Decode(h[:], []byte(k.Hash)) // Parse checked it: 32 bytes of hex
		m[h] = k
	}
	f.byHash, f.loadErr = m, nil
	return nil
}

// read opens the file, reads it whole and holds it open (held) with the
// identity, time and size of what was read. f.mu is held.
func (f *File) read() ([]byte, error) {
	h, st, err := OpenTrusted(f.Path)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(h)
	if err != nil {
		h.Close()
		return nil, err
	}
	f.held, f.id, f.mod, f.size, f.loaded = h, st, st.ModTime(), st.Size(), true
	return data, nil
}

// drop forgets the version last read and closes it. f.mu is held.
func (f *File) drop() {
	if f.held != nil {
		f.held.Close()
	}
	f.held, f.id, f.loaded = nil, nil, false
}

// Err re-reads the file if it changed and reports why it holds no key:
// nil when it was read and parsed.
func (f *File) Err() error { return f.refresh() }

// Lookup returns the entry of a key, re-reading the file if it changed.
// No key is found while the file cannot be read or parsed.
//
// The key's SHA-256 is looked up in a map: anyone may send a key, and
// comparing it with every listed hash in turn cost each request time in
// proportion to the keys listed, under the file's lock (16,000 keys: about
// 7 ms an unknown key, and every tenant's requests queued behind a few
// anonymous clients). The lookup's time may depend on the hashes listed,
// never on a key: a hash reveals no key (only hashes are stored, for that
// reason), and a key is found only if it hashes to a listed one.
func (f *File) Lookup(key string) (Key, bool) {
	_ = f.refresh() // Err tells why
	sum := sha256.Sum256([]byte(key))
	f.mu.Lock()
	defer f.mu.Unlock()
	k, ok := f.byHash[sum]
	return k, ok
}

var lock sync.Mutex // serialises this process's read-modify-write of key files

// update applies fn to the keys of the file (none if it does not exist)
// and writes the result atomically: a new file with mode 0600, an
// existing one with its mode, so that a file made readable to servers
// running as another user (a container's) stays readable after a key
// change. Write by group or others is dropped: servers refuse such a file.
func update(path string, fn func([]Key) ([]Key, error)) error {
	lock.Lock()
	defer lock.Unlock()
	var ks []Key
	mode := fs.FileMode(0o600)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm() &^ 0o022
		}
		if ks, err = Parse(data); err != nil {
			return fmt.Errorf("keys %s: %w", path, err)
		}
	case errors.Is(err, os.ErrNotExist):
	default:
		return fmt.Errorf("keys: %w", err)
	}
	if ks, err = fn(ks); err != nil {
		return err
	}
	out, err := json.MarshalIndent(fileFormat{Keys: append([]Key{}, ks...)}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keys-*")
	if err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(out, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("keys: %w", err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("keys: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}

// Create adds a new key for tenant with scope to the file (creating it)
// and returns the key, which is stored nowhere else.
func Create(path, tenant string, scope Scope) (string, Key, error) {
	secret, k, err := newKey(tenant, scope)
	if err != nil {
		return "", Key{}, err
	}
	if err := add(path, k); err != nil {
		return "", Key{}, err
	}
	return secret, k, nil
}

// newKey makes a key and its entry.
func newKey(tenant string, scope Scope) (string, Key, error) {
	if !scope.Valid() {
		return "", Key{}, fmt.Errorf("unknown scope %q (want query, index or admin)", scope)
	}
	secret := "cctx_" + rand.Text()
	k := Key{Hash: Hash(secret), Tenant: tenant, Scope: scope, Created: time.Now().UTC().Format(time.RFC3339)}
	k.ID = "k" + k.Hash[:10]
	return secret, k, nil
}

// add appends k to the file.
func add(path string, k Key) error {
	return update(path, func(ks []Key) ([]Key, error) { return append(ks, k), nil })
}

// List returns the keys of the file (none if it does not exist).
func List(path string) ([]Key, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	return Parse(data)
}

// ErrUnknown is returned by Revoke for an id not in the file.
var ErrUnknown = errors.New("no such key")

// Revoke removes the key with the id.
func Revoke(path, id string) error {
	return update(path, func(ks []Key) ([]Key, error) {
		i := slices.IndexFunc(ks, func(k Key) bool { return k.ID == id })
		if i < 0 {
			return nil, fmt.Errorf("%w: %s", ErrUnknown, id)
		}
		return slices.Delete(ks, i, i+1), nil
	})
}

// Bootstrap makes sure a key file exists at path: on first start it
// creates one holding a new admin key for every tenant and writes that
// key to adminFile with mode 0600. It reports whether it did.
//
// Both files are in the data directory, which the caller has checked is
// the effective user's own. Bootstrap refuses a key file there that is
// a symbolic link, another user's, or writable by group or others (one
// planted while the directory was open). An admin.key left from an
// earlier first start (the key file was removed to start afresh) is
// replaced if it is the user's own regular file; a symbolic link or
// another user's file is refused, and the new file is created, never
// opened through a link.
func Bootstrap(path, adminFile string) (bool, error) {
	switch err := lstatOwn(path, false); {
	case err == nil:
		return false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("keys: %w", err)
	}
	switch err := lstatOwn(adminFile, true); {
	case err == nil:
		if err := os.Remove(adminFile); err != nil {
			return false, fmt.Errorf("keys: %w", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("keys: admin key: %w", err)
	}
	secret, k, err := newKey(AllTenants, Admin)
	if err != nil {
		return false, err
	}
	h, err := os.OpenFile(adminFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		return false, fmt.Errorf("keys: write admin key: %w", err)
	}
	_, err = h.Write([]byte(secret + "\n"))
	if err == nil {
		err = h.Chmod(0o600) // whatever the umask
	}
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(adminFile)
		return false, fmt.Errorf("keys: write admin key: %w", err)
	}
	if err := add(path, k); err != nil {
		os.Remove(adminFile)
		return false, err
	}
	return true, nil
}

// Len is the number of keys in force.
func (f *File) Len() int {
	_ = f.refresh()
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.byHash)
}
