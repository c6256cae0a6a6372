package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// execAsync runs a command through the API in the background.
func (c *cluster) execAsync(id string, req api.CommandRequest) <-chan api.CommandResponse {
	done := make(chan api.CommandResponse, 1)
	go func() {
		resp, err := c.api.Command(context.Background(), id, req)
		if err != nil {
			resp.Status = "error: " + err.Error()
		}
		done <- resp
	}()
	return done
}

// startKioskProcess enrolls kiosk-1 and runs its agent as a process, with
// a data dir, a dir its tools may write files in, and the two tools these
// tests run (write_file and pause), and waits until it is online and its
// tools are ready. An agent prepares its tools in the background once it
// starts, and a command that comes first waits for them: on a fresh
// compile cache under load, that wait was seen to spend the whole 10 s
// shutdown grace (with the stock tools in Go, seconds each to compile).
func (c *cluster) startKioskProcess() (p *agentProcess, data, files string) {
	c.t.Helper()
	data, files = c.t.TempDir(), c.t.TempDir()
	p = newAgentProcess(c.t, agentYAMLWithTools(c.t, "kiosk-1", c.wsURL(), c.enroll("kiosk-1"), data, files, "stock="+appendAndPause(c.t)))
	p.start()
	c.waitOnline("kiosk-1", true)
	p.waitLogged("tools instrumented")
	return p, data, files
}

func TestSIGTERMFinishesTheCommandInFlightAndExitsCleanly(t *testing.T) {
	c := newCluster(t)
	p, data, files := c.startKioskProcess()

	done := c.execAsync("kiosk-1", api.CommandRequest{Timeout: "30s", Actions: []protocol.Command{
		{ToolName: "pause", Parameters: map[string]any{"ms": 1500}},
		{ToolName: "write_file", Parameters: map[string]any{"path": filepath.Join(files, "done.txt"), "content": "finished"}},
	}})
	// Stopped once the command is in the outbox, so that it is in flight:
	// a command only received when shutdown begins is not taken, and the
	// server fails it as its device shut down.
	p.waitLogged("command received")
	c.waitRecordedInOutbox(filepath.Join(data, "outbox", "kiosk-1.journal"))
	require.NoError(t, p.term(), "exit status 0")

	resp := <-done
	require.Equal(t, "success", resp.Status, "%+v", resp.Results)
	got, err := os.ReadFile(filepath.Join(files, "done.txt"))
	require.NoError(t, err)
	assert.Equal(t, "finished", string(got))
	assert.True(t, p.logged("shutting down: taking no new commands"))
	c.waitOnline("kiosk-1", false)
}

func TestAnAgentKilledMidCommandReportsItAfterRestartWithoutRunningItAgain(t *testing.T) {
	c := newCluster(t)
	p, data, files := c.startKioskProcess()

	marker := filepath.Join(files, "after-pause.txt")
	done := c.execAsync("kiosk-1", api.CommandRequest{Timeout: "60s", Actions: []protocol.Command{
		{ToolName: "pause", Parameters: map[string]any{"ms": 5000}},
		{ToolName: "write_file", Parameters: map[string]any{"path": marker, "content": "ran"}},
	}})
	// Killed once the command is in the outbox, so that it has been taken
	// (the agent logs "command received" before it records it: a kill
	// before then loses it, and the server sends it again to be run once).
	p.waitLogged("command received")
	c.waitRecordedInOutbox(filepath.Join(data, "outbox", "kiosk-1.journal"))
	p.kill()
	p.start()

	resp := <-done
	require.Len(t, resp.Results, 2, "%+v", resp)
	for _, r := range resp.Results {
		assert.Equal(t, protocol.ResultFailure, r.Status)
		assert.Equal(t, "agent restarted while the command ran", r.Error)
	}
	_, err := os.Stat(marker)
	assert.ErrorIs(t, err, os.ErrNotExist, "the command was not run again")
}

// waitRecordedInOutbox waits until the agent's outbox journal holds the
// response_id of the one command running on the server.
func (c *cluster) waitRecordedInOutbox(journal string) {
	c.t.Helper()
	require.EventuallyWithT(c.t, func(t *assert.CollectT) {
		page, err := c.api.TaskPage(context.Background(), api.TaskQuery{State: api.StateRunning})
		require.NoError(t, err)
		require.Len(t, page.Tasks, 1)
		task, err := c.api.Task(context.Background(), page.Tasks[0].SessionID)
		require.NoError(t, err)
		require.Len(t, task.Commands, 1)
		b, err := os.ReadFile(journal)
		require.NoError(t, err)
		assert.True(t, bytes.Contains(b, []byte(task.Commands[0].ResponseID)), "journal holds %s", task.Commands[0].ResponseID)
	}, 20*time.Second, 20*time.Millisecond)
}

// The machine dies after the agent sent a command's results and before
// the fsync of their record ended, which the sending does not wait for
// (agent/RATIONALE.md, "Crash points"): the disk keeps the command's
// accept record and nothing after it. After the restart the agent
// reports the command as interrupted; the server, which recorded the real
// results, keeps them and acknowledges the report as a repeat; and the
// command is not run again.
func TestResultsSentBeforeAPowerLossKeepTheirOutcome(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	p, data, files := c.startKioskProcess()

	marker := filepath.Join(files, "ran.txt")
	resp, err := c.api.Command(ctx, "kiosk-1", api.CommandRequest{Actions: []protocol.Command{
		{ToolName: "write_file", Parameters: map[string]any{"path": marker, "content": "ran"}},
	}})
	require.NoError(t, err)
	require.True(t, resp.Succeeded(), "%+v", resp)
	p.kill()
	require.NoError(t, os.Remove(marker))
	journal := filepath.Join(data, "outbox", "kiosk-1.journal")
	cutAfterAccept(t, journal, resp.ResponseID)
	p.start()

	p.waitLogged("command was running when the agent died; reporting it as failed")
	require.Eventually(t, func() bool { return journalKinds(t, journal, resp.ResponseID) == "ARD" }, 30*time.Second, 20*time.Millisecond,
		"the server acknowledges the report (a D record after its R)")
	task, err := c.api.Task(ctx, resp.SessionID)
	require.NoError(t, err)
	require.Len(t, task.Commands, 1)
	assert.Equal(t, resp.Results, task.Commands[0].Results, "the results the server recorded stand")
	audit, err := c.api.Audit(ctx, api.AuditQuery{Session: resp.SessionID})
	require.NoError(t, err)
	require.Len(t, audit, 1, "recorded once")
	assert.Equal(t, protocol.ResultSuccess, audit[0].Outcome)
	_, err = os.Stat(marker)
	assert.ErrorIs(t, err, os.ErrNotExist, "the command was not run again")
}

// journalRecord is the head of an outbox record: its kind and
// response_id. The format (agent/RATIONALE.md, "Format") is restated here,
// as a test outside the agent sees the file.
type journalRecord struct {
	Kind       string `cbor:"k"`
	ResponseID string `cbor:"id"`
}

// journalRecords reads the records of the outbox journal at path, each
// with the offset where it ends. A length of zero ends them: what follows
// is the zeros the agent writes ahead of its records.
func journalRecords(t *testing.T, path string) ([]journalRecord, []int) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var recs []journalRecord
	var ends []int
	for off := 0; len(b)-off >= 8 && binary.BigEndian.Uint32(b[off:]) > 0; {
		end := off + 8 + int(binary.BigEndian.Uint32(b[off:]))
		require.LessOrEqual(t, end, len(b), "a whole record at %d", off)
		var rec journalRecord
		require.NoError(t, protocol.CBOR.UnmarshalValue(b[off+8:end], &rec))
		recs, ends, off = append(recs, rec), append(ends, end), end
	}
	return recs, ends
}

// journalKinds are the kinds of the journal's records of responseID, in
// order: "ARD" for accepted, its results recorded, and delivered.
func journalKinds(t *testing.T, path, responseID string) string {
	recs, _ := journalRecords(t, path)
	var kinds string
	for _, rec := range recs {
		if rec.ResponseID == responseID {
			kinds += rec.Kind
		}
	}
	return kinds
}

// cutAfterAccept zeroes the journal at path from the end of the accept
// record of responseID, as the death of the machine leaves it when the
// records after that one were written, over the zeros ahead of them, but
// not yet fsynced.
func cutAfterAccept(t *testing.T, path, responseID string) {
	t.Helper()
	recs, ends := journalRecords(t, path)
	for i, rec := range recs {
		if rec.Kind == "A" && rec.ResponseID == responseID {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			clear(b[ends[i]:])
			require.NoError(t, os.WriteFile(path, b, 0o600))
			return
		}
	}
	t.Fatalf("no accept record of %s in %s", responseID, path)
}
