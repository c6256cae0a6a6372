//go:build windows

package dirlock

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// errLocked: another process holds the lock.
var errLocked = windows.ERROR_LOCK_VIOLATION

// lock takes an exclusive lock on one byte of f, without waiting, far past
// the pid it holds: Windows locks are mandatory, and a process refused the
// lock must still read the pid. Windows drops the lock when f is closed
// or the process dies.
func lock(f *os.File) error {
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY,
		0, 1, 0, &windows.Overlapped{OffsetHigh: 1})
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return errLocked
	}
	return err
}
