package outbox_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/logtest"
	"github.com/edgeaip/edgeaip/agent/internal/outbox"
	"github.com/edgeaip/edgeaip/agent/internal/outbox/outboxtest"
	"github.com/edgeaip/edgeaip/agent/internal/reply"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var quietLog = logtest.Quiet

var testLimits = config.OutboxLimits{MaxBytes: 1 << 20, MaxAge: time.Hour}

// testJournal opens outboxes on one file as successive runs of the agent
// would: each open first kills the outbox open before, which writes
// nothing more, as a killed process leaves its file.
type testJournal struct {
	t      *testing.T
	path   string
	enc    protocol.Encoding
	limits config.OutboxLimits
	cur    *outbox.Outbox
}

func newJournal(t *testing.T, limits config.OutboxLimits) *testJournal {
	j := &testJournal{t: t, path: filepath.Join(t.TempDir(), "j"), limits: limits}
	t.Cleanup(func() {
		if j.cur != nil {
			j.cur.Close()
		}
	})
	return j
}

// open opens the journal, after closing the outbox open before: Close
// writes nothing, so that is what the death of its process leaves.
func (j *testJournal) open() (*outbox.Outbox, []outbox.Accepted) {
	j.t.Helper()
	if j.cur != nil {
		j.cur.Close()
	}
	o, interrupted, err := outbox.Open(j.path, outbox.OSFS{}, j.enc, j.limits, quietLog)
	require.NoError(j.t, err)
	j.cur = o
	return o, interrupted
}

// encoded is m encoded as the link sends it.
func encoded(t *testing.T, m *protocol.ClientMessage) reply.Reply {
	t.Helper()
	r, err := reply.Encode(m, protocol.CBOR, quietLog)
	require.NoError(t, err)
	return r
}

// ranToEnd takes id through admission, acceptance and completion, as a command
// that ran to the end.
func ranToEnd(t *testing.T, o *outbox.Outbox, id, payload string) *protocol.ClientMessage {
	t.Helper()
	require.Equal(t, outbox.AdmitNew, o.Admit(id))
	require.NoError(t, o.Accept(outboxtest.Command(id)))
	m := outboxtest.Results(id, payload)
	require.NoError(t, o.Complete(encoded(t, m)))
	return m
}

// testLink is the number of the link the outbox tests send on.
const testLink = 1

// replies lists the results the outbox has yet to send on testLink, as
// the server reads them.
func replies(o *outbox.Outbox) []*protocol.ClientMessage { return repliesOn(o, testLink) }

func repliesOn(o *outbox.Outbox, link uint64) []*protocol.ClientMessage {
	var out []*protocol.ClientMessage
	for _, p := range o.Unsent(link) {
		out = append(out, decoded(p.Reply))
	}
	return out
}

// decoded is the message r's frame carries; nil if it does not decode.
func decoded(r reply.Reply) *protocol.ClientMessage {
	var m protocol.ClientMessage
	if r.Frame().Encoding.UnmarshalValue(r.Frame().Data, &m) != nil {
		return nil
	}
	return &m
}

// requestIDs lists the request_ids of the results the outbox has yet to
// send.
func requestIDs(o *outbox.Outbox) []string {
	var out []string
	for _, p := range o.Unsent(testLink) {
		out = append(out, p.Reply.RequestID())
	}
	return out
}

// markSent marks the results of id sent on testLink, as delivery does.
func markSent(t *testing.T, o *outbox.Outbox, id string) {
	t.Helper()
	for _, p := range o.Unsent(testLink) {
		if p.Reply.ResponseID() == id {
			o.MarkSent(p, testLink)
			return
		}
	}
	t.Fatalf("no unsent results for %s", id)
}

func TestOutboxACopyThatArrivesWhileResultsGoOutIsAnsweredToo(t *testing.T) {
	o, _ := newJournal(t, testLimits).open()
	r1 := ranToEnd(t, o, "r1", "x")
	going := o.Unsent(testLink)[0]
	assert.Equal(t, outbox.AdmitDone, o.Admit("r1"), "the command again, while its results are on the wire")
	o.MarkSent(going, testLink)
	assert.Equal(t, []*protocol.ClientMessage{r1}, replies(o), "they go out once more, for the copy")
	markSent(t, o, "r1")
	assert.Empty(t, replies(o))
}

func TestOutboxAdmitsEachResponseIDOnce(t *testing.T) {
	o, _ := newJournal(t, testLimits).open()
	assert.Equal(t, outbox.AdmitNew, o.Admit("r1"))
	assert.Equal(t, outbox.AdmitRunning, o.Admit("r1"), "a copy that arrives while the first waits to run")
	o.Forget("r1")
	assert.Equal(t, outbox.AdmitNew, o.Admit("r1"), "a command that never started may come again")
	require.NoError(t, o.Accept(outboxtest.Command("r1")))
	assert.Equal(t, outbox.AdmitRunning, o.Admit("r1"))
	require.NoError(t, o.Complete(encoded(t, outboxtest.Results("r1", "x"))))
	assert.Equal(t, outbox.AdmitDone, o.Admit("r1"))
}

func TestOutboxCrashAfterAcceptReportsTheCommandInterrupted(t *testing.T) {
	j := newJournal(t, testLimits)
	o, _ := j.open()
	o.Admit("r1")
	require.NoError(t, o.Accept(outboxtest.Command("r1")))
	ranToEnd(t, o, "r2", "done before the crash")

	o2, interrupted := j.open()
	assert.Equal(t, []outbox.Accepted{outboxtest.Command("r1")}, interrupted, "what it needs to answer each call")
	assert.Equal(t, outbox.AdmitRunning, o2.Admit("r1"), "not run again while its failure is being recorded")
	assert.Equal(t, outbox.AdmitDone, o2.Admit("r2"))
}

// A local call's accept record keeps its report as it started, across
// the rewrite at open too, so that a second crash before it is reported
// still finds it.
func TestOutboxKeepsAnInterruptedLocalCallsReport(t *testing.T) {
	j := newJournal(t, testLimits)
	o, _ := j.open()
	local := outbox.Accepted{ResponseID: "local-1", CallIDs: []string{"local-1"}, Local: []byte("the report as it started")}
	require.NoError(t, o.Accept(local))
	j.open()
	_, interrupted := j.open()
	assert.Equal(t, []outbox.Accepted{local}, interrupted)
}

func TestOutboxCrashBeforeAcceptLeavesNoTrace(t *testing.T) {
	j := newJournal(t, testLimits)
	o, _ := j.open()
	o.Admit("r1") // received, waiting for a slot

	o2, interrupted := j.open()
	assert.Empty(t, interrupted)
	assert.Equal(t, outbox.AdmitNew, o2.Admit("r1"), "the server sends it again and it runs once")
}

func TestOutboxCrashAfterResultWriteDeliversAfterRestart(t *testing.T) {
	j := newJournal(t, testLimits)
	o, _ := j.open()
	r1 := ranToEnd(t, o, "r1", "one")
	r2 := ranToEnd(t, o, "r2", "two")

	o2, interrupted := j.open()
	assert.Empty(t, interrupted)
	assert.Equal(t, []*protocol.ClientMessage{r1, r2}, replies(o2), "in completion order, whole")
}

// openOn opens an outbox at path on fs, and closes it at the end of the
// test (a second Close, if the test closed it, does nothing).
func openOn(t *testing.T, fs outbox.FS, path string) (*outbox.Outbox, []outbox.Accepted) {
	t.Helper()
	o, interrupted, err := outbox.Open(path, fs, protocol.CBOR, testLimits, quietLog)
	require.NoError(t, err)
	t.Cleanup(func() { o.Close() })
	return o, interrupted
}

// completeHeld completes id's command with its results while the fsync of
// their record waits, and returns them, and what Complete returns once
// fs lets the fsync go on.
func completeHeld(t *testing.T, fs *outboxtest.RecordingFS, o *outbox.Outbox, id string) (*protocol.ClientMessage, <-chan error) {
	t.Helper()
	require.Equal(t, outbox.AdmitNew, o.Admit(id))
	require.NoError(t, o.Accept(outboxtest.Command(id)))
	m := outboxtest.Results(id, "x")
	r := encoded(t, m)
	fs.Hold(t, "R "+id)
	completed := make(chan error, 1)
	go func() { completed <- o.Complete(r) }()
	<-fs.Held()
	return m, completed
}

func TestOutboxResultsGoOutWhileTheirRecordIsFsyncedAndCountAsDeliveredOnceItIsOnDisk(t *testing.T) {
	fs := &outboxtest.RecordingFS{}
	o, _ := openOn(t, fs, filepath.Join(t.TempDir(), "j"))
	r1, completed := completeHeld(t, fs, o, "r1")
	assert.Equal(t, []*protocol.ClientMessage{r1}, replies(o), "they go out while their record is fsynced")
	markSent(t, o, "r1")
	r, ok := o.Delivered("req-r1")
	assert.True(t, ok, "the ack is of results of ours")
	assert.Equal(t, "req-r1", r.RequestID())
	assert.Equal(t, 1, o.Undelivered(), "not delivered before they are on disk")
	assert.NotContains(t, fs.Log(), "write D r1")

	fs.Unhold()
	require.NoError(t, <-completed)
	assert.Zero(t, o.Undelivered(), "the ack counts once they are on disk")
	assert.True(t, outboxtest.Between(fs.Log(), "write R r1", "sync", "write D r1"), "%q", fs.Log())
	assert.Empty(t, replies(o))
}

func TestOutboxACopyThatArrivesWhileResultsAreFsyncedIsAnsweredWithThem(t *testing.T) {
	fs := &outboxtest.RecordingFS{}
	o, _ := openOn(t, fs, filepath.Join(t.TempDir(), "j"))
	r1, completed := completeHeld(t, fs, o, "r1")
	markSent(t, o, "r1")
	o.Delivered("req-r1")
	assert.Equal(t, outbox.AdmitDone, o.Admit("r1"), "the command again: not run, answered")
	assert.Equal(t, []*protocol.ClientMessage{r1}, replies(o), "the results go out again for the copy")
	fs.Unhold()
	require.NoError(t, <-completed)
	assert.Equal(t, 1, o.Undelivered(), "the ack before the copy came does not count for it")
	assert.NotContains(t, fs.Log(), "write D r1")
}

// The machine dies after the results went out and before the fsync of
// their record ended: on disk is the accept record only, so the command
// is reported as interrupted, as after a death during its tool call. The
// server keeps the results if it got them, and acknowledges the report as
// a repeat (e2e/TestResultsSentBeforeAPowerLossKeepTheirOutcome).
func TestOutboxPowerLossAfterSendBeforeTheResultFsyncReportsTheCommandInterrupted(t *testing.T) {
	fs := &outboxtest.RecordingFS{}
	path := filepath.Join(t.TempDir(), "j")
	o, _ := openOn(t, fs, path)
	r0 := ranToEnd(t, o, "r0", "done and fsynced before")
	_, completed := completeHeld(t, fs, o, "r1")
	markSent(t, o, "r1")
	require.NoError(t, fs.PowerLoss())
	o.Close()

	o2, interrupted := openOn(t, outbox.OSFS{}, path)
	assert.Equal(t, []outbox.Accepted{outboxtest.Command("r1")}, interrupted, "what it needs to answer each call")
	assert.Equal(t, outbox.AdmitRunning, o2.Admit("r1"), "not run again while its failure is being recorded")
	assert.Equal(t, []*protocol.ClientMessage{r0}, replies(o2), "what was fsynced survives")
	fs.Unhold()
	assert.Error(t, <-completed, "the fsync of a journal closed under it")
}

func TestOutboxCrashAfterSendBeforeTheAckSendsThemAgain(t *testing.T) {
	j := newJournal(t, testLimits)
	o, _ := j.open()
	r1 := ranToEnd(t, o, "r1", "one")
	markSent(t, o, "r1")
	assert.Empty(t, replies(o), "not twice on one link")

	o2, _ := j.open()
	assert.Equal(t, []*protocol.ClientMessage{r1}, replies(o2), "the server may never have had them")
}

func TestOutboxCrashAfterTheAckKeepsResultsForACommandSentAgain(t *testing.T) {
	j := newJournal(t, testLimits)
	o, _ := j.open()
	r1 := ranToEnd(t, o, "r1", "one")
	r2 := ranToEnd(t, o, "r2", "two")
	for _, id := range []string{"req-r1", "req-r2"} {
		r, ok := o.Delivered(id)
		assert.True(t, ok)
		assert.Equal(t, id, r.RequestID())
	}
	_, ok := o.Delivered("req-unknown")
	assert.False(t, ok, "an ack of something else")

	o2, _ := j.open()
	assert.Empty(t, replies(o2), "acknowledged results are not sent again unasked")
	assert.Equal(t, outbox.AdmitDone, o2.Admit("r2"), "the command comes again: the server lost them")
	assert.Equal(t, []*protocol.ClientMessage{r2}, replies(o2))
	markSent(t, o2, "r2")
	assert.Equal(t, outbox.AdmitDone, o2.Admit("r1"))
	assert.Equal(t, []*protocol.ClientMessage{r1}, replies(o2))
}

func TestOutboxSendsWhatWasNotAcknowledgedAgainOnANewLink(t *testing.T) {
	o, _ := newJournal(t, testLimits).open()
	r1 := ranToEnd(t, o, "r1", "one")
	ranToEnd(t, o, "r2", "two")
	markSent(t, o, "r1")
	markSent(t, o, "r2")
	o.Delivered("req-r2")
	assert.Empty(t, replies(o))
	assert.Equal(t, []*protocol.ClientMessage{r1}, repliesOn(o, testLink+1))
	assert.Equal(t, 1, o.Undelivered())
}

func TestOutboxTornOrCorruptTailIsDroppedAndTheRestKept(t *testing.T) {
	for name, damage := range map[string]func([]byte) []byte{
		"torn last record": func(b []byte) []byte { return b[:len(b)-3] },
		"flipped bit":      func(b []byte) []byte { b[len(b)-1] ^= 1; return b },
		"garbage appended": func(b []byte) []byte { return append(b, 0, 0, 1, 0, 0xde, 0xad) },
	} {
		t.Run(name, func(t *testing.T) {
			j := newJournal(t, testLimits)
			o, _ := j.open()
			r1 := ranToEnd(t, o, "r1", "kept")
			r2 := ranToEnd(t, o, "r2", "last record")
			// As a crash leaves it: the damage is to the records, and the
			// file's size is what the zeros ahead of them made it.
			b, err := os.ReadFile(j.path)
			require.NoError(t, err)
			damaged := damage(slices.Clone(journalRecords(t, j.path)))
			require.Less(t, len(damaged), len(b), "zeros ahead of the records")
			require.NoError(t, os.WriteFile(j.path, append(damaged, make([]byte, len(b)-len(damaged))...), 0o600))

			o2, interrupted := j.open()
			want := []*protocol.ClientMessage{r1, r2}
			if name != "garbage appended" {
				want = want[:1]
				assert.Equal(t, []outbox.Accepted{outboxtest.Command("r2")}, interrupted,
					"the results are lost with the tail, the accept record before them is not")
			}
			assert.Equal(t, want, replies(o2))

			// The file is whole again: what is written next survives.
			r3 := ranToEnd(t, o2, "r3", "after repair")
			o3, _ := j.open()
			assert.Equal(t, append(want, r3), replies(o3))
		})
	}
}

func TestOutboxDropsResultsOlderThanMaxAge(t *testing.T) {
	j := newJournal(t, testLimits)
	o, _ := j.open()
	ranToEnd(t, o, "old", "x")
	o.Admit("running")
	require.NoError(t, o.Accept(outboxtest.Command("running")))

	require.NoError(t, o.Prune(time.Now().Add(2*testLimits.MaxAge)))
	assert.Empty(t, replies(o))
	assert.Equal(t, outbox.AdmitRunning, o.Admit("running"), "a command that has not finished is never dropped")
	o2, interrupted := j.open()
	assert.Equal(t, outbox.AdmitNew, o2.Admit("old"), "gone from disk too")
	assert.Len(t, interrupted, 1)
}

func TestOutboxLinesAboutResultsNameTheirCommandAndRequest(t *testing.T) {
	logs := &logtest.Recorder{}
	o, _, err := outbox.Open(filepath.Join(t.TempDir(), "j"), outbox.OSFS{}, protocol.CBOR, testLimits, logs.Logger())
	require.NoError(t, err)
	t.Cleanup(func() { o.Close() })
	ranToEnd(t, o, "old", "x")
	require.NoError(t, o.Prune(time.Now().Add(2*testLimits.MaxAge)))
	logs.RequireIDs(t, "outbox: dropping results never delivered",
		map[string]string{"session_id": "s-old", "response_id": "old", "call_id": "old-c1,old-c2", "request_id": "req-old"})
}

func TestOutboxStaysWithinMaxBytesDroppingDeliveredResultsFirst(t *testing.T) {
	limits := config.OutboxLimits{MaxBytes: 16 << 10, MaxAge: time.Hour}
	j := newJournal(t, limits)
	o, _ := j.open()
	payload := strings.Repeat("x", 1000)
	undelivered := ranToEnd(t, o, "undelivered", payload)
	for i := range 60 {
		id := fmt.Sprintf("r%02d", i)
		ranToEnd(t, o, id, payload)
		o.Delivered("req-" + id)
		fi, err := os.Stat(j.path)
		require.NoError(t, err)
		require.LessOrEqual(t, fi.Size(), limits.MaxBytes, "after %d results", i+1)
	}
	assert.Equal(t, []*protocol.ClientMessage{undelivered}, replies(o), "an undelivered result outlives delivered ones")
	assert.Equal(t, outbox.AdmitDone, o.Admit("r59"), "the newest are kept")
	assert.Equal(t, outbox.AdmitNew, o.Admit("r00"), "the oldest delivered are dropped, tombstones and all")
}

func TestOutboxRewriteKeepsTheAcceptRecordThatTriggeredIt(t *testing.T) {
	j := newJournal(t, config.OutboxLimits{MaxBytes: 1, MaxAge: time.Hour}) // every append rewrites
	o, _ := j.open()
	for i := range 3 {
		id := fmt.Sprintf("r%d", i)
		require.Equal(t, outbox.AdmitNew, o.Admit(id))
		require.NoError(t, o.Accept(outboxtest.Command(id)))
		require.True(t, onDisk(t, j.path)[id], "the accept record of %s is on disk", id)
	}
}

// onDisk is what the file at path holds, replayed without opening it as an
// outbox: whether each response_id has an accept record.
func onDisk(t *testing.T, path string) map[string]bool {
	t.Helper()
	accepted, _ := outbox.Replay(journalRecords(t, path))
	return accepted
}

// journalRecords are the records of the journal at path, which must be
// followed by nothing but zeros: those written ahead of them.
func journalRecords(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	_, good := outbox.Replay(b)
	require.Empty(t, bytes.TrimRight(b[good:], "\x00"), "whole records, then zeros")
	return b[:good]
}

// A command's records take the place of zeros written ahead of them, so
// that the file keeps its size and their fsyncs have no new size to make
// durable; the next open reads the zeros as no torn tail.
func TestOutboxRecordsTakeThePlaceOfZerosWrittenAheadOfThem(t *testing.T) {
	j := newJournal(t, testLimits)
	o, _ := j.open()
	size := fileSize(t, j.path)
	assert.Positive(t, size, "zeros ahead of an empty journal")
	r1 := ranToEnd(t, o, "r1", "one")
	markSent(t, o, "r1")
	_, ok := o.Delivered("req-r1")
	require.True(t, ok)
	assert.Equal(t, "ARD", outboxtest.Kinds(journalRecords(t, j.path)))
	assert.Equal(t, size, fileSize(t, j.path), "the records took the place of zeros")

	o.Close()
	var log logtest.Recorder
	o2, _, err := outbox.Open(j.path, outbox.OSFS{}, protocol.CBOR, testLimits, log.Logger())
	require.NoError(t, err)
	defer o2.Close()
	assert.Equal(t, outbox.AdmitDone, o2.Admit("r1"))
	assert.Equal(t, []*protocol.ClientMessage{r1}, replies(o2))
	assert.False(t, log.Contains("torn"), "%s", log.String())
}

// On a disk too full for zeros ahead, records are written past the end
// of the file, as before there were any; one that does not fit is
// refused, and the file holds whole records only.
func TestOutboxOnADiskTooFullForZerosAheadRecordsStillGoIn(t *testing.T) {
	fs := &outboxtest.RecordingFS{}
	fs.LimitRoom(2000)
	path := filepath.Join(t.TempDir(), "j")
	o, _ := openOn(t, fs, path)
	var accepted []outbox.Accepted
	var err error
	for i := 0; err == nil; i++ {
		id := fmt.Sprintf("r%02d", i)
		require.Equal(t, outbox.AdmitNew, o.Admit(id))
		if err = o.Accept(outboxtest.Command(id)); err == nil {
			accepted = append(accepted, outboxtest.Command(id))
		}
	}
	assert.ErrorIs(t, err, syscall.ENOSPC)
	assert.Greater(t, len(accepted), 2, "records went in with no zeros ahead")
	o.Close()

	_, interrupted := openOn(t, outbox.OSFS{}, path)
	assert.ElementsMatch(t, accepted, interrupted, "each accepted command, and the refused one not")
}

// Once zeros could not be written ahead of the records, each record is
// appended with no attempt at zeros before it: on a full disk each would
// otherwise write, and cut back, up to 256 KiB for nothing. A file too
// small for the zeros of its first step is such a disk.
func TestOutboxOnADiskTooFullForZerosWritesEachRecordOnce(t *testing.T) {
	fs := &outboxtest.RecordingFS{}
	fs.LimitRoom(64 << 10)
	o, _ := openOn(t, fs, filepath.Join(t.TempDir(), "j"))
	before := fs.Writes()
	for i := range 5 {
		id := fmt.Sprintf("r%d", i)
		require.Equal(t, outbox.AdmitNew, o.Admit(id))
		require.NoError(t, o.Accept(outboxtest.Command(id)))
	}
	assert.Equal(t, 5, fs.Writes()-before, "one write a record")
}

// Zeros ahead never take the file past max_bytes: records that go past it
// (commands not finished cannot be dropped) have none after them.
func TestOutboxZerosKeepToMaxBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	limits := config.OutboxLimits{MaxBytes: 4 << 10, MaxAge: time.Hour}
	o, _, err := outbox.Open(path, outbox.OSFS{}, protocol.CBOR, limits, quietLog)
	require.NoError(t, err)
	defer o.Close()
	for i := range 200 {
		id := fmt.Sprintf("r%03d", i)
		require.Equal(t, outbox.AdmitNew, o.Admit(id))
		require.NoError(t, o.Accept(outboxtest.Command(id)))
		records := int64(len(journalRecords(t, path)))
		require.LessOrEqual(t, fileSize(t, path), max(limits.MaxBytes, records), "after %s", id)
	}
}

// fileSize is the size of the file at path.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

func TestOutboxIsUsedByOneAgentAtATime(t *testing.T) {
	j := newJournal(t, testLimits)
	j.open()
	_, _, err := outbox.Open(j.path, outbox.OSFS{}, protocol.CBOR, testLimits, quietLog)
	assert.ErrorContains(t, err, "in use by another aip-agent")
}

func TestOutboxCommandsFinishingTogetherAreAllDurable(t *testing.T) {
	j := newJournal(t, testLimits)
	o, _ := j.open()
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() { ranToEnd(t, o, fmt.Sprintf("r%02d", i), "payload") })
	}
	wg.Wait()
	o2, interrupted := j.open()
	assert.Empty(t, interrupted)
	assert.Len(t, replies(o2), 32, "every result that was reported done is on disk")
}

func TestOutboxOverMaxBytesKeepsATombstoneThatAnswersACopyOfTheCommand(t *testing.T) {
	j := newJournal(t, config.OutboxLimits{MaxBytes: 16 << 10, MaxAge: time.Hour})
	o, _ := j.open()
	payload := strings.Repeat("x", 6000)
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		ranToEnd(t, o, id, payload) // never delivered
	}
	assert.Equal(t, outbox.AdmitDone, o.Admit("r1"), "the oldest, shed for size, is still known: a copy is not run")
	got := replies(o)
	require.Len(t, got, 4, "every command is answered")
	assert.Equal(t, "req-r1", got[0].RequestID)
	for _, r := range got[0].ActionResults {
		assert.Equal(t, protocol.ResultFailure, r.Status)
		assert.Equal(t, "results dropped: the agent's outbox was over outbox.max_bytes", r.Error)
	}
	assert.Equal(t, []string{"r1-c1", "r1-c2"}, protocol.ResultCallIDs(got[0].ActionResults))
	assert.Equal(t, outboxtest.Results("r4", payload), got[3], "the newest are kept whole")

	o2, _ := j.open()
	assert.Equal(t, outbox.AdmitDone, o2.Admit("r1"), "the tombstone is on disk")
	assert.Equal(t, got, replies(o2))
}

func TestOutboxKeepsAResultLargerThanMaxBytesUntilItIsDelivered(t *testing.T) {
	j := newJournal(t, config.OutboxLimits{MaxBytes: 4 << 10, MaxAge: time.Hour})
	o, _ := j.open()
	ranToEnd(t, o, "big", strings.Repeat("x", 8000))
	assert.Equal(t, []string{"req-big"}, requestIDs(o), "recorded as done, so it must be sent")
	o2, _ := j.open()
	assert.Equal(t, []string{"req-big"}, requestIDs(o2), "and it is on disk")
}

func TestOutboxAResultThatGoesOutOnALinkThatWasReplacedIsSentOnTheNewOne(t *testing.T) {
	o, _ := newJournal(t, testLimits).open()
	r1 := ranToEnd(t, o, "r1", "x")
	going := o.Unsent(testLink)[0]
	o.MarkSent(going, testLink) // the send completes after link testLink+1 registered
	assert.Equal(t, []*protocol.ClientMessage{r1}, repliesOn(o, testLink+1), "not sent on the new link yet")
}

func TestOutboxWritesGoToTheRewrittenFileEvenIfItsDirectoryFsyncFailed(t *testing.T) {
	fs := &outboxtest.RecordingFS{}
	path := filepath.Join(t.TempDir(), "j")
	o, _ := openOn(t, fs, path)
	ranToEnd(t, o, "old", "x")
	fs.FailDirSyncs(1)
	assert.ErrorContains(t, o.Prune(time.Now().Add(2*testLimits.MaxAge)), "fsync its directory: syncdir")

	ranToEnd(t, o, "r1", "after the rewrite")
	assert.True(t, outboxtest.Between(fs.Log(), "write A r1", "syncdir", "write R r1"),
		"the accept record's fsync fsyncs the directory again: %q", fs.Log())
	o.Close()
	o2, _ := openOn(t, outbox.OSFS{}, path)
	assert.Equal(t, []string{"req-r1"}, requestIDs(o2), "written to the journal, not to the file it replaced")
}

func TestOutboxARewriteThatFailsDropsNothing(t *testing.T) {
	fs := &outboxtest.RecordingFS{}
	path := filepath.Join(t.TempDir(), "j")
	o, _ := openOn(t, fs, path)
	old := ranToEnd(t, o, "old", "x")
	fs.FailCreates(1) // say the disk is full
	assert.ErrorContains(t, o.Prune(time.Now().Add(2*testLimits.MaxAge)), "injected failure")

	assert.Equal(t, outbox.AdmitDone, o.Admit("old"), "still known, as it is in the file")
	assert.Equal(t, []*protocol.ClientMessage{old}, replies(o), "and its results still go out")
	o.Close()
	o2, _ := openOn(t, outbox.OSFS{}, path)
	assert.Equal(t, []string{"req-old"}, requestIDs(o2))
}

func TestOutboxTombstonesAreBoundedBySizeAndAge(t *testing.T) {
	limits := config.OutboxLimits{MaxBytes: 16 << 10, MaxAge: time.Hour}
	o, _ := newJournal(t, limits).open()
	payload := strings.Repeat("x", 1000)
	for i := range 200 {
		id := fmt.Sprintf("r%03d", i)
		ranToEnd(t, o, id, payload)
		o.Delivered("req-" + id)
	}
	var tombs []string
	var tombBytes int64
	for id, size := range o.Tombstones() {
		tombs = append(tombs, id)
		tombBytes += size
	}
	assert.NotEmpty(t, tombs)
	assert.LessOrEqual(t, tombBytes, limits.MaxBytes/4, "tombstones take at most a quarter of max_bytes")
	assert.Equal(t, outbox.AdmitNew, o.Admit("r000"), "the oldest tombstones are forgotten")
	assert.Equal(t, outbox.AdmitDone, o.Admit(slices.Max(tombs)), "the newer ones are kept")

	require.NoError(t, o.Prune(time.Now().Add(2*limits.MaxAge)))
	assert.Equal(t, outbox.AdmitNew, o.Admit(slices.Max(tombs)), "tombstones age out as results do")
}

func TestOutboxRecordsTheBytesTheLinkSends(t *testing.T) {
	for _, enc := range []protocol.Encoding{protocol.CBOR, protocol.JSON} {
		j := newJournal(t, testLimits)
		j.enc = enc
		o, _ := j.open()
		require.Equal(t, outbox.AdmitNew, o.Admit("r1"))
		require.NoError(t, o.Accept(outboxtest.Command("r1")))
		r, err := reply.Encode(outboxtest.Results("r1", "x"), enc, quietLog)
		require.NoError(t, err)
		require.NoError(t, o.Complete(r))

		b, err := os.ReadFile(j.path)
		require.NoError(t, err)
		assert.True(t, bytes.Contains(b, r.Frame().Data), "%s: the frame is in the journal as it is", enc)
		assert.Equal(t, r.Frame(), o.Unsent(testLink)[0].Reply.Frame(), "%s: and goes out as it is", enc)
		o2, _ := j.open()
		assert.Equal(t, r.Frame(), o2.Unsent(testLink)[0].Reply.Frame(), "%s: after a restart too", enc)
	}
}

// oldRecord is a record as the outbox wrote it before it kept replies
// encoded: the reply a message in the record.
type oldRecord struct {
	Kind       string                  `cbor:"k"`
	ResponseID string                  `cbor:"id"`
	At         int64                   `cbor:"at"`
	SessionID  string                  `cbor:"sid,omitempty"`
	Status     protocol.TaskStatus     `cbor:"st,omitempty"`
	CallIDs    []string                `cbor:"calls,omitempty"`
	Reply      *protocol.ClientMessage `cbor:"reply,omitempty"`
	Tomb       bool                    `cbor:"tomb,omitempty"`
}

// oldJournal is a journal as the agent wrote it before it kept replies
// encoded: r3 accepted and running, r1's results delivered, r2's not.
func oldJournal(t *testing.T, at time.Time) []byte {
	t.Helper()
	ms := at.UnixMilli()
	var out []byte
	for _, rec := range []oldRecord{
		{Kind: "A", ResponseID: "r3", At: ms, SessionID: "s-r3", Status: protocol.StatusContinue, CallIDs: []string{"r3-c1", "r3-c2"}},
		{Kind: "R", ResponseID: "r1", At: ms, Reply: outboxtest.Results("r1", "one")},
		{Kind: "D", ResponseID: "r1", At: ms},
		{Kind: "R", ResponseID: "r2", At: ms, Reply: outboxtest.Results("r2", "two")},
	} {
		payload, err := protocol.CBOR.Marshal(&rec)
		require.NoError(t, err)
		out = binary.BigEndian.AppendUint32(out, uint32(len(payload)))
		out = binary.BigEndian.AppendUint32(out, crc32.Checksum(payload, crc32.MakeTable(crc32.Castagnoli)))
		out = append(out, payload...)
	}
	return out
}

func TestOutboxTakesAJournalWrittenBeforeRepliesWereKeptEncoded(t *testing.T) {
	old := oldJournal(t, time.Now())
	j := newJournal(t, testLimits)
	require.NoError(t, os.WriteFile(j.path, old, 0o600))
	o, interrupted := j.open()
	assert.Equal(t, []outbox.Accepted{outboxtest.Command("r3")}, interrupted)
	assert.Equal(t, []*protocol.ClientMessage{outboxtest.Results("r2", "two")}, replies(o))
	assert.Equal(t, outbox.AdmitDone, o.Admit("r1"))
	assert.Equal(t, old, journalRecords(t, j.path), "rewritten at open to the same records: the format did not change for CBOR")

	// An agent that speaks JSON to a UFO server: the results go out as JSON.
	require.NoError(t, os.WriteFile(j.path, old, 0o600))
	j.enc = protocol.JSON
	o, _ = j.open()
	assert.Equal(t, outbox.AdmitDone, o.Admit("r1"))
	p := o.Unsent(testLink)
	require.Len(t, p, 2)
	for _, p := range p {
		assert.Equal(t, protocol.JSON, p.Reply.Frame().Encoding)
	}
	assert.Equal(t, []*protocol.ClientMessage{outboxtest.Results("r1", "one"), outboxtest.Results("r2", "two")}, replies(o))
}

func TestOutboxEncodesAnewResultsRecordedInTheOtherEncoding(t *testing.T) {
	j := newJournal(t, testLimits)
	j.enc = protocol.JSON
	o, _ := j.open()
	require.Equal(t, outbox.AdmitNew, o.Admit("r1"))
	require.NoError(t, o.Accept(outboxtest.Command("r1")))
	r1 := outboxtest.Results("r1", "x")
	r, err := reply.Encode(r1, protocol.JSON, quietLog)
	require.NoError(t, err)
	require.NoError(t, o.Complete(r))

	j.enc = protocol.CBOR // the operator switched the agent to our server
	o2, _ := j.open()
	p := o2.Unsent(testLink)
	require.Len(t, p, 1)
	assert.Equal(t, protocol.CBOR, p[0].Reply.Frame().Encoding)
	assert.Equal(t, []*protocol.ClientMessage{r1}, replies(o2))
}

// A tool that prints bytes that are not text: the results are recorded as
// they are sent, with U+FFFD in their place, so that the journal still
// reads back whole after a restart, those results and the ones after them.
func TestOutboxResultsWithInvalidUTF8SurviveARestart(t *testing.T) {
	j := newJournal(t, testLimits)
	o, _ := j.open()
	require.Equal(t, outbox.AdmitNew, o.Admit("r1"))
	require.NoError(t, o.Accept(outboxtest.Command("r1")))
	require.NoError(t, o.Complete(encoded(t, outboxtest.Results("r1", "bad \xff"))))
	r2 := ranToEnd(t, o, "r2", "fine")

	o2, interrupted := j.open()
	assert.Empty(t, interrupted)
	fixed := outboxtest.Results("r1", "bad \ufffd")
	fixed.ClientType = protocol.ClientDevice // the fix goes through the decoder, which fills it in
	assert.Equal(t, []*protocol.ClientMessage{fixed, r2}, replies(o2))
}

// Results whose record did not fit on a full disk are delivered from
// memory, and the server's ack of them is recorded: the journal then holds
// A and D for the command, and no R. After a restart the command is
// reported interrupted, and the outbox owes nothing until it is completed
// again: no results to send, none to count.
func TestOutboxAnAckRecordedForResultsThatWereNotLeavesNothingOwedAfterARestart(t *testing.T) {
	fs := &outboxtest.RecordingFS{}
	fs.LimitRoom(1000) // room for A and D, not for R
	path := filepath.Join(t.TempDir(), "j")
	o, _ := openOn(t, fs, path)
	require.Equal(t, outbox.AdmitNew, o.Admit("r1"))
	require.NoError(t, o.Accept(outboxtest.Command("r1")))
	require.ErrorIs(t, o.Complete(encoded(t, outboxtest.Results("r1", strings.Repeat("x", 2000)))), syscall.ENOSPC)
	markSent(t, o, "r1")
	_, ok := o.Delivered("req-r1")
	require.True(t, ok)
	o.Close()
	require.Equal(t, "AD", outboxtest.Kinds(journalRecords(t, path)), "the ack went in where the results did not")

	o2, interrupted := openOn(t, outbox.OSFS{}, path)
	assert.Equal(t, []outbox.Accepted{outboxtest.Command("r1")}, interrupted)
	assert.Zero(t, o2.Undelivered(), "no results owed before the command is completed again")
	assert.NotPanics(t, func() { o2.Unsent(testLink) }, "an entry without results is not owed")
}

// A failed fsync (an I/O error) loses the writes it was to make durable:
// Linux marks their pages clean, and no later fsync writes them. So the
// outbox writes the journal again whole, from memory, which makes the
// record durable after all; if that fails too, the command is not run,
// and the next record's fsync tries again. Either way a command accepted
// after the failure is on disk once its own fsync succeeded, or it would
// run again when the server sends it after a power loss.
func TestOutboxACommandAcceptedAfterAFailedFsyncSurvivesAPowerLoss(t *testing.T) {
	for _, failures := range []int{1, 2} {
		t.Run(fmt.Sprintf("failures=%d", failures), func(t *testing.T) {
			fs := &outboxtest.RecordingFS{}
			path := filepath.Join(t.TempDir(), "j")
			o, _ := openOn(t, fs, path)
			require.Equal(t, outbox.AdmitNew, o.Admit("r1"))
			fs.FailSyncs(failures)
			err := o.Accept(outboxtest.Command("r1"))
			ran := err == nil
			if failures == 1 {
				require.NoError(t, err, "the journal written again holds r1's acceptance")
			} else {
				require.ErrorIs(t, err, syscall.EIO, "r1 does not run")
			}
			// Answered as the executor would: with its results, or failures
			// saying it did not run.
			require.NoError(t, o.Complete(encoded(t, outboxtest.Results("r1", map[bool]string{true: "ran", false: "not run"}[ran]))))
			require.Equal(t, outbox.AdmitNew, o.Admit("r2"))
			require.NoError(t, o.Accept(outboxtest.Command("r2")), "r2 runs")
			require.NoError(t, fs.PowerLoss())
			o.Close()

			o2, interrupted := openOn(t, outbox.OSFS{}, path)
			assert.Equal(t, []outbox.Accepted{outboxtest.Command("r2")}, interrupted, "r2 is reported as interrupted")
			assert.Equal(t, outbox.AdmitRunning, o2.Admit("r2"), "not run a second time")
			assert.Equal(t, outbox.AdmitDone, o2.Admit("r1"), "r1's results are kept")
		})
	}
}
