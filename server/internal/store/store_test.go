package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openTest opens a store of t's own, on the backend under test, and
// returns it with its location, for Open to open it again.
func openTest(t *testing.T) (*Store, string) {
	t.Helper()
	return openTestAt(t, testLocation(t))
}

// openTestAt opens the store at path, closed when t ends.
func openTestAt(t *testing.T, path string) (*Store, string) {
	t.Helper()
	s, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, path
}

func write(t *testing.T, s *Store, fn func(*Tx) error) {
	t.Helper()
	require.NoError(t, s.Write(context.Background(), fn))
}

func TestConcurrentWritesAllCommitAndAFailingOneIsRolledBackAlone(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 50)
	for i := range errs {
		wg.Go(func() {
			errs[i] = s.Write(ctx, func(tx *Tx) error {
				if err := tx.Devices().Create(fmt.Sprintf("d%02d", i), fmt.Sprintf("hash%d", i), nil); err != nil {
					return err
				}
				if i%10 == 0 {
					return errors.New("changed my mind")
				}
				return nil
			})
		})
	}
	wg.Wait()
	devs, err := s.Devices().All(ctx)
	require.NoError(t, err)
	assert.Len(t, devs, 45)
	for i, err := range errs {
		if i%10 == 0 {
			assert.EqualError(t, err, "changed my mind")
			_, err := s.Devices().Get(ctx, fmt.Sprintf("d%02d", i))
			assert.ErrorIs(t, err, ErrNotFound, "a failed write leaves nothing behind")
		} else {
			assert.NoError(t, err)
		}
	}
}

func TestWriteAfterCloseFails(t *testing.T) {
	s, _ := openTest(t)
	require.NoError(t, s.Close())
	err := s.Write(context.Background(), func(tx *Tx) error { return nil })
	assert.ErrorIs(t, err, ErrClosed)
}

func twoActions() []protocol.Command {
	return []protocol.Command{
		{ToolName: "hash_file", ToolType: protocol.ToolDataCollection, Parameters: map[string]any{"path": "/a"}, CallID: "c1"},
		{ToolName: "echo", Parameters: map[string]any{"x": 1.0}, CallID: "c2"},
	}
}

func insertCommand(t *testing.T, s *Store, id string) {
	write(t, s, func(tx *Tx) error {
		return tx.Commands().Insert(Command{ResponseID: id, DeviceID: "kiosk-1", SessionID: "s1", Actor: "operator",
			Actions: twoActions(), Tools: []ToolRef{{Namespace: "stock", SHA256: "abc"}, {}}})
	})
}

func TestResultsAreRecordedExactlyOnceAndOnlyFromTheirDevice(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	insertCommand(t, s, "r1")
	results := []protocol.Result{
		{Status: protocol.ResultSkipped, CallID: "c2"},
		{Status: protocol.ResultSuccess, Result: "ok", CallID: "c1", Namespace: "stock"},
	}
	record := func(device string) (Command, error) {
		var c Command
		err := s.Write(ctx, func(tx *Tx) (err error) { c, err = tx.Commands().RecordResults(device, "r1", results); return err })
		return c, err
	}

	_, err := record("kiosk-2")
	assert.ErrorIs(t, err, ErrWrongDevice)
	c, err := record("kiosk-1")
	require.NoError(t, err)
	assert.Equal(t, CommandDone, c.Status)
	assert.False(t, c.Late)
	require.Len(t, c.Results, 2)
	assert.Equal(t, "c1", c.Results[0].CallID, "results follow the order of the actions")
	_, err = record("kiosk-1")
	assert.ErrorIs(t, err, ErrDuplicate)
	err = s.Write(ctx, func(tx *Tx) error { _, err := tx.Commands().RecordResults("kiosk-1", "nope", results); return err })
	assert.ErrorIs(t, err, ErrNotFound)
	err = s.Write(ctx, func(tx *Tx) error { _, err := tx.Commands().Fail("r1", "too late"); return err })
	assert.ErrorIs(t, err, ErrFinished, "a command with results cannot fail afterwards")

	audit, err := s.Audit().List(ctx, AuditFilter{Limit: 100})
	require.NoError(t, err)
	require.Len(t, audit, 2, "one entry per action, written once")
	assert.Equal(t, "data_collection::hash_file", audit[0].Tool)
	assert.Equal(t, "stock", audit[0].Namespace)
	assert.Equal(t, "abc", audit[0].ModuleSHA256)
	assert.JSONEq(t, `{"path":"/a"}`, string(audit[0].Parameters))
	assert.Equal(t, protocol.ResultSuccess, audit[0].Outcome)
	assert.Equal(t, "operator", audit[0].Actor)
	assert.Equal(t, "echo", audit[1].Tool)
	assert.Equal(t, protocol.ResultSkipped, audit[1].Outcome)
}

func TestLateResultsTurnAFailedCommandDoneOnce(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	insertCommand(t, s, "r1")
	var failed Command
	write(t, s, func(tx *Tx) (err error) { failed, err = tx.Commands().Fail("r1", "device did not answer"); return err })
	assert.Equal(t, CommandFailed, failed.Status)
	assert.Equal(t, "device did not answer", failed.Results[1].Error)

	results := []protocol.Result{{Status: protocol.ResultSuccess, CallID: "c1"}, {Status: protocol.ResultSuccess, CallID: "c2"}}
	write(t, s, func(tx *Tx) error { _, err := tx.Commands().RecordResults("kiosk-1", "r1", results); return err })
	err := s.Write(ctx, func(tx *Tx) error { _, err := tx.Commands().RecordResults("kiosk-1", "r1", results); return err })
	assert.ErrorIs(t, err, ErrDuplicate)

	c, err := s.Commands().Get(ctx, "r1")
	require.NoError(t, err)
	assert.Equal(t, CommandDone, c.Status)
	assert.True(t, c.Late)
	assert.Equal(t, "device did not answer", c.Error, "why the caller saw a failure stays on record")
	assert.Equal(t, protocol.ResultSuccess, c.Results[0].Status)

	audit, err := s.Audit().List(ctx, AuditFilter{SessionID: "s1", Limit: 100})
	require.NoError(t, err)
	require.Len(t, audit, 4, "the failure and the late results are both on record")
	assert.Equal(t, protocol.ResultFailure, audit[0].Outcome)
	assert.False(t, audit[0].Late)
	assert.Equal(t, protocol.ResultSuccess, audit[2].Outcome)
	assert.True(t, audit[2].Late)
}

// TestResultsOfASentCommandAreRecordedAsWhenReadBack pins down that
// RecordSentResults, which takes the command's record from its caller,
// writes and returns what RecordResults, which reads it back, does, and
// refuses what it refuses.
func TestResultsOfASentCommandAreRecordedAsWhenReadBack(t *testing.T) {
	ctx := context.Background()
	results := []protocol.Result{
		{Status: protocol.ResultSkipped, CallID: "c2"},
		{Status: protocol.ResultSuccess, Result: "ok", CallID: "c1", Namespace: "stock"},
	}
	sent := Command{ResponseID: "r1", DeviceID: "kiosk-1", SessionID: "s1", Actor: "operator", By: By{Identity: "ops", TokenID: "t1"},
		Step: 2, Attempt: 3, Actions: twoActions(), Tools: []ToolRef{{Namespace: "stock", SHA256: "abc"}, {}}}
	var byRecord, byRead []AuditEntry
	for _, known := range []bool{true, false} {
		s, _ := openTest(t)
		write(t, s, func(tx *Tx) error { return tx.Commands().Insert(sent) })
		record := func(device string) (c Command, err error) {
			err = s.Write(ctx, func(tx *Tx) (err error) {
				if known {
					c, err = tx.Commands().RecordSentResults(sent, device, results)
				} else {
					c, err = tx.Commands().RecordResults(device, sent.ResponseID, results)
				}
				return err
			})
			return c, err
		}
		_, err := record("kiosk-2")
		assert.ErrorIs(t, err, ErrWrongDevice, "known %v", known)
		c, err := record("kiosk-1")
		require.NoError(t, err, "known %v", known)
		stored, err := s.Commands().Get(ctx, "r1")
		require.NoError(t, err)
		c.CreatedAt, c.FinishedAt = stored.CreatedAt, stored.FinishedAt
		assert.Equal(t, stored, c, "known %v: what it returns is what it wrote", known)
		assert.Equal(t, CommandDone, stored.Status)
		assert.False(t, stored.Late)
		assert.Equal(t, "c1", stored.Results[0].CallID, "results follow the order of the actions")
		_, err = record("kiosk-1")
		assert.ErrorIs(t, err, ErrDuplicate, "known %v", known)
		audit, err := s.Audit().List(ctx, AuditFilter{Limit: 100})
		require.NoError(t, err)
		for i := range audit {
			audit[i].At = time.Time{}
		}
		if known {
			byRecord = audit
		} else {
			byRead = audit
		}
	}
	assert.Len(t, byRecord, 2, "one entry per action, written once")
	assert.Equal(t, byRead, byRecord)
}

func TestResultsOfASentCommandThatFailedMeanwhileComeLate(t *testing.T) {
	s, _ := openTest(t)
	insertCommand(t, s, "r1")
	sent, err := s.Commands().Get(context.Background(), "r1")
	require.NoError(t, err)
	write(t, s, func(tx *Tx) error { _, err := tx.Commands().Fail("r1", "device did not answer"); return err })
	var c Command
	write(t, s, func(tx *Tx) (err error) {
		c, err = tx.Commands().RecordSentResults(sent, "kiosk-1", []protocol.Result{{Status: protocol.ResultSuccess, CallID: "c1"}})
		return err
	})
	assert.Equal(t, CommandDone, c.Status)
	assert.True(t, c.Late)
	assert.Equal(t, "device did not answer", c.Error, "why the caller saw a failure stays on record")
}

func TestTheAuditLogIsAppendOnly(t *testing.T) {
	s, _ := openTest(t)
	insertCommand(t, s, "r1")
	write(t, s, func(tx *Tx) error { _, err := tx.Commands().Fail("r1", "x"); return err })
	for _, q := range []string{`UPDATE audit SET outcome = 'success'`, `DELETE FROM audit`} {
		err := s.Write(context.Background(), func(tx *Tx) error { _, err := tx.exec(q); return err })
		require.Error(t, err, q)
		assert.Contains(t, err.Error(), "the audit log is append-only", q)
	}
	// Expiring a session keeps its audit entries.
	row := Session{ID: "s1", DeviceID: "kiosk-1", RequesterKind: "operator", Kind: "command", State: "running", CreatedAt: time.Now()}
	write(t, s, func(tx *Tx) error { return tx.Sessions().Insert(row) })
	row.State, row.Error = "failed", "x"
	write(t, s, func(tx *Tx) error { return tx.Sessions().End(row) })
	write(t, s, func(tx *Tx) error {
		_, err := tx.Sessions().DeleteFinishedBefore(time.Now().Add(time.Second))
		return err
	})
	_, err := s.Commands().Get(context.Background(), "r1")
	assert.ErrorIs(t, err, ErrNotFound)
	audit, err := s.Audit().List(context.Background(), AuditFilter{Limit: 10})
	require.NoError(t, err)
	assert.Len(t, audit, 2)
}

func TestFailInterruptedEndsWhatAStoppedServerLeftRunning(t *testing.T) {
	s, path := openTest(t)
	ctx := context.Background()
	at := time.Now()
	for id, state := range map[string]string{"created": "created", "running": "running", "done": "running"} {
		write(t, s, func(tx *Tx) error {
			return tx.Sessions().Insert(Session{ID: id, DeviceID: "kiosk-1", RequesterKind: "operator", Kind: "plan", State: state, CreatedAt: at})
		})
	}
	end := Session{ID: "done", DeviceID: "kiosk-1", RequesterKind: "operator", Kind: "plan", State: "completed", Result: []byte(`{"ok":true}`), CreatedAt: at}
	write(t, s, func(tx *Tx) error { return tx.Sessions().End(end) })
	insertCommand(t, s, "r1")
	require.NoError(t, s.Close())

	s2, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	defer s2.Close()
	var ns, nc int
	write(t, s2, func(tx *Tx) (err error) { ns, nc, err = tx.Sessions().FailInterrupted("server restarted"); return err })
	assert.Equal(t, 2, ns)
	assert.Equal(t, 1, nc)
	for _, id := range []string{"created", "running"} {
		ses, err := s2.Sessions().Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "failed", ses.State)
		assert.Equal(t, "server restarted", ses.Error)
	}
	done, err := s2.Sessions().Get(ctx, "done")
	require.NoError(t, err)
	assert.Equal(t, "completed", done.State)
	assert.JSONEq(t, `{"ok":true}`, string(done.Result))
	c, err := s2.Commands().Get(ctx, "r1")
	require.NoError(t, err)
	assert.Equal(t, CommandFailed, c.Status)
}

func TestASessionEndsOnceAndOneNeverRecordedIsRecordedAsItEnds(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	created, started := time.Now().Add(-time.Minute), time.Now().Add(-time.Second)
	row := Session{ID: "s1", TaskName: "t", DeviceID: "kiosk-1", RequesterKind: "operator", Kind: "plan", State: "created",
		Plan: []byte(`{"steps":[]}`), CreatedAt: created}
	write(t, s, func(tx *Tx) error { return tx.Sessions().Insert(row) })
	write(t, s, func(tx *Tx) error { return tx.Sessions().Start("s1") })
	end := row
	end.State, end.Result, end.Error, end.StartedAt = "failed", []byte(`{"n":1}`), "step 1 failed", started
	write(t, s, func(tx *Tx) error { return tx.Sessions().End(end) })
	again := end
	again.State, again.Result, again.Error = "cancelled", []byte(`{"n":2}`), "too late"
	write(t, s, func(tx *Tx) error { return tx.Sessions().End(again) })

	got, err := s.Sessions().Get(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, "failed", got.State, "the first end stands")
	assert.JSONEq(t, `{"n":1}`, string(got.Result))
	assert.Equal(t, "step 1 failed", got.Error)
	assert.NotEqual(t, started.UTC(), got.StartedAt, "an end changes nothing but the outcome")
	assert.False(t, got.FinishedAt.IsZero())

	never := Session{ID: "s2", DeviceID: "kiosk-1", RequesterKind: "operator", Kind: "command", State: "failed",
		Result: []byte(`{"status":"failure"}`), Error: "device \"kiosk-1\" has no tool \"x\"", CreatedAt: created, StartedAt: started}
	write(t, s, func(tx *Tx) error { return tx.Sessions().End(never) })
	got, err = s.Sessions().Get(ctx, "s2")
	require.NoError(t, err)
	assert.Equal(t, "failed", got.State)
	assert.Equal(t, "command", got.Kind)
	assert.Equal(t, never.Error, got.Error)
	assert.JSONEq(t, `{"status":"failure"}`, string(got.Result))
	assert.True(t, started.Equal(got.StartedAt), "started %v, got %v", started, got.StartedAt)
	assert.True(t, created.Equal(got.CreatedAt))
	assert.False(t, got.FinishedAt.IsZero())
}

func TestARecordedSessionEndsAlikeByEitherWrite(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	ends := map[string]func(*Tx, Session) error{
		"EndSession":         func(tx *Tx, s Session) error { return tx.Sessions().End(s) },
		"EndRecordedSession": func(tx *Tx, s Session) error { return tx.Sessions().EndRecorded(s) },
	}
	got := map[string]Session{}
	for name, end := range ends {
		row := Session{ID: name, DeviceID: "kiosk-1", RequesterKind: "operator", Kind: "command", State: "running",
			CreatedAt: time.Now(), StartedAt: time.Now()}
		write(t, s, func(tx *Tx) error { return tx.Sessions().Insert(row) })
		first, again := row, row
		first.State, first.Result, first.Error = "failed", []byte(`{"n":1}`), "no"
		again.State, again.Result = "completed", []byte(`{"n":2}`)
		write(t, s, func(tx *Tx) error { return end(tx, first) })
		write(t, s, func(tx *Tx) error { return end(tx, again) })
		ses, err := s.Sessions().Get(ctx, name)
		require.NoError(t, err)
		assert.Equal(t, "failed", ses.State, "%s: the first end stands", name)
		assert.False(t, ses.FinishedAt.IsZero(), name)
		ses.ID, ses.CreatedAt, ses.StartedAt, ses.FinishedAt = "", time.Time{}, time.Time{}, time.Time{}
		got[name] = ses
	}
	assert.Equal(t, got["EndSession"], got["EndRecordedSession"])
}

// tenNanosApart are two times 10 ns apart whose time.RFC3339Nano texts
// sort the wrong way round: "…05.1Z" after "…05.10000001Z".
func tenNanosApart() (earlier, later time.Time) {
	earlier = time.Date(2026, 11, 21, 14, 29, 5, 100_000_000, time.UTC)
	return earlier, earlier.Add(10 * time.Nanosecond)
}

func sessionAt(id string, created time.Time) Session {
	return Session{ID: id, DeviceID: "kiosk-1", RequesterKind: "operator", Kind: "plan", State: "created", CreatedAt: created}
}

func sessionIDs(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.Sessions().Summaries(context.Background(), SessionFilter{Limit: 10})
	require.NoError(t, err)
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestSessionsAreListedInTimeOrderToTheNanosecond(t *testing.T) {
	s, _ := openTest(t)
	earlier, later := tenNanosApart()
	write(t, s, func(tx *Tx) error { return tx.Sessions().Insert(sessionAt("later", later)) })
	write(t, s, func(tx *Tx) error { return tx.Sessions().Insert(sessionAt("earlier", earlier)) })
	assert.Equal(t, []string{"later", "earlier"}, sessionIDs(t, s), "newest first")
	ses, err := s.Sessions().Get(context.Background(), "earlier")
	require.NoError(t, err)
	assert.True(t, earlier.Equal(ses.CreatedAt), "read back as written: %v", ses.CreatedAt)
}

// Pages follow one another by key: sessions created at the same instant
// are told apart by id, so none is listed twice or left out. A summary
// carries no plan, result or error.
func TestSessionSummariesPageByKeyWithoutPlansOrResults(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 21, 14, 29, 5, 0, time.UTC)
	for _, id := range []string{"b", "a", "c"} {
		row := sessionAt(id, at)
		row.Plan, row.State, row.Result, row.Error = []byte(`{"steps":[]}`), "failed", []byte(`{"big":true}`), "it broke"
		write(t, s, func(tx *Tx) error { return tx.Sessions().End(row) })
	}
	write(t, s, func(tx *Tx) error { return tx.Sessions().Insert(sessionAt("newest", at.Add(time.Nanosecond))) })

	var got []string
	var after *SessionKey
	for {
		rows, err := s.Sessions().Summaries(ctx, SessionFilter{Limit: 2, After: after})
		require.NoError(t, err)
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			got = append(got, r.ID)
			assert.Nil(t, r.Plan, r.ID)
			assert.Nil(t, r.Result, r.ID)
			assert.Empty(t, r.Error, r.ID)
		}
		last := rows[len(rows)-1]
		after = &SessionKey{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	assert.Equal(t, []string{"newest", "c", "b", "a"}, got)

	rows, err := s.Sessions().Summaries(ctx, SessionFilter{State: "failed", Limit: 10, After: &SessionKey{CreatedAt: at, ID: "b"}})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, "a", rows[0].ID)
}

// TestTimesWrittenBeforeMigration4AreRewrittenToSortInTimeOrder opens a
// database as the store left it before times had a fixed width.
func TestTimesWrittenBeforeMigration4AreRewrittenToSortInTimeOrder(t *testing.T) {
	sqliteOnly(t, "PostgreSQL stores start with fixed-width times")
	ctx := context.Background()
	path, db := migratedTo(t, 3)
	earlier, later := tenNanosApart()
	old := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
	whole := later.Truncate(time.Second) // no fraction at all: "…05Z"
	_, err := db.ExecContext(ctx, `INSERT INTO sessions (id, task_name, device_id, requester_kind, requester_id, kind, state, created_at, finished_at)
		VALUES ('earlier', '', 'kiosk-1', 'operator', '', 'plan', 'completed', ?, ?), ('later', '', 'kiosk-1', 'operator', '', 'plan', 'completed', ?, ?),
		       ('whole', '', 'kiosk-1', 'operator', '', 'plan', 'completed', ?, NULL)`,
		old(earlier), old(earlier), old(later), old(later), old(whole))
	require.NoError(t, err)
	require.NoError(t, db.Close())

	s, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, []string{"later", "earlier", "whole"}, sessionIDs(t, s), "newest first")
	for id, want := range map[string]time.Time{"earlier": earlier, "later": later, "whole": whole} {
		ses, err := s.Sessions().Get(ctx, id)
		require.NoError(t, err)
		assert.True(t, want.Equal(ses.CreatedAt), "%s: read back as %v", id, ses.CreatedAt)
	}
	var n int
	write(t, s, func(tx *Tx) (err error) { n, err = tx.Sessions().DeleteFinishedBefore(later); return err })
	assert.Equal(t, 1, n, "only the session that finished before the cutoff")
	assert.Equal(t, []string{"later", "whole"}, sessionIDs(t, s))
}

// Expiry removes the sessions that ended before the cutoff, with their
// commands, and keeps those that ended after it or have not ended,
// however long ago they were created.
func TestExpiryRemovesOnlyTheSessionsThatEndedBeforeTheCutoff(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	long := time.Now().Add(-time.Hour)
	for _, id := range []string{"ended", "ended-after", "running"} {
		write(t, s, func(tx *Tx) error {
			if err := tx.Sessions().Insert(Session{ID: id, DeviceID: "kiosk-1", RequesterKind: "operator", Kind: "command", State: "running", CreatedAt: long}); err != nil {
				return err
			}
			return tx.Commands().Insert(Command{ResponseID: "r-" + id, DeviceID: "kiosk-1", SessionID: id, Actor: "operator", Actions: twoActions()})
		})
	}
	end := func(id string) {
		write(t, s, func(tx *Tx) error { return tx.Sessions().EndRecorded(Session{ID: id, State: "failed", Error: "x"}) })
	}
	end("ended")
	cutoff := time.Now() // not after the end that follows: kept, as not before
	end("ended-after")
	var n int
	write(t, s, func(tx *Tx) (err error) { n, err = tx.Sessions().DeleteFinishedBefore(cutoff); return err })
	assert.Equal(t, 1, n)
	_, err := s.Sessions().Get(ctx, "ended")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s.Commands().Get(ctx, "r-ended")
	assert.ErrorIs(t, err, ErrNotFound)
	for _, id := range []string{"ended-after", "running"} {
		_, err := s.Sessions().Get(ctx, id)
		assert.NoError(t, err, id)
		_, err = s.Commands().Get(ctx, "r-"+id)
		assert.NoError(t, err, id)
	}
}

// A task is found by its name, in a listing and as the newest of that
// name, and an unnamed session (a single command's) by none.
func TestTasksAreFoundByTheirNamesAndUnnamedOnesByNone(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	earlier, later := tenNanosApart()
	for _, ses := range []Session{
		{ID: "first", TaskName: "inventory", CreatedAt: earlier},
		{ID: "second", TaskName: "inventory", CreatedAt: later},
		{ID: "unnamed", CreatedAt: later},
	} {
		ses.DeviceID, ses.RequesterKind, ses.Kind, ses.State = "kiosk-1", "operator", "plan", "created"
		write(t, s, func(tx *Tx) error { return tx.Sessions().Insert(ses) })
	}
	ses, err := s.Sessions().ByTask(ctx, "inventory")
	require.NoError(t, err)
	assert.Equal(t, "second", ses.ID)
	_, err = s.Sessions().ByTask(ctx, "")
	assert.ErrorIs(t, err, ErrNotFound)
	rows, err := s.Sessions().Summaries(ctx, SessionFilter{TaskName: "inventory", Limit: 10})
	require.NoError(t, err)
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	assert.Equal(t, []string{"second", "first"}, ids)
	assert.Equal(t, []string{"unnamed", "second", "first"}, sessionIDs(t, s), "unfiltered, every session")
}

// migratedTo is a SQLite store of t's own, by its path, with its first n
// migrations applied, open on db for the test to write what a store of
// that version held.
func migratedTo(t *testing.T, n int) (path string, db *sql.DB) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "old.db")
	db, err := openDB(path)
	require.NoError(t, err)
	for i := range n {
		tx, err := db.BeginTx(context.Background(), nil)
		require.NoError(t, err)
		require.NoError(t, applyMigration(context.Background(), tx, sqliteDialect{}, i))
		require.NoError(t, tx.Commit())
	}
	return path, db
}

// Migration 15 rebuilds SQLite's audit log as a rowid table: its entries
// keep their seqs, the next one follows the largest, and it stays
// append-only, with its local calls once each.
func TestTheAuditLogKeepsItsSeqsThroughItsRebuild(t *testing.T) {
	sqliteOnly(t, "PostgreSQL's audit log is not rebuilt")
	ctx := context.Background()
	path, db := migratedTo(t, 14)
	// Seqs 1, 2 and 5, as entries written around rolled back ones left
	// them; a local call, which its index keeps once.
	_, err := db.ExecContext(ctx, `INSERT INTO audit (seq, at, actor, identity, token_id, action, device_id, session_id, response_id, call_id, tool, namespace, module_sha256, parameters, outcome, error, late)
		VALUES (1, '2026-11-21T14:29:05.000000000Z', 'operator', 'ops', 't1', '', 'kiosk-1', 's1', 'r1', 'c1', 'echo', '', '', '{}', 'success', '', 0),
		       (2, '2026-11-21T14:29:06.000000000Z', 'local', '', '', '', 'kiosk-1', '', '', 'local-1', 'echo', '', '', '{}', 'success', '', 0),
		       (5, '2026-11-21T14:29:07.000000000Z', 'operator', 'ops', 't1', 'device.enroll', 'kiosk-2', '', '', '', '', '', '', '{}', '', '', 1)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	s, _ := openTestAt(t, path)
	insertCommand(t, s, "r2")
	write(t, s, func(tx *Tx) error { _, err := tx.Commands().Fail("r2", "x"); return err })
	audit, err := s.Audit().List(ctx, AuditFilter{Limit: 10})
	require.NoError(t, err)
	var seqs []int64
	for _, e := range audit {
		seqs = append(seqs, e.Seq)
	}
	assert.Equal(t, []int64{1, 2, 5, 6, 7}, seqs)
	assert.Equal(t, "ops", audit[0].Identity)
	assert.Equal(t, "device.enroll", audit[2].Action)
	assert.True(t, audit[2].Late)
	var first bool
	write(t, s, func(tx *Tx) (err error) {
		first, err = tx.Commands().AppendLocalCall("kiosk-1", "some-app", protocol.Command{ToolName: "echo", CallID: "local-1"},
			protocol.Result{Status: protocol.ResultSuccess, CallID: "local-1"})
		return err
	})
	assert.False(t, first, "the local call recorded before the rebuild")
	for _, q := range []string{`UPDATE audit SET outcome = 'failure'`, `DELETE FROM audit`} {
		err := s.Write(ctx, func(tx *Tx) error { _, err := tx.exec(q); return err })
		assert.ErrorContains(t, err, "the audit log is append-only", q)
	}
}

// A call an application made through a device's own MCP endpoint is
// recorded once, by its call_id, however often the device reports it.
func TestALocalCallIsRecordedOnceHoweverOftenReported(t *testing.T) {
	s, _ := openTest(t)
	call := protocol.Command{ToolName: "echo", Parameters: map[string]any{"x": 1.0}, CallID: "local-1"}
	for i, want := range []bool{true, false} {
		var first bool
		write(t, s, func(tx *Tx) (err error) {
			first, err = tx.Commands().AppendLocalCall("kiosk-1", "some-app", call, protocol.Result{Status: protocol.ResultSuccess, CallID: "local-1"})
			return err
		})
		assert.Equal(t, want, first, "report %d", i+1)
	}
	audit, err := s.Audit().List(context.Background(), AuditFilter{Limit: 10})
	require.NoError(t, err)
	require.Len(t, audit, 1)
	assert.Equal(t, "local", audit[0].Actor)
}
