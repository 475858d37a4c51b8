//go:build unix

package local

import (
	"io/fs"
	"math/rand/v2"
	"strconv"
	"syscall"
)

// pathError is the error of a system call on a file.
type pathError = fs.PathError

// createTemp writes data to a new file in dir (mode 0600, as
// os.CreateTemp makes it), fsynced when durable, and returns its name. It
// works on the descriptor directly: an os.File costs a round of fcntl and
// epoll calls on open, and a cache write is three system calls of its own
// (open, write, close).
func createTemp(dir string, data []byte, durable bool) (string, error) {
	var name string
	var fd int
	var err error
	for try := 0; ; try++ {
		name = dir + "/put-" + strconv.FormatUint(uint64(rand.Uint32()), 10)
		fd, err = syscall.Open(name, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o600)
		if err == syscall.EINTR || err == syscall.EEXIST && try < 10000 {
			continue
		}
		if err != nil {
			return "", &pathError{Op: "open", Path: name, Err: err}
		}
		break
	}
	for p := data; len(p) > 0; {
		n, werr := syscall.Write(fd, p)
		if werr == syscall.EINTR {
			continue
		}
		if werr == nil && n == 0 {
			werr = syscall.EIO
		}
		if werr != nil {
			err = &pathError{Op: "write", Path: name, Err: werr}
			break
		}
		p = p[n:]
	}
	if err == nil && durable {
		for {
			serr := syscall.Fsync(fd)
			if serr != syscall.EINTR {
				if serr != nil {
					err = &pathError{Op: "sync", Path: name, Err: serr}
				}
				break
			}
		}
	}
	if cerr := syscall.Close(fd); err == nil && cerr != nil {
		err = &pathError{Op: "close", Path: name, Err: cerr}
	}
	if err != nil {
		syscall.Unlink(name)
		return "", err
	}
	return name, nil
}
