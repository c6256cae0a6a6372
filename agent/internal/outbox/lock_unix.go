//go:build unix

package outbox

import (
	"os"
	"syscall"
)

// lockFile holds an exclusive lock on path, created if missing, for as
// long as the returned file stays open. The kernel drops it when the
// process dies, however it dies.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
