package agent

import (
	"io"
	"os"

	"github.com/edgeaip/edgeaip/internal/atomicfile"
)

// outboxFile is the outbox's open journal: all the outbox does with it.
// The promises of the outbox are about the order of its writes and
// fsyncs, which a killed process does not show (the page cache survives
// it), so tests watch them through this interface.
type outboxFile interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

// outboxFS is where the outbox keeps its journal.
type outboxFS interface {
	// Create opens path for appending, emptied, creating it if missing.
	Create(path string) (outboxFile, error)
	Rename(from, to string) error
	Remove(path string) error
	// SyncDir makes the names in dir durable.
	SyncDir(dir string) error
}

// osFS is the outbox's file system: the real one.
type osFS struct{}

func (osFS) Create(path string) (outboxFile, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
}

func (osFS) Rename(from, to string) error { return os.Rename(from, to) }
func (osFS) Remove(path string) error     { return os.Remove(path) }
func (osFS) SyncDir(dir string) error     { return atomicfile.SyncDir(dir) }
