// Package dirlock gives a process a directory of its own: an exclusive
// lock on a file in it, held until Release or until the process dies,
// however it dies. The holder's pid is written into the file, so that a
// process refused the lock can name the one that holds it.
package dirlock

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// Lock is a held lock on a directory.
type Lock struct {
	f *os.File
}

// HeldError is the error of Acquire when another process holds the lock.
type HeldError struct {
	Dir string
	// PID is the holder's, as it wrote it in the lock file; 0 if the file
	// did not say.
	PID int
}

func (e *HeldError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("data dir %s is in use by another process", e.Dir)
	}
	return fmt.Sprintf("data dir %s is in use by another process (pid %d)", e.Dir, e.PID)
}

// Acquire locks dir through the file name in it, created if missing, and
// writes this process's pid there. It fails at once, with a *HeldError,
// if another process holds the lock: it does not wait.
func Acquire(dir, name string) (*Lock, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := lock(f); err != nil {
		defer f.Close()
		if errors.Is(err, errLocked) {
			return nil, &HeldError{Dir: dir, PID: readPID(f)}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := writePID(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release empties the lock file, so that it names no process, and
// releases the lock.
func (l *Lock) Release() error {
	return errors.Join(l.f.Truncate(0), l.f.Close())
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// readPID is the pid a holder wrote in f, or 0.
func readPID(f *os.File) int {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 32))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		return 0
	}
	return pid
}
