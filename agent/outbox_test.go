package agent

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

var testLimits = OutboxLimits{MaxBytes: 1 << 20, MaxAge: time.Hour}

// testJournal opens outboxes on one file as successive runs of the agent
// would: each open first kills the outbox open before, which writes
// nothing more, as a killed process leaves its file.
type testJournal struct {
	t      *testing.T
	path   string
	limits OutboxLimits
	cur    *outbox
}

func newJournal(t *testing.T, limits OutboxLimits) *testJournal {
	j := &testJournal{t: t, path: filepath.Join(t.TempDir(), "j"), limits: limits}
	t.Cleanup(func() {
		if j.cur != nil {
			j.cur.close()
		}
	})
	return j
}

func (j *testJournal) open() (*outbox, []acceptedCommand) {
	j.t.Helper()
	if j.cur != nil {
		kill(j.cur)
	}
	o, interrupted, err := openOutbox(j.path, osFS{}, j.limits, quietLog)
	require.NoError(j.t, err)
	j.cur = o
	return o, interrupted
}

// kill drops o's file and lock as the death of its process would.
func kill(o *outbox) {
	o.f.Close()
	o.lock.Close()
}

func testCommand(id string) acceptedCommand {
	return acceptedCommand{ResponseID: id, SessionID: "s-" + id, Status: protocol.StatusContinue, CallIDs: []string{id + "-c1", id + "-c2"}}
}

func testReply(id, payload string) *protocol.ClientMessage {
	return &protocol.ClientMessage{
		Type: protocol.ClientCommandResults, Status: protocol.StatusContinue, ClientID: "dev-1", SessionID: "s-" + id,
		RequestID: "req-" + id, PrevResponseID: id, ActionResults: []protocol.Result{
			{Status: protocol.ResultSuccess, CallID: id + "-c1", Result: map[string]any{"payload": payload}},
			{Status: protocol.ResultSkipped, CallID: id + "-c2", Error: skippedError},
		},
	}
}

// ranToEnd takes id through admission, acceptance and completion, as a command
// that ran to the end.
func ranToEnd(t *testing.T, o *outbox, id, payload string) *protocol.ClientMessage {
	t.Helper()
	require.Equal(t, admitNew, o.admit(id))
	require.NoError(t, o.accept(testCommand(id)))
	reply := testReply(id, payload)
	require.NoError(t, o.complete(reply))
	return reply
}

// testLink is the number of the link the outbox tests send on.
const testLink = 1

// replies lists the results the outbox has yet to send on testLink.
func replies(o *outbox) []*protocol.ClientMessage { return repliesOn(o, testLink) }

func repliesOn(o *outbox, link uint64) []*protocol.ClientMessage {
	var out []*protocol.ClientMessage
	for _, p := range o.unsent(link) {
		out = append(out, p.reply)
	}
	return out
}

// requestIDs lists the request_ids of the results the outbox has yet to
// send.
func requestIDs(o *outbox) []string {
	var out []string
	for _, r := range replies(o) {
		out = append(out, r.RequestID)
	}
	return out
}

// markSent marks the results of id sent on testLink, as delivery does.
func markSent(t *testing.T, o *outbox, id string) {
	t.Helper()
	for _, p := range o.unsent(testLink) {
		if p.reply.PrevResponseID == id {
			o.markSent(p, testLink)
			return
		}
	}
	t.Fatalf("no unsent results for %s", id)
}

func TestOutboxACopyThatArrivesWhileResultsGoOutIsAnsweredToo(t *testing.T) {
	o, _ := newJournal(t, testLimits).open()
	r1 := ranToEnd(t, o, "r1", "x")
	going := o.unsent(testLink)[0]
	assert.Equal(t, admitDone, o.admit("r1"), "the command again, while its results are on the wire")
	o.markSent(going, testLink)
	assert.Equal(t, []*protocol.ClientMessage{r1}, replies(o), "they go out once more, for the copy")
	markSent(t, o, "r1")
	assert.Empty(t, replies(o))
}

func TestOutboxAdmitsEachResponseIDOnce(t *testing.T) {
	o, _ := newJournal(t, testLimits).open()
	assert.Equal(t, admitNew, o.admit("r1"))
	assert.Equal(t, admitRunning, o.admit("r1"), "a copy that arrives while the first waits to run")
	o.forget("r1")
	assert.Equal(t, admitNew, o.admit("r1"), "a command that never started may come again")
	require.NoError(t, o.accept(testCommand("r1")))
	assert.Equal(t, admitRunning, o.admit("r1"))
	require.NoError(t, o.complete(testReply("r1", "x")))
	assert.Equal(t, admitDone, o.admit("r1"))
}

func TestOutboxCrashAfterAcceptReportsTheCommandInterrupted(t *testing.T) {
	j := newJournal(t, testLimits)
	o, _ := j.open()
	o.admit("r1")
	require.NoError(t, o.accept(testCommand("r1")))
	ranToEnd(t, o, "r2", "done before the crash")

	o2, interrupted := j.open()
	assert.Equal(t, []acceptedCommand{testCommand("r1")}, interrupted, "what it needs to answer each call")
	assert.Equal(t, admitRunning, o2.admit("r1"), "not run again while its failure is being recorded")
	assert.Equal(t, admitDone, o2.admit("r2"))
}

func TestOutboxCrashBeforeAcceptLeavesNoTrace(t *testing.T) {
	j := newJournal(t, testLimits)
	o, _ := j.open()
	o.admit("r1") // received, waiting for a slot

	o2, interrupted := j.open()
	assert.Empty(t, interrupted)
	assert.Equal(t, admitNew, o2.admit("r1"), "the server sends it again and it runs once")
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
	assert.NotNil(t, o.delivered("req-r1"))
	assert.NotNil(t, o.delivered("req-r2"))
	assert.Nil(t, o.delivered("req-unknown"), "an ack of something else")

	o2, _ := j.open()
	assert.Empty(t, replies(o2), "acknowledged results are not sent again unasked")
	assert.Equal(t, admitDone, o2.admit("r2"), "the command comes again: the server lost them")
	assert.Equal(t, []*protocol.ClientMessage{r2}, replies(o2))
	markSent(t, o2, "r2")
	assert.Equal(t, admitDone, o2.admit("r1"))
	assert.Equal(t, []*protocol.ClientMessage{r1}, replies(o2))
}

func TestOutboxSendsWhatWasNotAcknowledgedAgainOnANewLink(t *testing.T) {
	o, _ := newJournal(t, testLimits).open()
	r1 := ranToEnd(t, o, "r1", "one")
	ranToEnd(t, o, "r2", "two")
	markSent(t, o, "r1")
	markSent(t, o, "r2")
	o.delivered("req-r2")
	assert.Empty(t, replies(o))
	assert.Equal(t, []*protocol.ClientMessage{r1}, repliesOn(o, testLink+1))
	assert.Equal(t, 1, o.undelivered())
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
			b, err := os.ReadFile(j.path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(j.path, damage(b), 0o600))

			o2, interrupted := j.open()
			want := []*protocol.ClientMessage{r1, r2}
			if name != "garbage appended" {
				want = want[:1]
				assert.Equal(t, []acceptedCommand{testCommand("r2")}, interrupted,
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
	o.admit("running")
	require.NoError(t, o.accept(testCommand("running")))

	require.NoError(t, o.prune(time.Now().Add(2*testLimits.MaxAge)))
	assert.Empty(t, replies(o))
	assert.Equal(t, admitRunning, o.admit("running"), "a command that has not finished is never dropped")
	o2, interrupted := j.open()
	assert.Equal(t, admitNew, o2.admit("old"), "gone from disk too")
	assert.Len(t, interrupted, 1)
}

func TestOutboxLinesAboutResultsNameTheirCommandAndRequest(t *testing.T) {
	logs := &logRecorder{}
	o, _, err := openOutbox(filepath.Join(t.TempDir(), "j"), osFS{}, testLimits, logs.logger())
	require.NoError(t, err)
	t.Cleanup(func() { o.close() })
	ranToEnd(t, o, "old", "x")
	require.NoError(t, o.prune(time.Now().Add(2*testLimits.MaxAge)))
	logs.requireIDs(t, "outbox: dropping results never delivered",
		map[string]string{"session_id": "s-old", "response_id": "old", "call_id": "old-c1,old-c2", "request_id": "req-old"})
}

func TestOutboxStaysWithinMaxBytesDroppingDeliveredResultsFirst(t *testing.T) {
	limits := OutboxLimits{MaxBytes: 16 << 10, MaxAge: time.Hour}
	j := newJournal(t, limits)
	o, _ := j.open()
	payload := strings.Repeat("x", 1000)
	undelivered := ranToEnd(t, o, "undelivered", payload)
	for i := range 60 {
		id := fmt.Sprintf("r%02d", i)
		ranToEnd(t, o, id, payload)
		o.delivered("req-" + id)
		fi, err := os.Stat(j.path)
		require.NoError(t, err)
		require.LessOrEqual(t, fi.Size(), limits.MaxBytes, "after %d results", i+1)
	}
	assert.Equal(t, []*protocol.ClientMessage{undelivered}, replies(o), "an undelivered result outlives delivered ones")
	assert.Equal(t, admitDone, o.admit("r59"), "the newest are kept")
	assert.Equal(t, admitNew, o.admit("r00"), "the oldest delivered are dropped, tombstones and all")
}

func TestOutboxRewriteKeepsTheAcceptRecordThatTriggeredIt(t *testing.T) {
	j := newJournal(t, OutboxLimits{MaxBytes: 1, MaxAge: time.Hour}) // every append rewrites
	o, _ := j.open()
	for i := range 3 {
		id := fmt.Sprintf("r%d", i)
		require.Equal(t, admitNew, o.admit(id))
		require.NoError(t, o.accept(testCommand(id)))
		require.True(t, onDisk(t, j.path)[id].accepted, "the accept record of %s is on disk", id)
	}
}

// onDisk is what the file at path holds, replayed without opening it as an
// outbox.
func onDisk(t *testing.T, path string) map[string]*outboxEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	o := &outbox{entries: map[string]*outboxEntry{}, owed: map[*outboxEntry]struct{}{}, byRequest: map[string]string{}}
	require.Equal(t, int64(len(data)), o.replay(data), "whole records only")
	return o.entries
}

func TestOutboxIsUsedByOneAgentAtATime(t *testing.T) {
	j := newJournal(t, testLimits)
	j.open()
	_, _, err := openOutbox(j.path, osFS{}, testLimits, quietLog)
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
	j := newJournal(t, OutboxLimits{MaxBytes: 16 << 10, MaxAge: time.Hour})
	o, _ := j.open()
	payload := strings.Repeat("x", 6000)
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		ranToEnd(t, o, id, payload) // never delivered
	}
	assert.Equal(t, admitDone, o.admit("r1"), "the oldest, shed for size, is still known: a copy is not run")
	got := replies(o)
	require.Len(t, got, 4, "every command is answered")
	assert.Equal(t, "req-r1", got[0].RequestID)
	for _, r := range got[0].ActionResults {
		assert.Equal(t, protocol.ResultFailure, r.Status)
		assert.Equal(t, "results dropped: the agent's outbox was over outbox.max_bytes", r.Error)
	}
	assert.Equal(t, []string{"r1-c1", "r1-c2"}, protocol.ResultCallIDs(got[0].ActionResults))
	assert.Equal(t, testReply("r4", payload), got[3], "the newest are kept whole")

	o2, _ := j.open()
	assert.Equal(t, admitDone, o2.admit("r1"), "the tombstone is on disk")
	assert.Equal(t, got, replies(o2))
}

func TestOutboxKeepsAResultLargerThanMaxBytesUntilItIsDelivered(t *testing.T) {
	j := newJournal(t, OutboxLimits{MaxBytes: 4 << 10, MaxAge: time.Hour})
	o, _ := j.open()
	ranToEnd(t, o, "big", strings.Repeat("x", 8000))
	assert.Equal(t, []string{"req-big"}, requestIDs(o), "recorded as done, so it must be sent")
	o2, _ := j.open()
	assert.Equal(t, []string{"req-big"}, requestIDs(o2), "and it is on disk")
}

func TestOutboxAResultThatGoesOutOnALinkThatWasReplacedIsSentOnTheNewOne(t *testing.T) {
	o, _ := newJournal(t, testLimits).open()
	r1 := ranToEnd(t, o, "r1", "x")
	going := o.unsent(testLink)[0]
	o.markSent(going, testLink) // the send completes after link testLink+1 registered
	assert.Equal(t, []*protocol.ClientMessage{r1}, repliesOn(o, testLink+1), "not sent on the new link yet")
}

func TestOutboxWritesGoToTheRewrittenFileEvenIfItsDirectoryFsyncFailed(t *testing.T) {
	fs := &recordingFS{}
	path := filepath.Join(t.TempDir(), "j")
	o, _, err := openOutbox(path, fs, testLimits, quietLog)
	require.NoError(t, err)
	ranToEnd(t, o, "old", "x")
	fs.mu.Lock()
	fs.failDirSyncs = 1
	fs.mu.Unlock()
	assert.ErrorContains(t, o.prune(time.Now().Add(2*testLimits.MaxAge)), "fsync its directory: syncdir")

	ranToEnd(t, o, "r1", "after the rewrite")
	assert.True(t, between(fs.log(), "write A r1", "syncdir", "write R r1"),
		"the accept record's fsync fsyncs the directory again: %q", fs.log())
	kill(o)
	o2, _, err := openOutbox(path, osFS{}, testLimits, quietLog)
	require.NoError(t, err)
	t.Cleanup(func() { o2.close() })
	assert.Equal(t, []string{"req-r1"}, requestIDs(o2), "written to the journal, not to the file it replaced")
}

func TestOutboxARewriteThatFailsDropsNothing(t *testing.T) {
	fs := &recordingFS{}
	path := filepath.Join(t.TempDir(), "j")
	o, _, err := openOutbox(path, fs, testLimits, quietLog)
	require.NoError(t, err)
	old := ranToEnd(t, o, "old", "x")
	fs.mu.Lock()
	fs.failCreates = 1 // say the disk is full
	fs.mu.Unlock()
	assert.ErrorContains(t, o.prune(time.Now().Add(2*testLimits.MaxAge)), "injected failure")

	assert.Equal(t, admitDone, o.admit("old"), "still known, as it is in the file")
	assert.Equal(t, []*protocol.ClientMessage{old}, replies(o), "and its results still go out")
	kill(o)
	o2, _, err := openOutbox(path, osFS{}, testLimits, quietLog)
	require.NoError(t, err)
	t.Cleanup(func() { o2.close() })
	assert.Equal(t, []string{"req-old"}, requestIDs(o2))
}

func TestOutboxTombstonesAreBoundedBySizeAndAge(t *testing.T) {
	limits := OutboxLimits{MaxBytes: 16 << 10, MaxAge: time.Hour}
	o, _ := newJournal(t, limits).open()
	payload := strings.Repeat("x", 1000)
	for i := range 200 {
		id := fmt.Sprintf("r%03d", i)
		ranToEnd(t, o, id, payload)
		o.delivered("req-" + id)
	}
	var tombs []string
	var tombBytes int64
	for id, e := range o.entries {
		if e.tomb {
			tombs = append(tombs, id)
			tombBytes += e.size
		}
	}
	assert.NotEmpty(t, tombs)
	assert.LessOrEqual(t, tombBytes, limits.MaxBytes/4, "tombstones take at most a quarter of max_bytes")
	assert.Equal(t, admitNew, o.admit("r000"), "the oldest tombstones are forgotten")
	assert.Equal(t, admitDone, o.admit(slices.Max(tombs)), "the newer ones are kept")

	require.NoError(t, o.prune(time.Now().Add(2*limits.MaxAge)))
	assert.Equal(t, admitNew, o.admit(slices.Max(tombs)), "tombstones age out as results do")
}
