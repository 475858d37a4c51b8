package keys_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codectx/pkg/keys"
)

func TestCreateLookupRevoke(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	secret, k, err := keys.Create(path, "acme", keys.Query)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "cctx_") || k.Tenant != "acme" || k.Scope != keys.Query {
		t.Fatalf("created %q %+v", secret, k)
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), secret) {
		t.Fatal("the key itself is stored")
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	f, err := keys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := f.Lookup(secret); !ok || got.ID != k.ID {
		t.Fatalf("Lookup = %+v, %v", got, ok)
	}
	if _, ok := f.Lookup("cctx_wrong"); ok {
		t.Fatal("wrong key found")
	}
	// A key created after Open is seen without reopening; a revoked one goes.
	second, k2, err := keys.Create(path, "beta", keys.Admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Lookup(second); !ok {
		t.Fatal("new key not seen without a reopen")
	}
	if err := keys.Revoke(path, k.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if _, ok := f.Lookup(secret); ok {
		t.Fatal("revoked key still valid")
	}
	ks, err := keys.List(path)
	if err != nil || len(ks) != 1 || ks[0].ID != k2.ID {
		t.Fatalf("List = %+v, %v", ks, err)
	}
	if err := keys.Revoke(path, "knope"); err == nil {
		t.Error("revoking an unknown id succeeded")
	}
}

func TestLegacyFormat(t *testing.T) {
	ks, err := keys.Parse([]byte(`{"` + keys.Hash("a") + `": "acme", "` + keys.Hash("b") + `": "*"}`))
	if err != nil || len(ks) != 2 {
		t.Fatalf("Parse = %+v, %v", ks, err)
	}
	for _, k := range ks {
		if want := map[string]keys.Scope{"acme": keys.Index, "*": keys.Admin}[k.Tenant]; k.Scope != want {
			t.Errorf("legacy key of %s has scope %s, want %s", k.Tenant, k.Scope, want)
		}
	}
	if _, err := keys.Parse([]byte(`{"nothex": "acme"}`)); err == nil {
		t.Error("a bad hash parsed")
	}
}

func TestScopes(t *testing.T) {
	for _, c := range []struct {
		have, need keys.Scope
		ok         bool
	}{{keys.Query, keys.Query, true}, {keys.Query, keys.Index, false}, {keys.Index, keys.Query, true}, {keys.Index, keys.Admin, false}, {keys.Admin, keys.Index, true}, {"x", keys.Query, false}} {
		if got := c.have.Allows(c.need); got != c.ok {
			t.Errorf("%s allows %s = %v", c.have, c.need, got)
		}
	}
}

func TestBootstrap(t *testing.T) {
	dir := t.TempDir()
	path, admin := filepath.Join(dir, "keys.json"), filepath.Join(dir, "admin.key")
	made, err := keys.Bootstrap(path, admin)
	if err != nil || !made {
		t.Fatalf("Bootstrap = %v, %v", made, err)
	}
	st, err := os.Stat(admin)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("admin key file: %v, mode %v", err, st.Mode().Perm())
	}
	secret, _ := os.ReadFile(admin)
	f, _ := keys.Open(path)
	if k, ok := f.Lookup(strings.TrimSpace(string(secret))); !ok || k.Tenant != keys.AllTenants || k.Scope != keys.Admin {
		t.Fatalf("admin key = %+v, %v", k, ok)
	}
	if made, err := keys.Bootstrap(path, admin); err != nil || made {
		t.Errorf("second Bootstrap = %v, %v; want nothing done", made, err)
	}
}

// A key file that stops parsing, or goes, holds no key until it is
// mended: a hand edit that removed a key must not leave the keys read
// before in force. Err says why.
func TestBrokenFileHoldsNoKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	secret, _, err := keys.Create(path, "acme", keys.Query)
	if err != nil {
		t.Fatal(err)
	}
	f, err := keys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	set := func(data []byte, at int) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		when := time.Unix(1700000000+int64(at), 0)
		if err := os.Chtimes(path, when, when); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		what  string
		data  []byte // nil: the file is deleted
		valid bool
	}{
		{"a stray comma", append(append([]byte{}, good[:len(good)-2]...), []byte(",}\n")...), false},
		{"mended", good, true},
		{"empty", []byte{}, false},
		{"mended again", good, true},
		{"deleted", nil, false},
	}
	for i, st := range steps {
		if st.data == nil {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		} else {
			set(st.data, i)
		}
		for range 2 { // the second look takes the cached answer
			if _, ok := f.Lookup(secret); ok != st.valid {
				t.Errorf("%s: Lookup found the key = %v, want %v", st.what, ok, st.valid)
			}
			if err := f.Err(); (err == nil) != st.valid {
				t.Errorf("%s: Err() = %v", st.what, err)
			}
		}
	}
}

// Revoking a key and creating another of the same tenant and scope gives
// a key file of the same size; on a file system whose timestamps are
// coarse (a second on some network and FUSE mounts) it has the same
// modification time too. The file was re-read only when its time or size
// changed, so the revoked key went on working. Each write is a new file
// renamed over the old one: its identity tells them apart.
func TestRevokedKeyRefusedSameSizeAndTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	old, k, err := keys.Create(path, "acme", keys.Query)
	if err != nil {
		t.Fatal(err)
	}
	f, err := keys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Lookup(old); !ok {
		t.Fatal("key not found")
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Revoke, then create another key of acme with the same scope, as
	// `codectx key revoke` and `codectx key create` do, without the server
	// looking in between.
	if err := keys.Revoke(path, k.ID); err != nil {
		t.Fatal(err)
	}
	fresh, _, err := keys.Create(path, "acme", keys.Query)
	if err != nil {
		t.Fatal(err)
	}
	// Within the file system's timestamp granularity: the same time.
	if err := os.Chtimes(path, before.ModTime(), before.ModTime()); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("replacement is %d bytes at %v, the file read %d bytes at %v: the test needs them equal",
			after.Size(), after.ModTime(), before.Size(), before.ModTime())
	}
	if _, ok := f.Lookup(old); ok {
		t.Error("revoked key still valid after a same-size, same-time replacement of the key file")
	}
	if _, ok := f.Lookup(fresh); !ok {
		t.Error("new key refused after a same-size, same-time replacement of the key file")
	}

	// A hand-made replacement renamed over the file (an editor's save, a
	// configuration tool): the same.
	next, k2, err := keys.Create(path, "acme", keys.Query)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Lookup(next); !ok {
		t.Fatal("key created after Open not seen")
	}
	st, _ := os.Stat(path)
	tmp := filepath.Join(filepath.Dir(path), "keys.json.new")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := keys.Revoke(tmp, k2.ID); err != nil {
		t.Fatal(err)
	}
	last, _, err := keys.Create(tmp, "acme", keys.Query)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(path); st2.Size() != st.Size() {
		t.Fatalf("replacement of %d bytes, want %d", st2.Size(), st.Size())
	}
	if _, ok := f.Lookup(next); ok {
		t.Error("revoked key still valid after a same-size, same-time file renamed over the key file")
	}
	if _, ok := f.Lookup(last); !ok {
		t.Error("new key refused after a same-size, same-time file renamed over the key file")
	}
}

// An admin.key that is a symbolic link (planted while the data directory
// was open to others) is refused: its target is neither written nor
// chmodded, and no key file is made.
func TestBootstrapRefusesSymlinkedAdminKey(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim.conf")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(victim, 0o644)
	path, admin := filepath.Join(dir, "keys.json"), filepath.Join(dir, "admin.key")
	if err := os.Symlink(victim, admin); err != nil {
		t.Fatal(err)
	}
	made, err := keys.Bootstrap(path, admin)
	if err == nil || made || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("Bootstrap = %v, %v; want a refusal of the link", made, err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
		t.Errorf("the link's target now holds %q", b)
	}
	if st, _ := os.Stat(victim); st.Mode().Perm() != 0o644 {
		t.Errorf("the link's target mode %v", st.Mode().Perm())
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("a key file was made: %v", err)
	}
	// A dangling link too: it must not be created through.
	dangling := filepath.Join(dir, "made-by-link")
	os.Remove(admin)
	if err := os.Symlink(dangling, admin); err != nil {
		t.Fatal(err)
	}
	if made, err := keys.Bootstrap(path, admin); err == nil || made {
		t.Fatalf("Bootstrap with a dangling link = %v, %v", made, err)
	}
	if _, err := os.Lstat(dangling); !os.IsNotExist(err) {
		t.Errorf("a file was created through the link: %v", err)
	}
}

// The user's own admin.key left from an earlier first start (the key file
// was removed to start afresh) is replaced by the new key, as before.
func TestBootstrapReplacesOwnAdminKey(t *testing.T) {
	dir := t.TempDir()
	path, admin := filepath.Join(dir, "keys.json"), filepath.Join(dir, "admin.key")
	if err := os.WriteFile(admin, []byte("cctx_OLD\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(admin, 0o666) // loose, but the user's own: replaced all the same
	if made, err := keys.Bootstrap(path, admin); err != nil || !made {
		t.Fatalf("Bootstrap = %v, %v", made, err)
	}
	secret, _ := os.ReadFile(admin)
	f, err := keys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Lookup(strings.TrimSpace(string(secret))); !ok || string(secret) == "cctx_OLD\n" {
		t.Errorf("admin.key holds %q, not the new key", secret)
	}
	if st, _ := os.Stat(admin); st.Mode().Perm() != 0o600 {
		t.Errorf("admin.key mode %v, want 0600", st.Mode().Perm())
	}
}

// A key file in the data directory that another user could have written
// (writable by others, or a symbolic link) is refused, not used.
func TestBootstrapRefusesUntrustedKeyFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if _, _, err := keys.Create(good, keys.AllTenants, keys.Admin); err != nil {
		t.Fatal(err)
	}
	path, admin := filepath.Join(dir, "keys.json"), filepath.Join(dir, "admin.key")
	if err := os.Symlink(good, path); err != nil {
		t.Fatal(err)
	}
	if made, err := keys.Bootstrap(path, admin); err == nil || made {
		t.Errorf("Bootstrap with a symlinked key file = %v, %v", made, err)
	}
	os.Remove(path)
	if _, _, err := keys.Create(path, keys.AllTenants, keys.Admin); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if made, err := keys.Bootstrap(path, admin); err == nil || made || !strings.Contains(err.Error(), "writable") {
		t.Errorf("Bootstrap with a world-writable key file = %v, %v", made, err)
	}
	if _, err := os.Lstat(admin); !os.IsNotExist(err) {
		t.Errorf("admin.key written: %v", err)
	}
}

// A server refuses a key file anyone may write, and reads one through a
// symbolic link (a Kubernetes Secret's files are links) or made readable
// to all.
func TestOpenRefusesWritableFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.json")
	if _, _, err := keys.Create(path, "acme", keys.Query); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o666, 0o620} {
		os.Chmod(path, mode)
		if _, err := keys.Open(path); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
			t.Errorf("mode %v: Open = %v", mode, err)
		}
	}
	os.Chmod(path, 0o644)
	if _, err := keys.Open(path); err != nil {
		t.Errorf("mode 0644: %v", err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Open(link); err != nil {
		t.Errorf("through a link: %v", err)
	}
}

// key create and key revoke keep the mode of the file they rewrite: one
// made readable to servers running as another uid (a container's) stays
// readable. A new file is 0600; write by group or others is dropped.
func TestUpdateKeepsMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	_, k, err := keys.Create(path, "acme", keys.Query)
	if err != nil {
		t.Fatal(err)
	}
	mode := func() os.FileMode {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm()
	}
	if m := mode(); m != 0o600 {
		t.Errorf("new file mode %v, want 0600", m)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keys.Create(path, "beta", keys.Query); err != nil {
		t.Fatal(err)
	}
	if m := mode(); m != 0o644 {
		t.Errorf("after key create mode %v, want 0644 kept", m)
	}
	if err := keys.Revoke(path, k.ID); err != nil {
		t.Fatal(err)
	}
	if m := mode(); m != 0o644 {
		t.Errorf("after key revoke mode %v, want 0644 kept", m)
	}
	os.Chmod(path, 0o666)
	if _, _, err := keys.Create(path, "gamma", keys.Query); err != nil {
		t.Fatal(err)
	}
	if m := mode(); m != 0o644 {
		t.Errorf("after key create on a 0666 file mode %v, want 0644", m)
	}
}
