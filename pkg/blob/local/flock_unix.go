//go:build unix

package local

import (
	"syscall"
)

// lockFile opens name and takes an exclusive flock on it, so two processes
// sharing the directory serialise their compare-and-swap. It works on the
// descriptor directly: an os.File would cost a round of fcntl and epoll
// calls on open and on Fd, as many again as the lock itself, and a lock
// is taken on every write.
func lockFile(name string) (unlock func(), err error) {
	var fd int
	for {
		fd, err = syscall.Open(name, syscall.O_RDWR|syscall.O_CREAT|syscall.O_CLOEXEC, 0o644)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &pathError{Op: "open", Path: name, Err: err}
	}
	for {
		err = syscall.Flock(fd, syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		syscall.Close(fd)
		return nil, &pathError{Op: "flock", Path: name, Err: err}
	}
	return func() {
		syscall.Flock(fd, syscall.LOCK_UN)
		syscall.Close(fd)
	}, nil
}
