// Package outbox is the agent's durable memory of the commands it ran:
// which response_ids it accepted, and the results it owes the server. It
// is one file of checksummed records, appended in place of the zeros
// written ahead of them, fsynced where it matters; agent/RATIONALE.md,
// "The outbox", gives the format and the crash analysis. Results are kept
// as the bytes the link sends (reply.Reply), recorded as they are.
package outbox

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/reply"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/fxamacker/cbor/v2"
)

// Kinds of outbox record.
const (
	recAccept    = "A" // a command is about to run; fsynced before it does
	recResult    = "R" // its results, or their tombstone; fsynced before they count as done, sent meanwhile
	recDelivered = "D" // the server acknowledged the results; not fsynced
)

const (
	recHeaderLen = 8        // payload length and CRC-32C, big-endian
	maxRecordLen = 64 << 20 // a longer length field is a torn or bad record
)

// zeroedAhead is how far the file is written with zeros ahead of its
// records, at most: appending in place of them, a record's fsync need not
// make a new size of the file durable, which cost about 100 µs more a
// command (agent/RATIONALE.md, "Zeros ahead"). Outboxes smaller than this
// keep to their max_bytes.
const zeroedAhead = 256 << 10

// droppedForSize is the failure that stands in for each result of a
// command whose results were dropped from a full outbox: its tombstone.
const droppedForSize = "results dropped: the agent's outbox was over outbox.max_bytes"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// record is one record of the outbox file, encoded as CBOR. The results
// are the frame the link sends: a CBOR one is the record's reply as it is
// (so that a record holds the same bytes as before replies were kept
// encoded), a JSON one is a byte string.
type record struct {
	Kind       string              `cbor:"k"`
	ResponseID string              `cbor:"id"`
	At         int64               `cbor:"at"` // unix milliseconds
	SessionID  string              `cbor:"sid,omitempty"`
	Status     protocol.TaskStatus `cbor:"st,omitempty"`
	CallIDs    []string            `cbor:"calls,omitempty"`
	Reply      cbor.RawMessage     `cbor:"reply,omitempty"`
	ReplyJSON  []byte              `cbor:"rjson,omitempty"`
	Tomb       bool                `cbor:"tomb,omitempty"`  // the reply is a tombstone
	Local      []byte              `cbor:"local,omitempty"` // an accepted local call's report; see Accepted
}

// resultRecord is the record of r, the results of responseID.
func resultRecord(responseID string, at time.Time, r reply.Reply, tomb bool) *record {
	rec := &record{Kind: recResult, ResponseID: responseID, At: at.UnixMilli(), Tomb: tomb}
	if f := r.Frame(); f.Encoding == protocol.CBOR {
		rec.Reply = f.Data
	} else {
		rec.ReplyJSON = f.Data
	}
	return rec
}

// frame is the results rec holds, if it holds any.
func (rec *record) frame() (protocol.Frame, bool) {
	switch {
	case len(rec.Reply) > 0:
		return protocol.Frame{Encoding: protocol.CBOR, Data: rec.Reply}, true
	case len(rec.ReplyJSON) > 0:
		return protocol.Frame{Encoding: protocol.JSON, Data: rec.ReplyJSON}, true
	}
	return protocol.Frame{}, false
}

// Accepted is what an accept record keeps of a COMMAND: enough to answer
// it with failures if the agent dies while it runs.
type Accepted struct {
	ResponseID string
	SessionID  string
	Status     protocol.TaskStatus
	CallIDs    []string
	// Local is, for a call an application made through the agent's own
	// MCP endpoint (ResponseID its call id), its report as it started,
	// encoded by the executor, which completes it with a failure if the
	// agent dies while it runs. Nil for a COMMAND.
	Local []byte
}

// acceptRecord is the accept record of c, accepted at.
func acceptRecord(c Accepted, at time.Time) *record {
	return &record{Kind: recAccept, ResponseID: c.ResponseID, At: at.UnixMilli(),
		SessionID: c.SessionID, Status: c.Status, CallIDs: c.CallIDs, Local: c.Local}
}

// AcceptedOf is what the outbox keeps of m when it runs.
func AcceptedOf(m *protocol.ServerMessage) Accepted {
	return Accepted{ResponseID: m.ResponseID, SessionID: m.SessionID, Status: m.Status, CallIDs: protocol.CallIDs(m.Actions)}
}

// entry is the state of one response_id.
type entry struct {
	cmd      Accepted
	accepted bool         // an accept record is on disk
	reply    *reply.Reply // the results, written to the file (or kept in memory if they could not be); nil until then
	// recorded: reply's record is on disk, or could not be written and
	// reply goes out from memory. Until then it goes out, while its record
	// is fsynced, but is neither dropped nor counted as delivered.
	recorded  bool
	tomb      bool // reply is a tombstone: failures standing in for results dropped for size
	delivered bool // the server acknowledged them
	// ackedEarly: the server acknowledged reply before its record was on
	// disk; it counts as delivered once it is.
	ackedEarly bool
	sentOn     uint64 // the link they last went out on, unacknowledged; 0: none since last asked for
	asked      uint64 // how many times they were asked for: by completion, then by each copy of the command
	at         time.Time
	seq        uint64 // completion order, which is delivery order
	size       int64  // bytes of its records in the file
}

// done reports whether e's results are recorded, which they must be to
// count as delivered, or to be dropped.
func (e *entry) done() bool { return e.reply != nil && e.recorded }

// Outbox is the journal of one device. It is safe for concurrent use.
type Outbox struct {
	path   string
	fs     FS
	enc    protocol.Encoding // of the link, which the results are kept in
	limits config.OutboxLimits
	log    *slog.Logger
	owing  chan struct{} // signalled when results are queued for delivery

	lock *os.File // held while the outbox is open, so that one agent uses it

	syncMu sync.Mutex // one fsync at a time; see syncTo

	mu     sync.Mutex
	f      File
	size   int64  // of the file's records
	zeroed int64  // how far the file reaches: its records, then zeros
	gen    uint64 // bumped by each rewrite, which starts a new file
	synced int64  // bytes of the file known to be on disk
	// unsure: an fsync of the file failed. The writes it covered may be
	// lost, and no later fsync writes them (Linux marks their pages
	// clean), so only a rewrite, a new file written whole, makes anything
	// after synced durable again.
	unsure    bool
	closed    bool // by Close: nothing is written again, the file's lock let go
	noZeros   bool // zeros could not be written ahead in this file: see givenUpZeros
	dirSynced bool // the file's name is on disk: false after a rewrite whose directory fsync failed
	entries   map[string]*entry
	owed      map[*entry]struct{} // done, and not acknowledged by the server
	byRequest map[string]string   // response_id by the request_id of its results
	seq       uint64
}

// Open reads the outbox at path, creating it if missing, and keeps it on
// fs from then on. Results are kept in enc, the link's encoding: those
// recorded in the other (the agent's config changed) are encoded anew. It
// returns the commands that were accepted but never finished: the agent
// died while they ran, and the caller must complete them.
func Open(path string, fs FS, enc protocol.Encoding, limits config.OutboxLimits, log *slog.Logger) (*Outbox, []Accepted, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("outbox: %w", err)
	}
	lock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, nil, fmt.Errorf("outbox %s: in use by another aip-agent? %w", path, err)
	}
	o := newOutbox(enc, log)
	o.path, o.fs, o.limits, o.lock = path, fs, limits, lock
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		lock.Close()
		return nil, nil, fmt.Errorf("outbox: %w", err)
	}
	good := o.replay(data)
	// What follows the records is zeros written ahead of them, or else a
	// torn or corrupt tail.
	if junk := bytes.TrimRight(data[good:], "\x00"); len(junk) > 0 {
		log.Error("outbox: dropping a torn or corrupt tail; the records before it are kept",
			"path", path, "offset", good, "bytes_dropped", len(junk))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.encodeIn(enc)
	// Rewriting at open also drops what has aged out and a bad tail.
	if err := o.rewriteLocked(time.Now()); err != nil {
		if o.f != nil {
			o.f.Close()
		}
		lock.Close()
		return nil, nil, err
	}
	var interrupted []Accepted
	for _, e := range o.sortedLocked() {
		if e.reply == nil {
			interrupted = append(interrupted, e.cmd)
		}
	}
	if len(o.owed) > 0 {
		notify(o.owing)
	}
	return o, interrupted, nil
}

func newOutbox(enc protocol.Encoding, log *slog.Logger) *Outbox {
	return &Outbox{enc: enc, log: log, owing: make(chan struct{}, 1), entries: map[string]*entry{},
		owed: map[*entry]struct{}{}, byRequest: map[string]string{}}
}

// encodeIn re-encodes in enc the results recorded in the other encoding.
// Those that cannot be are kept as they are: delivery then fails them as
// it fails results it cannot send.
func (o *Outbox) encodeIn(enc protocol.Encoding) {
	for _, e := range o.entries {
		if e.reply == nil {
			continue
		}
		r, err := e.reply.In(enc, o.log)
		if err != nil {
			o.entryLog(e).Error("outbox: results recorded in another encoding cannot be encoded anew", "err", err)
			continue
		}
		e.reply = &r
	}
}

// Owing is signalled whenever results are queued for delivery: once
// written (their fsync may still run), when their command comes again,
// and at open if any are owed.
func (o *Outbox) Owing() <-chan struct{} { return o.owing }

// replay applies the records in data and returns how many bytes of it were
// whole, valid records.
func (o *Outbox) replay(data []byte) int64 {
	var off int64
	for int64(len(data))-off >= recHeaderLen {
		n := int64(binary.BigEndian.Uint32(data[off:]))
		sum := binary.BigEndian.Uint32(data[off+4:])
		end := off + recHeaderLen + n
		if n > maxRecordLen || end > int64(len(data)) {
			break
		}
		payload := data[off+recHeaderLen : end]
		var rec record
		if crc32.Checksum(payload, crcTable) != sum || protocol.CBOR.UnmarshalValue(payload, &rec) != nil || !o.apply(&rec, end-off) {
			break
		}
		off = end
	}
	return off
}

// apply applies rec, of size bytes in the file, and reports whether it
// could: results that do not decode are a bad record.
func (o *Outbox) apply(rec *record, size int64) bool {
	var r reply.Reply
	if f, ok := rec.frame(); ok {
		var err error
		if r, err = reply.Decode(f); err != nil {
			return false
		}
	}
	e := o.entries[rec.ResponseID]
	switch {
	case e == nil && rec.Kind == recDelivered:
		return true // its results were lost with a bad record
	case e == nil:
		e = &entry{cmd: Accepted{ResponseID: rec.ResponseID}}
		o.entries[rec.ResponseID] = e
	}
	e.size += size
	e.at = time.UnixMilli(rec.At)
	switch rec.Kind {
	case recAccept:
		e.accepted = true
		e.cmd = Accepted{ResponseID: rec.ResponseID, SessionID: rec.SessionID, Status: rec.Status, CallIDs: rec.CallIDs, Local: rec.Local}
	case recResult:
		if r.Frame().Data == nil {
			break
		}
		o.seq++
		e.reply, e.tomb, e.recorded, e.seq = &r, rec.Tomb, true, o.seq
		o.setDelivered(e, false)
		e.asked++
		o.byRequest[r.RequestID()] = rec.ResponseID
	case recDelivered:
		// Without a result record (it did not fit; its results went out
		// from memory) there is nothing to owe: the command is reported
		// interrupted, and owed once completed again.
		if e.reply != nil {
			o.setDelivered(e, true)
		}
	}
	return true
}

// Admission is what the outbox knows of a COMMAND as it arrives.
type Admission int

// The admissions.
const (
	AdmitNew     Admission = iota // never seen: run it
	AdmitRunning                  // being run by this process: its results will follow
	AdmitDone                     // done: its stored results are sent again
)

// Admit decides what to do with an incoming COMMAND. A new one is held in
// memory as running, so that a copy arriving meanwhile is not run too.
// Results being fsynced are done: they go out as they are.
func (o *Outbox) Admit(responseID string) Admission {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.entries[responseID]
	switch {
	case !ok:
		o.entries[responseID] = &entry{cmd: Accepted{ResponseID: responseID}, at: time.Now()}
		return AdmitNew
	case e.reply == nil:
		return AdmitRunning
	default:
		// The server does not have the results, whatever it acknowledged.
		o.askAgain(e)
		return AdmitDone
	}
}

// Forget drops a command that was admitted but never accepted: it has not
// run, and the server, which still holds it, may send it again.
func (o *Outbox) Forget(responseID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e := o.entries[responseID]; e != nil && !e.accepted && e.reply == nil {
		delete(o.entries, responseID)
	}
}

// Accept records, durably, that cmd is about to run. Until it returns nil
// the command must not run: after a crash the agent could not tell it from
// a command never seen.
func (o *Outbox) Accept(cmd Accepted) error {
	o.mu.Lock()
	e := o.entryLocked(cmd.ResponseID)
	// The entry is complete before the record goes out, since the append
	// may rewrite the file from the entries.
	e.cmd, e.at, e.accepted = cmd, time.Now(), true
	mark, err := o.appendLocked(e, acceptRecord(cmd, e.at))
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

// Complete records a command's results, the bytes the link sends,
// durably. They are queued for delivery once written, and go out while
// their record is fsynced; they count as done, and an ack of them as
// their delivery, once it is on disk (agent/RATIONALE.md, "Crash
// points"). If they cannot be written they are still delivered from
// memory, and the error says they would not survive a restart. Results
// recorded again for the same command (smaller ones, say) replace the
// earlier ones.
func (o *Outbox) Complete(r reply.Reply) error {
	o.mu.Lock()
	e := o.entryLocked(r.ResponseID())
	o.seq++
	e.reply, e.tomb, e.recorded, e.seq, e.at = &r, false, false, o.seq, time.Now()
	o.byRequest[r.RequestID()] = r.ResponseID()
	mark, err := o.appendLocked(e, resultRecord(r.ResponseID(), e.at, r, false))
	o.askAgain(e)
	o.mu.Unlock()
	// The sender askAgain woke runs first: a goroutine blocked in a
	// syscall (the fsync) keeps its P until sysmon takes it back, which
	// held the results here 60-200 µs (BenchmarkRoundTrip, 1 caller).
	runtime.Gosched()
	if err == nil {
		err = o.syncTo(mark)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if e.reply != &r {
		return err // replaced meanwhile: done when those are
	}
	e.recorded = true
	if e.ackedEarly {
		e.ackedEarly = false
		o.deliveredLocked(e)
	}
	return err
}

// askAgain queues e's results for delivery, on the current link too.
// An ack of them before is of no more account than a delivery.
func (o *Outbox) askAgain(e *entry) {
	o.setDelivered(e, false)
	e.ackedEarly = false
	e.sentOn = 0
	e.asked++
	notify(o.owing)
}

// notify signals ch without blocking; one pending signal is enough.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Pending is results to send, and which request for them a send answers.
type Pending struct {
	Reply reply.Reply
	asked uint64
}

// Unsent lists, in the order they were completed, the results the server
// has not acknowledged and that have not gone out on link, a number the
// caller gives each link it registers on.
func (o *Outbox) Unsent(link uint64) []Pending {
	o.mu.Lock()
	defer o.mu.Unlock()
	var owed []*entry
	for e := range o.owed {
		if e.sentOn != link {
			owed = append(owed, e)
		}
	}
	slices.SortFunc(owed, func(a, b *entry) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]Pending, len(owed))
	for i, e := range owed {
		out[i] = Pending{*e.reply, e.asked}
	}
	return out
}

// LargestSentOn is the largest of the results that went out on link and
// have not been acknowledged.
func (o *Outbox) LargestSentOn(link uint64) (Pending, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var big *entry
	for e := range o.owed {
		if e.sentOn == link && (big == nil || e.size > big.size) {
			big = e
		}
	}
	if big == nil {
		return Pending{}, false
	}
	return Pending{*big.reply, big.asked}, true
}

// MarkSent notes that p went out on link. If its command came again
// meanwhile, the results stay unsent, to answer that copy too. A send that
// ends after its link was replaced marks nothing sent on the new one.
func (o *Outbox) MarkSent(p Pending, link uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e := o.entries[p.Reply.ResponseID()]; e != nil && e.asked == p.asked {
		e.sentOn = link
	}
}

// Undelivered counts the results the server has not acknowledged.
func (o *Outbox) Undelivered() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.owed)
}

// Delivered notes that the server acknowledged the results sent with
// requestID, and returns them; false if they were not results of ours.
// An ack that comes while their record is fsynced counts once it is on
// disk. The record is not fsynced: losing it only means sending them once
// more, which the server acknowledges and ignores.
func (o *Outbox) Delivered(requestID string) (reply.Reply, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.entries[o.byRequest[requestID]]
	if requestID == "" || e == nil || e.reply == nil || e.reply.RequestID() != requestID {
		return reply.Reply{}, false
	}
	if e.recorded {
		o.deliveredLocked(e)
	} else {
		e.ackedEarly = true
	}
	return *e.reply, true
}

// deliveredLocked marks e's results delivered, and writes so.
func (o *Outbox) deliveredLocked(e *entry) {
	if e.delivered {
		return
	}
	o.setDelivered(e, true)
	if _, err := o.appendLocked(e, &record{Kind: recDelivered, ResponseID: e.cmd.ResponseID, At: time.Now().UnixMilli()}); err != nil {
		o.entryLog(e).Warn("outbox: delivery not recorded; the results may be sent again after a restart", "err", err)
	}
}

// Prune drops what has aged out, if anything has.
func (o *Outbox) Prune(now time.Time) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.entries {
		if o.expired(e, now) {
			return o.rewriteLocked(now)
		}
	}
	return nil
}

// Close closes the journal and lets go of its lock. It writes nothing:
// what is on disk is what a killed process leaves.
func (o *Outbox) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	defer o.lock.Close()
	o.closed = true
	return o.f.Close()
}

// setDelivered records whether the server has e's results, keeping owed,
// the entries whose results it has not, which delivery goes through.
func (o *Outbox) setDelivered(e *entry, delivered bool) {
	e.delivered = delivered
	if delivered {
		delete(o.owed, e)
	} else {
		o.owed[e] = struct{}{}
	}
}

func (o *Outbox) entryLocked(responseID string) *entry {
	e := o.entries[responseID]
	if e == nil {
		e = &entry{cmd: Accepted{ResponseID: responseID}}
		o.entries[responseID] = e
	}
	return e
}

func (o *Outbox) sortedLocked() []*entry {
	out := make([]*entry, 0, len(o.entries))
	for _, e := range o.entries {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *entry) int {
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
func (o *Outbox) appendLocked(e *entry, rec *record) (syncMark, error) {
	frame, err := encodeRecord(rec)
	if err != nil {
		return syncMark{}, fmt.Errorf("outbox: %w", err)
	}
	end := o.size + int64(len(frame))
	if to := o.zeroedEnd(end); end > o.zeroed && to > end && !o.noZeros {
		var err error
		if o.zeroed, err = zeroAhead(o.f, o.zeroed, to); err != nil {
			o.givenUpZeros(err)
		}
	}
	if _, err := o.f.WriteAt(frame, o.size); err != nil {
		o.f.Truncate(o.size)
		o.zeroed = o.size
		return syncMark{}, fmt.Errorf("outbox: write %s: %w", o.path, err)
	}
	o.size, o.zeroed = end, max(o.zeroed, end)
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
func (o *Outbox) syncTo(mark syncMark) error {
	o.syncMu.Lock()
	defer o.syncMu.Unlock()
	o.mu.Lock()
	f, gen, size, unsure := o.f, o.gen, o.size, o.unsure
	// A rewrite since mark wrote the file whole and fsynced it.
	syncFile := gen == mark.gen && o.synced < mark.end
	o.mu.Unlock()
	var err error
	if syncFile && !unsure {
		err = f.Sync()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.gen != gen:
		// Rewritten meanwhile, which covers mark: f may have been
		// closed under the fsync.
	case err != nil || syncFile && unsure:
		if err != nil {
			o.unsure = true
		}
		if o.closed {
			return fmt.Errorf("outbox: fsync %s: %w", o.path, cmp.Or(err, os.ErrClosed))
		}
		if err != nil {
			o.log.Error("outbox: fsync failed; writing the journal again whole", "path", o.path, "err", err)
		}
		if rerr := o.rewriteLocked(time.Now()); rerr != nil {
			return fmt.Errorf("outbox: fsync %s: %w", o.path, cmp.Or(err, rerr))
		}
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

// zeroedEnd is how far the file is zeroed ahead once its records reach
// end: to the multiple of the step at or after end (an empty file gets
// one step), the step being zeroedAhead, or max_bytes if smaller; but
// zeros never take the file past max_bytes, and records that go past it
// (those not yet delivered cannot be dropped) get none.
func (o *Outbox) zeroedEnd(end int64) int64 {
	step := max(min(zeroedAhead, o.limits.MaxBytes), 1)
	to := max((end+step-1)/step*step, step)
	return max(min(to, o.limits.MaxBytes), end)
}

// zeroAhead writes zeros to f from from to to, and returns how far the
// file reaches then: to, or from if the zeros could not be written (a
// full disk), the file then cut back, and why. Records are written over
// the zeros.
func zeroAhead(f File, from, to int64) (int64, error) {
	if _, err := f.WriteAt(make([]byte, to-from), from); err != nil {
		f.Truncate(from)
		return from, err
	}
	return to, nil
}

// givenUpZeros notes that zeros could not be written ahead of the
// journal's records: records are appended past its end from then on,
// without trying zeros before each, until a rewrite starts a new file.
func (o *Outbox) givenUpZeros(err error) {
	o.noZeros = true
	o.log.Warn("outbox: no zeros ahead of the records (a full disk?); records are appended past the end", "path", o.path, "err", err)
}

func encodeRecord(rec *record) ([]byte, error) {
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
func (o *Outbox) expired(e *entry, now time.Time) bool {
	return e.done() && now.Sub(e.at) > o.limits.MaxAge
}

// rewriteLocked writes the live entries to a new file and swaps it in.
// Entries older than MaxAge are forgotten. The results of the others are
// replaced by tombstones, oldest first, while the entries take more than
// MaxBytes/2 (delivered results) or more than MaxBytes (undelivered ones
// too); and the oldest tombstones are forgotten while they take more than
// MaxBytes/4, or the whole more than MaxBytes. An entry whose results are
// being recorded, the one being appended among them, is left whole.
func (o *Outbox) rewriteLocked(now time.Time) error {
	undo := o.snapshotLocked()
	var live []*entry
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
	zeroed, zerosErr := size, error(nil)
	if to := o.zeroedEnd(size); err == nil && to > size {
		zeroed, zerosErr = zeroAhead(f, size, to)
	}
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
	o.f, o.size, o.zeroed, o.synced, o.dirSynced, o.unsure, o.noZeros = f, size, zeroed, size, false, false, false
	if zerosErr != nil {
		o.givenUpZeros(zerosErr)
	}
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
func (o *Outbox) snapshotLocked() (undo func()) {
	entries, owed, byRequest := maps.Clone(o.entries), maps.Clone(o.owed), maps.Clone(o.byRequest)
	was := make(map[*entry]entry, len(o.entries))
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
func (o *Outbox) entomb(live []*entry, total, limit int64, deliveredOnly bool) int64 {
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
		tomb, err := reply.Encode(e.reply.Failed(droppedForSize), o.enc, o.log)
		if err != nil {
			o.entryLog(e).Error("outbox: results not dropped: their tombstone cannot be encoded", "err", err)
			continue
		}
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
func (o *Outbox) forgetTombstones(live []*entry, total int64) []*entry {
	var tombs int64
	for _, e := range live {
		if e.tomb {
			tombs += e.size
		}
	}
	return slices.DeleteFunc(live, func(e *entry) bool {
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
func (o *Outbox) drop(e *entry, why string) {
	delete(o.entries, e.cmd.ResponseID)
	delete(o.owed, e)
	if e.reply != nil {
		delete(o.byRequest, e.reply.RequestID())
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
func (o *Outbox) entryLog(e *entry) *slog.Logger {
	if e.reply != nil {
		return e.reply.Log(o.log)
	}
	return reply.CommandLog(o.log, e.cmd.SessionID, e.cmd.ResponseID, e.cmd.CallIDs)
}

// entryRecords are the records that rebuild e.
func entryRecords(e *entry) []*record {
	at := e.at.UnixMilli()
	switch {
	case e.reply != nil:
		recs := []*record{resultRecord(e.cmd.ResponseID, e.at, *e.reply, e.tomb)}
		if e.delivered {
			recs = append(recs, &record{Kind: recDelivered, ResponseID: e.cmd.ResponseID, At: at})
		}
		return recs
	case e.accepted:
		return []*record{acceptRecord(e.cmd, e.at)}
	}
	return nil
}

// recordsSize is how many bytes recs take in the file.
func recordsSize(recs []*record) int64 {
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
func writeEntries(f File, entries []*entry) (int64, error) {
	var total int64
	for _, e := range entries {
		e.size = 0
		for _, rec := range entryRecords(e) {
			frame, err := encodeRecord(rec)
			if err != nil {
				return total, err
			}
			if _, err := f.WriteAt(frame, total+e.size); err != nil {
				return total, err
			}
			e.size += int64(len(frame))
		}
		total += e.size
	}
	return total, nil
}
