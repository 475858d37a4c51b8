package keys

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A data directory another local user made first (in a shared working
// directory) or a symbolic link is refused; the checks take the stat
// result, so other owners need no second account to test.
func TestCheckDir(t *testing.T) {
	const me, other = 1000, 65534
	for _, c := range []struct {
		name       string
		mode       fs.FileMode
		owner, uid int
		ok         bool
	}{
		{"own dir", fs.ModeDir | 0o700, me, me, true},
		{"own open dir (tightened after)", fs.ModeDir | 0o777, me, me, true},
		{"root's own", fs.ModeDir | 0o755, 0, 0, true},
		{"another user's", fs.ModeDir | 0o777, other, me, false},
		{"another user's, run as root", fs.ModeDir | 0o777, other, 0, false},
		{"root's, run as a user", fs.ModeDir | 0o755, 0, me, false},
		{"symbolic link", fs.ModeSymlink | 0o777, me, me, false},
		{"regular file", 0o600, me, me, false},
		{"no owners on this system", fs.ModeDir | 0o700, -1, -1, true},
	} {
		err := checkDir(c.mode, c.owner, c.uid)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrUntrusted)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestCheckFile(t *testing.T) {
	const me, other, host = 1000, 65534, 1001
	for _, c := range []struct {
		name                 string
		mode                 fs.FileMode
		owner, dirOwner, uid int
		ok                   bool
	}{
		{"own 0600", 0o600, me, -1, me, true},
		{"own 0644 (readable is fine)", 0o644, me, -1, me, true},
		{"own, group-writable", 0o664, me, -1, me, false},
		{"own, writable by others", 0o646, me, -1, me, false},
		{"root's (a Kubernetes Secret)", 0o644, 0, 0, 10001, true},
		{"the directory owner's (a compose bind mount)", 0o644, host, host, 10001, true},
		{"another user's in a shared directory", 0o644, other, 0, me, false},
		{"another user's, directory unknown", 0o600, other, -1, me, false},
		{"another user's, run as root", 0o600, other, 0, 0, false},
		{"a directory", fs.ModeDir | 0o700, me, -1, me, false},
		{"a device", fs.ModeDevice | 0o600, me, -1, me, false},
		{"no owners on this system", 0o644, -1, -1, -1, true},
	} {
		err := checkFile(c.mode, c.owner, c.dirOwner, c.uid)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrUntrusted)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// A key file or admin.key in the data directory must be the user's own:
// not root's either, and never a symbolic link.
func TestCheckOwnFile(t *testing.T) {
	const me, other = 1000, 65534
	for _, c := range []struct {
		name       string
		mode       fs.FileMode
		owner, uid int
		ok         bool
	}{
		{"own 0600", 0o600, me, me, true},
		{"own 0644", 0o644, me, me, true},
		{"root's own", 0o600, 0, 0, true},
		{"own, writable by others", 0o666, me, me, false},
		{"another user's (planted)", 0o666, other, me, false},
		{"another user's, run as root", 0o600, other, 0, false},
		{"root's, run as a user", 0o600, 0, me, false},
		{"symbolic link", fs.ModeSymlink | 0o777, me, me, false},
	} {
		err := checkOwnFile(c.mode, c.owner, c.uid)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrUntrusted)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// A data directory that is a symbolic link is refused, and the directory
// it points to keeps its mode; an own directory left open is tightened.
func TestPrivateDir(t *testing.T) {
	root := t.TempDir()
	target := filepath.Join(root, "elsewhere")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(target, 0o755)
	link := filepath.Join(root, "data")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// A link another user made, or one to another user's directory:
		// refused, and the target not chmodded.
		if err := os.Lchown(link, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		err := PrivateDir(link)
		if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "symbolic link owned by uid 65534") || strings.Contains(err.Error(), root) {
			t.Errorf("PrivateDir(another user's symlink) = %v; want a refusal naming the link, not the full path", err)
		}
		os.Lchown(link, 0, 0)
		os.Chown(target, 65534, 65534)
		if err := PrivateDir(link); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Errorf("PrivateDir(symlink to another user's directory) = %v; want a refusal", err)
		}
		if st, _ := os.Stat(target); st.Mode().Perm() != 0o755 {
			t.Errorf("the link's target was chmodded to %v", st.Mode().Perm())
		}
		os.Chown(target, 0, 0)
	}
	// The user's own link to the user's own directory (data on another
	// disk) is followed.
	if err := PrivateDir(link); err != nil {
		t.Errorf("PrivateDir(own symlink to own directory) = %v", err)
	}
	if st, _ := os.Stat(target); st.Mode().Perm() != 0o700 {
		t.Errorf("the own link's target mode %v, want 0700", st.Mode().Perm())
	}
	os.Chmod(target, 0o755)
	if err := PrivateDir(target); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(target); st.Mode().Perm() != 0o700 {
		t.Errorf("own directory mode %v, want 0700", st.Mode().Perm())
	}
	fresh := filepath.Join(root, "new", "data")
	if err := PrivateDir(fresh); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(fresh); st.Mode().Perm() != 0o700 {
		t.Errorf("new directory mode %v, want 0700", st.Mode().Perm())
	}
}
