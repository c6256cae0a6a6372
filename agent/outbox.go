package agent

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
)

// The outbox is the agent's durable memory of the commands it ran: which
// response_ids it accepted, and the results it owes the server. It is one
// append-only file of checksummed records, fsynced where it matters; see
// RATIONALE.md, "The outbox", for the format and the crash analysis.

// Kinds of outbox record.
const (
	recAccept    = "A" // a command is about to run; fsynced before it does
	recResult    = "R" // its results, or their tombstone; fsynced before they count as done
	recDelivered = "D" // the server acknowledged the results; not fsynced
)

const (
	recHeaderLen = 8        // payload length and CRC-32C, big-endian
	maxRecordLen = 64 << 20 // a longer length field is a torn or bad record
)

// droppedForSize is the failure that stands in for each result of a
// command whose results were dropped from a full outbox: its tombstone.
const droppedForSize = "results dropped: the agent's outbox was over outbox.max_bytes"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// outboxRecord is one record of the outbox file, encoded as CBOR.
type outboxRecord struct {
	Kind       string                  `cbor:"k"`
	ResponseID string                  `cbor:"id"`
	At         int64                   `cbor:"at"` // unix milliseconds
	SessionID  string                  `cbor:"sid,omitempty"`
	Status     protocol.TaskStatus     `cbor:"st,omitempty"`
	CallIDs    []string                `cbor:"calls,omitempty"`
	Reply      *protocol.ClientMessage `cbor:"reply,omitempty"`
	Tomb       bool                    `cbor:"tomb,omitempty"` // Reply is a tombstone
}

// acceptedCommand is what an accept record keeps of a COMMAND: enough to
// answer it with failures if the agent dies while it runs.
type acceptedCommand struct {
	ResponseID string
	SessionID  string
	Status     protocol.TaskStatus
	CallIDs    []string
}

func acceptedOf(m *protocol.ServerMessage) acceptedCommand {
	return acceptedCommand{ResponseID: m.ResponseID, SessionID: m.SessionID, Status: m.Status, CallIDs: protocol.CallIDs(m.Actions)}
}

// outboxEntry is the state of one response_id.
type outboxEntry struct {
	cmd      acceptedCommand
	accepted bool                    // an accept record is on disk
	reply    *protocol.ClientMessage // the results; nil until done
	// recorded: reply is on disk, or could not be written and goes out
	// from memory. Until then it is neither sent nor dropped.
	recorded  bool
	tomb      bool   // reply is a tombstone: failures standing in for results dropped for size
	delivered bool   // the server acknowledged them
	sentOn    uint64 // the link they last went out on, unacknowledged; 0: none since last asked for
	asked     uint64 // how many times they were asked for: by completion, then by each copy of the command
	at        time.Time
	seq       uint64 // completion order, which is delivery order
	size      int64  // bytes of its records in the file
}

// done reports whether e holds results that may be sent.
func (e *outboxEntry) done() bool { return e.reply != nil && e.recorded }

// outbox is safe for concurrent use.
type outbox struct {
	path   string
	fs     outboxFS
	limits OutboxLimits
	log    *slog.Logger

	lock *os.File // held while the outbox is open, so that one agent uses it

	syncMu sync.Mutex // one fsync at a time; see syncTo

	mu        sync.Mutex
	f         outboxFile
	size      int64  // of the file
	gen       uint64 // bumped by each rewrite, which starts a new file
	synced    int64  // bytes of the file known to be on disk
	dirSynced bool   // the file's name is on disk: false after a rewrite whose directory fsync failed
	entries   map[string]*outboxEntry
	owed      map[*outboxEntry]struct{} // done, and not acknowledged by the server
	byRequest map[string]string         // response_id by the request_id of its results
	seq       uint64
}

// openOutbox reads the outbox at path, creating it if missing, and keeps
// it on fs from then on. It returns the commands that were accepted but
// never finished: the agent died while they ran, and the caller must
// complete them.
func openOutbox(path string, fs outboxFS, limits OutboxLimits, log *slog.Logger) (*outbox, []acceptedCommand, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("outbox: %w", err)
	}
	lock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, nil, fmt.Errorf("outbox %s: in use by another aip-agent? %w", path, err)
	}
	o := &outbox{path: path, fs: fs, limits: limits, log: log, lock: lock, entries: map[string]*outboxEntry{},
		owed: map[*outboxEntry]struct{}{}, byRequest: map[string]string{}}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		lock.Close()
		return nil, nil, fmt.Errorf("outbox: %w", err)
	}
	good := o.replay(data)
	if good < int64(len(data)) {
		log.Error("outbox: dropping a torn or corrupt tail; the records before it are kept",
			"path", path, "offset", good, "bytes_dropped", int64(len(data))-good)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// Rewriting at open also drops what has aged out and a bad tail.
	if err := o.rewriteLocked(time.Now()); err != nil {
		if o.f != nil {
			o.f.Close()
		}
		lock.Close()
		return nil, nil, err
	}
	var interrupted []acceptedCommand
	for _, e := range o.sortedLocked() {
		if e.reply == nil {
			interrupted = append(interrupted, e.cmd)
		}
	}
	return o, interrupted, nil
}

// replay applies the records in data and returns how many bytes of it were
// whole, valid records.
func (o *outbox) replay(data []byte) int64 {
	var off int64
	for int64(len(data))-off >= recHeaderLen {
		n := int64(binary.BigEndian.Uint32(data[off:]))
		sum := binary.BigEndian.Uint32(data[off+4:])
		end := off + recHeaderLen + n
		if n > maxRecordLen || end > int64(len(data)) {
			break
		}
		payload := data[off+recHeaderLen : end]
		var rec outboxRecord
		if crc32.Checksum(payload, crcTable) != sum || protocol.CBOR.UnmarshalValue(payload, &rec) != nil {
			break
		}
		o.apply(&rec, end-off)
		off = end
	}
	return off
}

func (o *outbox) apply(rec *outboxRecord, size int64) {
	e := o.entries[rec.ResponseID]
	switch {
	case e == nil && rec.Kind == recDelivered:
		return // its results were lost with a bad record
	case e == nil:
		e = &outboxEntry{cmd: acceptedCommand{ResponseID: rec.ResponseID}}
		o.entries[rec.ResponseID] = e
	}
	e.size += size
	e.at = time.UnixMilli(rec.At)
	switch rec.Kind {
	case recAccept:
		e.accepted = true
		e.cmd = acceptedCommand{ResponseID: rec.ResponseID, SessionID: rec.SessionID, Status: rec.Status, CallIDs: rec.CallIDs}
	case recResult:
		if rec.Reply == nil {
			break
		}
		o.seq++
		e.reply, e.tomb, e.recorded, e.seq = rec.Reply, rec.Tomb, true, o.seq
		o.setDelivered(e, false)
		e.asked++
		o.byRequest[rec.Reply.RequestID] = rec.ResponseID
	case recDelivered:
		o.setDelivered(e, e.reply != nil)
	}
}

// admission is what the outbox knows of a COMMAND as it arrives.
type admission int

const (
	admitNew     admission = iota // never seen: run it
	admitRunning                  // being run by this process: its results will follow
	admitDone                     // done: its stored results are sent again
)

// admit decides what to do with an incoming COMMAND. A new one is held in
// memory as running, so that a copy arriving meanwhile is not run too.
// Results not yet on disk count as running: they go out once they are.
func (o *outbox) admit(responseID string) admission {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.entries[responseID]
	switch {
	case !ok:
		o.entries[responseID] = &outboxEntry{cmd: acceptedCommand{ResponseID: responseID}, at: time.Now()}
		return admitNew
	case !e.done():
		return admitRunning
	default:
		// The server does not have the results, whatever it acknowledged.
		o.askAgain(e)
		return admitDone
	}
}

// forget drops a command that was admitted but never accepted: it has not
// run, and the server, which still holds it, may send it again.
func (o *outbox) forget(responseID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e := o.entries[responseID]; e != nil && !e.accepted && e.reply == nil {
		delete(o.entries, responseID)
	}
}

// accept records, durably, that cmd is about to run. Until it returns nil
// the command must not run: after a crash the agent could not tell it from
// a command never seen.
func (o *outbox) accept(cmd acceptedCommand) error {
	o.mu.Lock()
	e := o.entryLocked(cmd.ResponseID)
	// The entry is complete before the record goes out, since the append
	// may rewrite the file from the entries.
	e.cmd, e.at, e.accepted = cmd, time.Now(), true
	rec := &outboxRecord{Kind: recAccept, ResponseID: cmd.ResponseID, At: e.at.UnixMilli(),
		SessionID: cmd.SessionID, Status: cmd.Status, CallIDs: cmd.CallIDs}
	mark, err := o.appendLocked(e, rec)
	o.mu.Unlock()
	if err == nil {
		err = o.syncTo(mark)
	}
	if err != nil {
		o.mu.Lock()
		e.accepted = false
		o.mu.Unlock()
	}
	return err
}

// complete records a command's results, durably, and only then queues
// them for delivery: results count as done once they are on disk. If they
// cannot be written they are still delivered from memory, and the error
// says they would not survive a restart. Results recorded again for the
// same command (smaller ones, say) replace the earlier ones.
func (o *outbox) complete(reply *protocol.ClientMessage) error {
	o.mu.Lock()
	e := o.entryLocked(reply.PrevResponseID)
	o.seq++
	e.reply, e.tomb, e.recorded, e.seq, e.at = reply, false, false, o.seq, time.Now()
	o.byRequest[reply.RequestID] = reply.PrevResponseID
	mark, err := o.appendLocked(e, &outboxRecord{Kind: recResult, ResponseID: reply.PrevResponseID, At: e.at.UnixMilli(), Reply: reply})
	o.mu.Unlock()
	if err == nil {
		err = o.syncTo(mark)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	e.recorded = true
	o.askAgain(e)
	return err
}

// askAgain queues e's results for delivery, on the current link too.
func (o *outbox) askAgain(e *outboxEntry) {
	o.setDelivered(e, false)
	e.sentOn = 0
	e.asked++
}

// pendingReply is results to send, and which request for them a send
// answers.
type pendingReply struct {
	reply *protocol.ClientMessage
	asked uint64
}

// unsent lists, in the order they were completed, the results the server
// has not acknowledged and that have not gone out on link, a number the
// caller gives each link it registers on.
func (o *outbox) unsent(link uint64) []pendingReply {
	o.mu.Lock()
	defer o.mu.Unlock()
	var owed []*outboxEntry
	for e := range o.owed {
		if e.sentOn != link {
			owed = append(owed, e)
		}
	}
	slices.SortFunc(owed, func(a, b *outboxEntry) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]pendingReply, len(owed))
	for i, e := range owed {
		out[i] = pendingReply{e.reply, e.asked}
	}
	return out
}

// largestSentOn is the largest of the results that went out on link and
// have not been acknowledged.
func (o *outbox) largestSentOn(link uint64) (pendingReply, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var big *outboxEntry
	for e := range o.owed {
		if e.sentOn == link && (big == nil || e.size > big.size) {
			big = e
		}
	}
	if big == nil {
		return pendingReply{}, false
	}
	return pendingReply{big.reply, big.asked}, true
}

// markSent notes that p went out on link. If its command came again
// meanwhile, the results stay unsent, to answer that copy too. A send that
// ends after its link was replaced marks nothing sent on the new one.
func (o *outbox) markSent(p pendingReply, link uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e := o.entries[p.reply.PrevResponseID]; e != nil && e.asked == p.asked {
		e.sentOn = link
	}
}

// undelivered counts the results the server has not acknowledged.
func (o *outbox) undelivered() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.owed)
}

// delivered notes that the server acknowledged the results sent with
// requestID, and returns them; nil if they were not results of ours. The
// record is not fsynced: losing it only means sending them once more,
// which the server acknowledges and ignores.
func (o *outbox) delivered(requestID string) *protocol.ClientMessage {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.entries[o.byRequest[requestID]]
	if requestID == "" || e == nil || !e.done() || e.reply.RequestID != requestID {
		return nil
	}
	if !e.delivered {
		o.setDelivered(e, true)
		if _, err := o.appendLocked(e, &outboxRecord{Kind: recDelivered, ResponseID: e.cmd.ResponseID, At: time.Now().UnixMilli()}); err != nil {
			o.entryLog(e).Warn("outbox: delivery not recorded; the results may be sent again after a restart", "err", err)
		}
	}
	return e.reply
}

// prune drops what has aged out, if anything has.
func (o *outbox) prune(now time.Time) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.entries {
		if o.expired(e, now) {
			return o.rewriteLocked(now)
		}
	}
	return nil
}

func (o *outbox) close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	defer o.lock.Close()
	return o.f.Close()
}

// setDelivered records whether the server has e's results, keeping owed,
// the entries whose results it has not, which delivery goes through.
func (o *outbox) setDelivered(e *outboxEntry, delivered bool) {
	e.delivered = delivered
	if delivered {
		delete(o.owed, e)
	} else {
		o.owed[e] = struct{}{}
	}
}

func (o *outbox) entryLocked(responseID string) *outboxEntry {
	e := o.entries[responseID]
	if e == nil {
		e = &outboxEntry{cmd: acceptedCommand{ResponseID: responseID}}
		o.entries[responseID] = e
	}
	return e
}

func (o *outbox) sortedLocked() []*outboxEntry {
	out := make([]*outboxEntry, 0, len(o.entries))
	for _, e := range o.entries {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *outboxEntry) int {
		return cmp.Or(cmp.Compare(a.seq, b.seq), a.at.Compare(b.at))
	})
	return out
}

// syncMark is how far a file must be on disk for a record to be.
type syncMark struct {
	end int64  // bytes of the file up to the record's end
	gen uint64 // which file: each rewrite starts a new one
}

// appendLocked writes one record and says what syncTo must cover for it
// to be durable. A failed write is cut off again, so that the file stays
// a sequence of whole records.
func (o *outbox) appendLocked(e *outboxEntry, rec *outboxRecord) (syncMark, error) {
	frame, err := encodeRecord(rec)
	if err != nil {
		return syncMark{}, fmt.Errorf("outbox: %w", err)
	}
	if _, err := o.f.Write(frame); err != nil {
		o.f.Truncate(o.size)
		return syncMark{}, fmt.Errorf("outbox: write %s: %w", o.path, err)
	}
	o.size += int64(len(frame))
	e.size += int64(len(frame))
	mark := syncMark{end: o.size, gen: o.gen}
	if o.size > o.limits.MaxBytes {
		// A rewrite is synced whole: it makes the record durable too. A
		// failed one only leaves the file too big.
		if err := o.rewriteLocked(time.Now()); err != nil {
			o.log.Error("outbox: rewrite failed", "err", err)
		}
	}
	return mark, nil
}

// syncTo returns once the file is on disk up to mark, its name included.
// fsyncs are group commits: one at a time, each covering everything
// written before it began, so that commands finishing together share one.
func (o *outbox) syncTo(mark syncMark) error {
	o.syncMu.Lock()
	defer o.syncMu.Unlock()
	o.mu.Lock()
	f, gen, size := o.f, o.gen, o.size
	// A rewrite since mark wrote the file whole and fsynced it.
	syncFile := gen == mark.gen && o.synced < mark.end
	o.mu.Unlock()
	var err error
	if syncFile {
		err = f.Sync()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.gen != gen:
		// Rewritten meanwhile, which covers mark: f may have been
		// closed under the fsync.
	case err != nil:
		return fmt.Errorf("outbox: fsync %s: %w", o.path, err)
	case syncFile:
		o.synced = max(o.synced, size)
	}
	if !o.dirSynced {
		// The rewrite that made this file could not fsync its name.
		if err := o.fs.SyncDir(filepath.Dir(o.path)); err != nil {
			return fmt.Errorf("outbox: %s: fsync its directory: %w", o.path, err)
		}
		o.dirSynced = true
	}
	return nil
}

func encodeRecord(rec *outboxRecord) ([]byte, error) {
	payload, err := protocol.CBOR.Marshal(rec)
	if err != nil {
		return nil, err
	}
	frame := make([]byte, recHeaderLen, recHeaderLen+len(payload))
	binary.BigEndian.PutUint32(frame, uint32(len(payload)))
	binary.BigEndian.PutUint32(frame[4:], crc32.Checksum(payload, crcTable))
	return append(frame, payload...), nil
}

// expired reports whether e is done and older than MaxAge. Commands that
// have not finished are never dropped.
func (o *outbox) expired(e *outboxEntry, now time.Time) bool {
	return e.done() && now.Sub(e.at) > o.limits.MaxAge
}

// rewriteLocked writes the live entries to a new file and swaps it in.
// Entries older than MaxAge are forgotten. The results of the others are
// replaced by tombstones, oldest first, while the entries take more than
// MaxBytes/2 (delivered results) or more than MaxBytes (undelivered ones
// too); and the oldest tombstones are forgotten while they take more than
// MaxBytes/4, or the whole more than MaxBytes. An entry whose results are
// being recorded, the one being appended among them, is left whole.
func (o *outbox) rewriteLocked(now time.Time) error {
	undo := o.snapshotLocked()
	var live []*outboxEntry
	var total int64
	for _, e := range o.sortedLocked() {
		if o.expired(e, now) {
			o.drop(e, "older than outbox.max_age")
			continue
		}
		live = append(live, e)
		total += e.size
	}
	total = o.entomb(live, total, o.limits.MaxBytes/2, true)
	total = o.entomb(live, total, o.limits.MaxBytes, false)
	live = o.forgetTombstones(live, total)

	fail := func(err error) error {
		undo()
		o.log.Error("outbox: rewrite failed; the results it would have dropped are kept", "err", err)
		return fmt.Errorf("outbox: rewrite %s: %w", o.path, err)
	}
	tmp := o.path + ".tmp"
	f, err := o.fs.Create(tmp)
	if err != nil {
		return fail(err)
	}
	size, err := writeEntries(f, live)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = o.fs.Rename(tmp, o.path)
	}
	if err != nil {
		f.Close()
		o.fs.Remove(tmp)
		return fail(err)
	}
	// The new file is the journal now, its name durable or not: appends
	// go to it, and syncTo fsyncs the directory until that succeeds.
	if o.f != nil {
		o.f.Close()
	}
	o.f, o.size, o.synced, o.dirSynced = f, size, size, false
	o.gen++
	if err := o.fs.SyncDir(filepath.Dir(o.path)); err != nil {
		return fmt.Errorf("outbox: rewrite %s: fsync its directory: %w", o.path, err)
	}
	o.dirSynced = true
	return nil
}

// snapshotLocked returns a function that puts o's entries back as they
// are now: a rewrite tombstones and drops entries before it writes the new
// file, and one that fails must leave memory agreeing with the old file,
// which still holds them.
func (o *outbox) snapshotLocked() (undo func()) {
	entries, owed, byRequest := maps.Clone(o.entries), maps.Clone(o.owed), maps.Clone(o.byRequest)
	was := make(map[*outboxEntry]outboxEntry, len(o.entries))
	for _, e := range o.entries {
		was[e] = *e
	}
	return func() {
		for e, v := range was {
			*e = v
		}
		o.entries, o.owed, o.byRequest = entries, owed, byRequest
	}
}

// entomb replaces the results of the oldest entries, delivered ones only
// if deliveredOnly, with tombstones until total is at most limit, and
// returns the new total.
func (o *outbox) entomb(live []*outboxEntry, total, limit int64, deliveredOnly bool) int64 {
	for _, e := range live {
		if total <= limit {
			break
		}
		if !e.done() || e.tomb || (deliveredOnly && !e.delivered) {
			continue
		}
		if e.delivered {
			o.entryLog(e).Debug("outbox: dropping delivered results, keeping a tombstone")
		} else {
			o.entryLog(e).Error("outbox: dropping results never delivered; the server gets failures in their place",
				"why", "outbox over outbox.max_bytes")
		}
		tomb := *e.reply
		tomb.ActionResults = protocol.FailAll(protocol.ResultCallIDs(e.reply.ActionResults), droppedForSize)
		e.reply, e.tomb = &tomb, true
		size := recordsSize(entryRecords(e))
		total += size - e.size
		e.size = size
	}
	return total
}

// forgetTombstones drops the oldest tombstones while tombstones take more
// than MaxBytes/4 or everything more than MaxBytes, and returns the entries
// left.
func (o *outbox) forgetTombstones(live []*outboxEntry, total int64) []*outboxEntry {
	var tombs int64
	for _, e := range live {
		if e.tomb {
			tombs += e.size
		}
	}
	return slices.DeleteFunc(live, func(e *outboxEntry) bool {
		if !e.tomb || (tombs <= o.limits.MaxBytes/4 && total <= o.limits.MaxBytes) {
			return false
		}
		o.drop(e, "too many tombstones for outbox.max_bytes")
		tombs -= e.size
		total -= e.size
		return true
	})
}

// drop forgets e: a copy of its command that came after would run again.
func (o *outbox) drop(e *outboxEntry, why string) {
	delete(o.entries, e.cmd.ResponseID)
	delete(o.owed, e)
	if e.reply != nil {
		delete(o.byRequest, e.reply.RequestID)
	}
	log := o.entryLog(e)
	switch {
	case e.delivered:
		log.Debug("outbox: forgetting delivered results", "why", why)
	case e.tomb:
		log.Error("outbox: forgetting the tombstone of results never delivered", "why", why)
	default:
		log.Error("outbox: dropping results never delivered", "why", why)
	}
}

// entryLog is o's log for e: its command's ids, and once it has results,
// their request_id. An entry rebuilt from a result record knows its
// command only from the results.
func (o *outbox) entryLog(e *outboxEntry) *slog.Logger {
	if e.reply != nil {
		return withReply(o.log, e.reply)
	}
	return withCommand(o.log, e.cmd.SessionID, e.cmd.ResponseID, e.cmd.CallIDs)
}

// entryRecords are the records that rebuild e.
func entryRecords(e *outboxEntry) []*outboxRecord {
	at := e.at.UnixMilli()
	switch {
	case e.reply != nil:
		recs := []*outboxRecord{{Kind: recResult, ResponseID: e.cmd.ResponseID, At: at, Reply: e.reply, Tomb: e.tomb}}
		if e.delivered {
			recs = append(recs, &outboxRecord{Kind: recDelivered, ResponseID: e.cmd.ResponseID, At: at})
		}
		return recs
	case e.accepted:
		c := e.cmd
		return []*outboxRecord{{Kind: recAccept, ResponseID: c.ResponseID, At: at,
			SessionID: c.SessionID, Status: c.Status, CallIDs: c.CallIDs}}
	}
	return nil
}

// recordsSize is how many bytes recs take in the file.
func recordsSize(recs []*outboxRecord) int64 {
	var n int64
	for _, rec := range recs {
		if frame, err := encodeRecord(rec); err == nil {
			n += int64(len(frame))
		}
	}
	return n
}

// writeEntries writes each entry as the records that rebuild it and sets
// its size; it returns the bytes written.
func writeEntries(f outboxFile, entries []*outboxEntry) (int64, error) {
	var total int64
	for _, e := range entries {
		e.size = 0
		for _, rec := range entryRecords(e) {
			frame, err := encodeRecord(rec)
			if err != nil {
				return total, err
			}
			if _, err := f.Write(frame); err != nil {
				return total, err
			}
			e.size += int64(len(frame))
		}
		total += e.size
	}
	return total, nil
}
