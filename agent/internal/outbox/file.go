package outbox

import (
	"io"
	"os"

	"github.com/edgeaip/edgeaip/internal/atomicfile"
)

// File is the outbox's open journal: all the outbox does with it.
// The promises of the outbox are about the order of its writes and
// fsyncs, which a killed process does not show (the page cache survives
// it), so tests watch them through this interface.
type File interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

// FS is where the outbox keeps its journal.
type FS interface {
	// Create opens path for appending, emptied, creating it if missing.
	Create(path string) (File, error)
	Rename(from, to string) error
	Remove(path string) error
	// SyncDir makes the names in dir durable.
	SyncDir(dir string) error
}

// OSFS is the outbox's file system: the real one.
type OSFS struct{}

// Create implements FS.
func (OSFS) Create(path string) (File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
}

// Rename implements FS.
func (OSFS) Rename(from, to string) error { return os.Rename(from, to) }

// Remove implements FS.
func (OSFS) Remove(path string) error { return os.Remove(path) }

// SyncDir implements FS.
func (OSFS) SyncDir(dir string) error { return atomicfile.SyncDir(dir) }
