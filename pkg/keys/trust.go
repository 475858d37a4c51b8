package keys

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The files a server trusts (key files, webhook secrets) and the data
// directory up keeps its admin key in must be ones no other local user
// could have written: a key file planted in a shared directory, or an
// admin.key symlinked at another file, would give that user an operator's
// key or have the server overwrite a file of its choosing. The checks are
// those OpenSSH applies to authorized_keys, on the file itself.

// ErrUntrusted marks a file or directory refused because another local
// user could have written it.
var ErrUntrusted = errors.New("refused: another local user could have written it")

// checkDir reports why a data directory, as Lstat saw it (mode and owner
// uid; owner < 0 where the system has no owner), is not one only the
// effective user euid could have written to: a symbolic link or anything
// else but a directory, or a directory another user owns.
func checkDir(mode fs.FileMode, owner, euid int) error {
	switch {
	case mode&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: it is a symbolic link (name the directory it points to)", ErrUntrusted)
	case !mode.IsDir():
		return fmt.Errorf("%w: it is not a directory", ErrUntrusted)
	case owner >= 0 && euid >= 0 && owner != euid:
		return fmt.Errorf("%w: it is owned by uid %d, not by this process's uid %d (remove it or pick another directory)", ErrUntrusted, owner, euid)
	}
	return nil
}

// checkFile reports why a file the server trusts, with the mode and
// owner of the file opened, may have been written by another local user:
// it is not a regular file, it is writable by group or others, or it is
// owned by someone other than the effective user, root and the owner of
// the directory holding it (dirOwner: who can replace it anyway, as the
// operator who mounts a key file into a container running as another
// uid does; < 0 unknown). owner < 0: the system has no owner.
func checkFile(mode fs.FileMode, owner, dirOwner, euid int) error {
	switch {
	case !mode.IsRegular():
		return fmt.Errorf("%w: it is not a regular file", ErrUntrusted)
	case mode.Perm()&0o022 != 0:
		return fmt.Errorf("%w: it is writable by group or others (mode %v; chmod go-w it)", ErrUntrusted, mode.Perm())
	case owner < 0 || euid < 0 || owner == euid || owner == 0:
		return nil
	case dirOwner >= 0 && owner == dirOwner:
		return nil
	}
	return fmt.Errorf("%w: it is owned by uid %d, neither this process's uid %d, root, nor the owner of its directory", ErrUntrusted, owner, euid)
}

// checkLink reports why a symbolic link naming the data directory, owned
// by owner (< 0: the system has no owner), may have been made by another
// local user: one owned by another user than the effective one or root
// could point it anywhere. A link of the user's own (data on another
// disk) is followed, and what it names is checked as a directory.
func checkLink(owner, euid int) error {
	if owner >= 0 && euid >= 0 && owner != euid && owner != 0 {
		return fmt.Errorf("%w: it is a symbolic link owned by uid %d, not by this process's uid %d (name the directory it points to)", ErrUntrusted, owner, euid)
	}
	return nil
}

// PrivateDir makes dir (mode 0700), or tightens it to 0700, and refuses
// a directory owned by another user than the effective one, or a
// symbolic link to one or made by one: such a one is not chmodded, and
// nothing is to be put in it. The error names the directory by its last
// element only.
func PrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	name := filepath.Base(dir)
	euid := os.Geteuid()
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	flags := os.O_RDONLY | noFollow
	if fi.Mode()&fs.ModeSymlink != 0 {
		if err := checkLink(owner(fi), euid); err != nil {
			return fmt.Errorf("data directory %s: %w", name, err)
		}
		flags = os.O_RDONLY // the user's own link: what it names is checked below
	} else if err := checkDir(fi.Mode(), owner(fi), euid); err != nil {
		return fmt.Errorf("data directory %s: %w", name, err)
	}
	// The mode is set on the directory checked, even if the name has
	// been moved to another since.
	h, err := os.OpenFile(dir, flags, 0)
	if err != nil {
		return err
	}
	defer h.Close()
	if fi, err = h.Stat(); err != nil {
		return err
	}
	if err := checkDir(fi.Mode(), owner(fi), euid); err != nil {
		return fmt.Errorf("data directory %s: %w", name, err)
	}
	return h.Chmod(0o700)
}

// OpenTrusted opens a file the server trusts (a key file, webhook
// secrets) for reading, following symbolic links (Kubernetes mounts a
// Secret's files through them), and refuses it if checkFile does for the
// file opened: not a regular file, writable by group or others, or owned
// by another user than the effective one, root or its directory's owner.
func OpenTrusted(path string) (*os.File, fs.FileInfo, error) {
	h, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := h.Stat()
	if err != nil {
		h.Close()
		return nil, nil, err
	}
	uid, euid := owner(st), os.Geteuid()
	dirOwner := -1
	if uid >= 0 && uid != euid && uid != 0 {
		dirOwner = dirOwnerOf(path)
	}
	if err := checkFile(st.Mode(), uid, dirOwner, euid); err != nil {
		h.Close()
		return nil, nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return h, st, nil
}

// dirOwnerOf is the owner of the directory holding the file path names,
// symbolic links resolved; -1 if unknown.
func dirOwnerOf(path string) int {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return -1
	}
	fi, err := os.Stat(filepath.Dir(real))
	if err != nil {
		return -1
	}
	return owner(fi)
}

// checkOwnFile is checkFile for a file of the data directory (keys.json,
// admin.key), with the mode and owner Lstat saw: it must not be a
// symbolic link, and only the effective user may own it.
func checkOwnFile(mode fs.FileMode, owner, euid int) error {
	if mode&fs.ModeSymlink != 0 {
		return fmt.Errorf("%w: it is a symbolic link", ErrUntrusted)
	}
	if owner >= 0 && euid >= 0 && owner != euid {
		return fmt.Errorf("%w: it is owned by uid %d, not by this process's uid %d", ErrUntrusted, owner, euid)
	}
	return checkFile(mode, owner, -1, euid)
}

// lstatOwn is checkOwnFile of path; it returns Lstat's error (not exist)
// as it is. anyMode skips the mode check, for a file about to be
// replaced.
func lstatOwn(path string, anyMode bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	mode := fi.Mode()
	if anyMode {
		mode &^= 0o022
	}
	if err := checkOwnFile(mode, owner(fi), os.Geteuid()); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}
