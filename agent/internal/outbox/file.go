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
	io.WriterAt
	// Sync makes what was written durable, the file's size included.
	Sync() error
	Truncate(size int64) error
	Close() error
}

// FS is where the outbox keeps its journal.
type FS interface {
	// Create opens path for writing, emptied, creating it if missing.
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
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Rename implements FS.
func (OSFS) Rename(from, to string) error { return os.Rename(from, to) }

// Remove implements FS.
func (OSFS) Remove(path string) error { return os.Remove(path) }

// SyncDir implements FS.
func (OSFS) SyncDir(dir string) error { return atomicfile.SyncDir(dir) }

// osFile is a journal on the real file system.
type osFile struct{ *os.File }

// Sync implements File with fdatasync where there is one: a record
// written over the zeros ahead changes the file's data alone, and its
// modification time, which an fsync would write too, is of no use here.
func (f osFile) Sync() error { return datasync(f.File) }
