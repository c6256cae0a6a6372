//go:build unix

package dirlock

import (
	"errors"
	"os"
	"syscall"
)

// errLocked: another process holds the lock.
var errLocked = syscall.EWOULDBLOCK

// lock takes an exclusive flock on f without waiting. The kernel drops
// it when f is closed or the process dies.
func lock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EAGAIN) {
		return errLocked
	}
	return err
}
