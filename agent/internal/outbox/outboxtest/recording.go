// Package outboxtest watches what the outbox does with its files, for
// tests: the order of its writes and fsyncs is its promise, and a killed
// process, whose page cache survives it, does not show it.
package outboxtest

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/edgeaip/edgeaip/agent/internal/outbox"
	"github.com/edgeaip/edgeaip/protocol"
)

// RecordingFS is the real file system, with a log of what the outbox does
// with it, in order: "write A r1" for each record written, "sync" for each
// fsync of a journal, "syncdir", and the test's own events. A killed
// process keeps its page cache, so only this order shows whether what must
// be on disk was fsynced in time; PowerLoss shows what the death of the
// machine would leave.
type RecordingFS struct {
	outbox.OSFS
	mu     sync.Mutex
	events []string
	files  map[string]*recordingFile // by the path each is at now
	// holdAfter, if set, is a record ("R r1") after whose write the next
	// fsync waits until release is closed; held is closed when it starts
	// waiting.
	holdAfter     string
	holding       bool
	held, release chan struct{}
	// failDirSyncs is how many of the next directory fsyncs fail, and
	// failCreates how many of the next file creations.
	failDirSyncs, failCreates int
	// failSyncs is how many of the next fsyncs of a journal fail.
	failSyncs int
	// room, if set, is how many bytes a file may reach: see LimitRoom.
	room int64
	// writes counts the writes the files took: see Writes.
	writes int
}

// Create implements outbox.FS, unless a failure is due.
func (fs *RecordingFS) Create(path string) (outbox.File, error) {
	fs.mu.Lock()
	if fs.failCreates > 0 {
		fs.failCreates--
		fs.mu.Unlock()
		return nil, fmt.Errorf("create %s: injected failure", path)
	}
	fs.mu.Unlock()
	f, err := fs.OSFS.Create(path)
	if err != nil {
		return nil, err
	}
	r, err := os.Open(path)
	if err != nil {
		f.Close()
		return nil, err
	}
	rf := &recordingFile{File: f, r: r, fs: fs}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.files == nil {
		fs.files = map[string]*recordingFile{}
	}
	fs.files[path] = rf
	return rf, nil
}

// Rename implements outbox.FS.
func (fs *RecordingFS) Rename(from, to string) error {
	if err := fs.OSFS.Rename(from, to); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f, ok := fs.files[from]; ok {
		delete(fs.files, from)
		fs.files[to] = f
	}
	return nil
}

// Remove implements outbox.FS.
func (fs *RecordingFS) Remove(path string) error {
	fs.mu.Lock()
	delete(fs.files, path)
	fs.mu.Unlock()
	return fs.OSFS.Remove(path)
}

// PowerLoss puts each file made through fs back as its fsyncs left it,
// as the death of the machine does, the page cache lost with it: what was
// written since is undone, and the file cut back to the size they made
// durable. A file's name counts as durable (see SyncDir), and an fsync
// still running covers nothing.
func (fs *RecordingFS) PowerLoss() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.events = append(fs.events, "power loss")
	for path, f := range fs.files {
		for _, u := range slices.Backward(slices.Concat(f.lost, f.unsynced)) {
			if _, err := f.File.WriteAt(u.old, u.off); err != nil {
				return fmt.Errorf("power loss: %s: %w", path, err)
			}
		}
		f.unsynced, f.lost = nil, nil
		if err := os.Truncate(path, f.synced); err != nil {
			return fmt.Errorf("power loss: %w", err)
		}
	}
	return nil
}

// SyncDir implements outbox.FS, unless a failure is due.
func (fs *RecordingFS) SyncDir(dir string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.events = append(fs.events, "syncdir")
	if fs.failDirSyncs > 0 {
		fs.failDirSyncs--
		return fmt.Errorf("syncdir %s: injected failure", dir)
	}
	return fs.OSFS.SyncDir(dir)
}

// FailDirSyncs makes the next n directory fsyncs fail.
func (fs *RecordingFS) FailDirSyncs(n int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.failDirSyncs = n
}

// FailSyncs makes the next n fsyncs of a journal fail as Linux fails
// them on a write-back error: the writes they would have made durable are
// marked clean in the page cache, so that no later fsync writes them, and
// the death of the machine loses them even after a later fsync succeeded.
func (fs *RecordingFS) FailSyncs(n int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.failSyncs = n
}

// FailCreates makes the next n file creations fail, as on a full disk.
func (fs *RecordingFS) FailCreates(n int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.failCreates = n
}

// LimitRoom makes the disk full for a file that would reach past n
// bytes: a write writes what fits below n, and fails with ENOSPC.
func (fs *RecordingFS) LimitRoom(n int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.room = n
}

// Writes is how many writes the files of fs have taken, zeros included.
func (fs *RecordingFS) Writes() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.writes
}

// Event adds the test's own event to the log.
func (fs *RecordingFS) Event(e string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.events = append(fs.events, e)
}

// Log is what happened so far, in order.
func (fs *RecordingFS) Log() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return slices.Clone(fs.events)
}

// Hold makes the fsync that follows the write of record ("R r1") wait
// until Unhold, or the end of the test.
func (fs *RecordingFS) Hold(t *testing.T, record string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.holdAfter, fs.held, fs.release = record, make(chan struct{}), make(chan struct{})
	t.Cleanup(fs.Unhold)
}

// Held is closed once the held fsync waits.
func (fs *RecordingFS) Held() <-chan struct{} {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.held
}

// Unhold lets the held fsync go on.
func (fs *RecordingFS) Unhold() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	select {
	case <-fs.release:
	default:
		close(fs.release)
	}
}

type recordingFile struct {
	outbox.File
	r  *os.File // the same file, to read what a write overwrites
	fs *RecordingFS
	// size is how far the file reaches, and synced how far an fsync that
	// returned made it durable. unsynced are the writes no such fsync
	// covered, in order, each with what it overwrote: what a power loss
	// puts back.
	size, synced int64
	unsynced     []undo
	lost         []undo // writes a failed fsync dropped; see FailSyncs
	writes       uint64 // writes so far: the last one's seq
}

// undo is what the write seq overwrote at off.
type undo struct {
	seq uint64
	off int64
	old []byte
}

// recordHeader is the length and CRC before each record's payload; the
// payload's first keys are its kind and response_id. Restated here rather
// than taken from the outbox, so that a change of the format shows.
const recordHeader = 8

type recordName struct {
	Kind       string `cbor:"k"`
	ResponseID string `cbor:"id"`
}

// records names the whole records at the start of p, up to the first
// that is not one: zeros, say.
func records(p []byte) []recordName {
	var out []recordName
	for rest := p; len(rest) >= recordHeader; {
		n := recordHeader + int(binary.BigEndian.Uint32(rest))
		var rec recordName
		if n > len(rest) || protocol.CBOR.UnmarshalValue(rest[recordHeader:n], &rec) != nil {
			break
		}
		out, rest = append(out, rec), rest[n:]
	}
	return out
}

// Kinds are the kinds of the whole records at the start of b, in order:
// "ARD" for an accept record, a result record and a delivery.
func Kinds(b []byte) string {
	var out string
	for _, rec := range records(b) {
		out += rec.Kind
	}
	return out
}

// WriteAt logs each record in p: the outbox writes whole records, and
// zeros ahead of them, which are none.
func (f *recordingFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	for _, rec := range records(p) {
		e := "write " + rec.Kind + " " + rec.ResponseID
		f.fs.events = append(f.fs.events, e)
		f.fs.holding = f.fs.holding || e == "write "+f.fs.holdAfter
	}
	old := make([]byte, max(0, min(off+int64(len(p)), f.size)-off))
	if _, err := f.r.ReadAt(old, off); err != nil {
		return 0, fmt.Errorf("recording a write at %d: %w", off, err)
	}
	f.writes++
	f.fs.writes++
	f.unsynced = append(f.unsynced, undo{seq: f.writes, off: off, old: old})
	full := f.fs.room > 0 && off+int64(len(p)) > f.fs.room
	if full {
		p = p[:max(0, f.fs.room-off)]
	}
	n, err := f.File.WriteAt(p, off)
	f.size = max(f.size, off+int64(n))
	if err == nil && full {
		err = &os.PathError{Op: "write", Path: "journal", Err: syscall.ENOSPC}
	}
	return n, err
}

// Close implements outbox.File.
func (f *recordingFile) Close() error {
	f.r.Close()
	return f.File.Close()
}

// Truncate implements outbox.File.
func (f *recordingFile) Truncate(size int64) error {
	err := f.File.Truncate(size)
	if err == nil {
		f.fs.mu.Lock()
		f.size, f.synced = size, min(f.synced, size)
		f.fs.mu.Unlock()
	}
	return err
}

func (f *recordingFile) Sync() error {
	f.fs.mu.Lock()
	f.fs.events = append(f.fs.events, "sync")
	hold, size, covers := f.fs.holding, f.size, f.writes
	f.fs.holding = false
	f.fs.mu.Unlock()
	if hold {
		close(f.fs.held)
		<-f.fs.release
	}
	if err := f.failSync(covers); err != nil {
		return err
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	f.fs.mu.Lock()
	f.synced = max(f.synced, size)
	f.unsynced = slices.DeleteFunc(f.unsynced, func(u undo) bool { return u.seq <= covers })
	f.fs.mu.Unlock()
	return nil
}

// failSync fails this fsync if a failure is due, losing the writes up
// to covers.
func (f *recordingFile) failSync(covers uint64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.failSyncs == 0 {
		return nil
	}
	f.fs.failSyncs--
	i := 0
	for i < len(f.unsynced) && f.unsynced[i].seq <= covers {
		i++
	}
	f.lost = append(f.lost, f.unsynced[:i]...)
	f.unsynced = slices.Clone(f.unsynced[i:])
	return &os.PathError{Op: "fdatasync", Path: "journal", Err: syscall.EIO}
}

// Between reports whether want occurs in log after the first from and
// before the first to.
func Between(log []string, from, want, to string) bool {
	i, j := slices.Index(log, from), slices.Index(log, to)
	return i >= 0 && j > i && slices.Contains(log[i+1:j], want)
}
