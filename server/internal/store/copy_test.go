package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/tablecopy"
)

// fillFleet writes a little of everything the schema holds: devices with
// a rotation, a retired token and a certificate, tasks with idempotency
// keys, commands with results (and so audit entries), one with a NUL-free
// odd string, and an agent release, whose binary is a module.
func fillFleet(t *testing.T, s *Store, devices int) {
	t.Helper()
	write(t, s, func(tx *Tx) error {
		return tx.Identities().Create(Identity{Name: "ci", Role: "operator", Devices: "site=s1", Tools: []string{"data_collection::*"}},
			Token{ID: "tok-1", Hash: "hash-tok-1"})
	})
	write(t, s, func(tx *Tx) error {
		return tx.Identities().CreateLogin("login-1", "tok-1", time.Now().Add(time.Hour), 10)
	})
	agent := []byte("\x7fELF an agent")
	_, err := putRelease(t, s, testRelease("1.2.3", "arm64", agent), agent)
	require.NoError(t, err)
	for i := range devices {
		id := fmt.Sprintf("kiosk-%d", i)
		write(t, s, func(tx *Tx) error {
			if err := tx.Devices().Create(id, "hash-"+id, map[string]string{"site": "s" + fmt.Sprint(i%3)}); err != nil {
				return err
			}
			if err := tx.Devices().See(id, json.RawMessage(`{"os":"linux"}`), time.Now()); err != nil {
				return err
			}
			return tx.Devices().AddCertificate(DeviceCert{SHA256: "cert-" + id, DeviceID: id, Serial: "01", NotAfter: time.Now().Add(time.Hour), Signed: i%2 == 0})
		})
		write(t, s, func(tx *Tx) error { return tx.Devices().RequestRotation(id, 90*time.Minute) })
		write(t, s, func(tx *Tx) error { return tx.Devices().SendRotation(id, "new-"+id) })
		if i%2 == 0 {
			write(t, s, func(tx *Tx) error { return tx.Devices().ConfirmRotation(id, "new-"+id) })
		}
		ses := keyedSession("s-"+id, "operator", "k-"+id)
		ses.DeviceID = id
		write(t, s, func(tx *Tx) error { return tx.Sessions().Insert(ses) })
		for j := range 3 {
			rid := fmt.Sprintf("r-%s-%d", id, j)
			write(t, s, func(tx *Tx) error {
				return tx.Commands().Insert(Command{ResponseID: rid, DeviceID: id, SessionID: ses.ID, Actor: "operator", Step: j,
					Actions: twoActions(), Tools: []ToolRef{{Namespace: "stock", SHA256: "abc"}, {}}})
			})
			write(t, s, func(tx *Tx) error {
				_, err := tx.Commands().RecordResults(id, rid, []protocol.Result{{Status: protocol.ResultSuccess, Result: "é ✓", CallID: "c1"},
					{Status: protocol.ResultFailure, Error: "no", CallID: "c2"}})
				return err
			})
		}
		ses.State, ses.Result = "completed", json.RawMessage(`{"ok":true}`)
		write(t, s, func(tx *Tx) error { return tx.Sessions().End(ses) })
	}
}

// rowCounts counts every table's rows.
func rowCounts(t *testing.T, s *Store) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, c := range tableDigests(t, s) {
		out[c.Table] = c.Rows
	}
	return out
}

// A single node's store moves to PostgreSQL whole, each table checked by
// its count and digest, and back again to SQLite with the same digests:
// everything in the schema, the audit log's order and the next audit
// entry's number with it.
func TestAStoreCopiesToPostgreSQLAndBackTableByTable(t *testing.T) {
	ctx := context.Background()
	src, _ := openTestAt(t, filepath.Join(t.TempDir(), "single.db"))
	fillFleet(t, src, 4)
	pg, _ := openTestAt(t, pgtest.Shared(t).NewDatabase(t))

	there, err := Copy(ctx, src, pg, CopyOptions{})
	require.NoError(t, err)
	counts := map[string]int64{}
	for _, c := range there {
		counts[c.Table] = c.Rows
		assert.Len(t, c.Digest, 64, c.Table)
	}
	assert.Equal(t, rowCounts(t, src), counts, "every table, every row")
	for _, table := range []string{"devices", "commands", "sessions", "audit", "idempotency_keys", "token_rotations", "retired_tokens",
		"device_certificates", "identities", "identity_tokens", "logins", "modules", "releases"} {
		assert.Positive(t, counts[table], table)
	}

	back, _ := openTestAt(t, filepath.Join(t.TempDir(), "back.db"))
	again, err := Copy(ctx, pg, back, CopyOptions{})
	require.NoError(t, err)
	assert.ElementsMatch(t, there, again, "the same rows, whichever database holds them")

	want, err := src.Audit().List(ctx, AuditFilter{Limit: 1000})
	require.NoError(t, err)
	got, err := pg.Audit().List(ctx, AuditFilter{Limit: 1000})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	d, err := pg.Devices().Get(ctx, "kiosk-1")
	require.NoError(t, err)
	assert.Equal(t, 90*time.Minute, d.Rotation.Grace)
	m, err := pg.Devices().ByToken(ctx, "hash-kiosk-0")
	require.NoError(t, err)
	assert.Equal(t, TokenRetired, m.Kind)
	k, err := pg.IdempotencyKeys().Get(ctx, "operator", "k-kiosk-2")
	require.NoError(t, err)
	assert.Equal(t, "s-kiosk-2", k.SessionID)

	insertCommand(t, pg, "after-the-copy")
	write(t, pg, func(tx *Tx) error { _, err := tx.Commands().Fail("after-the-copy", "x"); return err })
	all, err := pg.Audit().List(ctx, AuditFilter{Limit: 1000})
	require.NoError(t, err)
	assert.Greater(t, all[len(all)-1].Seq, want[len(want)-1].Seq, "the next entry comes after those copied")
}

// A target that holds rows is refused, naming them, unless the copy is
// told to replace them; a SQLite target is never emptied in place.
func TestACopyRefusesATargetThatHoldsRowsUnlessToldToReplaceThem(t *testing.T) {
	ctx := context.Background()
	src, _ := openTestAt(t, filepath.Join(t.TempDir(), "single.db"))
	fillFleet(t, src, 2)
	pg, _ := openTestAt(t, pgtest.Shared(t).NewDatabase(t))
	write(t, pg, func(tx *Tx) error { return tx.Devices().Create("already-here", "h", nil) })

	_, err := Copy(ctx, src, pg, CopyOptions{})
	require.ErrorIs(t, err, ErrNotEmpty)
	assert.ErrorContains(t, err, "devices (1 rows)")
	_, err = pg.Devices().Get(ctx, "kiosk-0")
	assert.ErrorIs(t, err, ErrNotFound, "nothing copied")

	copied, err := Copy(ctx, src, pg, CopyOptions{Replace: true})
	require.NoError(t, err)
	assert.NotEmpty(t, copied)
	_, err = pg.Devices().Get(ctx, "already-here")
	assert.ErrorIs(t, err, ErrNotFound, "replaced")
	assert.Equal(t, rowCounts(t, src), rowCounts(t, pg))

	other, _ := openTestAt(t, filepath.Join(t.TempDir(), "other.db"))
	write(t, other, func(tx *Tx) error { return tx.Devices().Create("already-here", "h", nil) })
	_, err = Copy(ctx, src, other, CopyOptions{Replace: true})
	assert.ErrorContains(t, err, "remove its file")
}

// A backup taken while writers write is a store of its own: it opens,
// and holds every write that returned before the backup began.
func TestABackupIsAConsistentStoreTakenWhileWritesGoOn(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, path := openTestAt(t, filepath.Join(dir, "live.db"))
	fillFleet(t, s, 2)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer halt()
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("busy-%d-%d", w, i)
				assert.NoError(t, s.Write(ctx, func(tx *Tx) error { return tx.Devices().Create(id, "h-"+id, nil) }))
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	to := filepath.Join(dir, "backup.db")
	require.NoError(t, Backup(ctx, path, to))
	halt()

	fi, err := os.Stat(to)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "it holds token hashes")
	leftovers, _ := filepath.Glob(to + ".partial-*")
	assert.Empty(t, leftovers)
	b, err := Open(ctx, to, Options{})
	require.NoError(t, err)
	defer b.Close()
	counts := rowCounts(t, b)
	assert.Equal(t, int64(2*3*2), counts["audit"])
	assert.GreaterOrEqual(t, counts["devices"], int64(2))
	_, err = b.Devices().Get(ctx, "kiosk-1")
	assert.NoError(t, err)

	assert.ErrorContains(t, Backup(ctx, path, to), "exists", "a backup never overwrites")
	assert.Error(t, Backup(ctx, filepath.Join(dir, "missing.db"), filepath.Join(dir, "b2.db")), "nor creates the store it backs up")
}

// A row PostgreSQL cannot hold as it is (a NUL byte in a device's error,
// which SQLite kept) fails the copy's check: nothing is copied, and the
// error names the table.
func TestACopyThatWouldChangeARowCopiesNothing(t *testing.T) {
	ctx := context.Background()
	src, _ := openTestAt(t, filepath.Join(t.TempDir(), "single.db"))
	fillFleet(t, src, 1)
	insertCommand(t, src, "nul")
	write(t, src, func(tx *Tx) error {
		_, err := tx.Commands().RecordResults("kiosk-1", "nul", []protocol.Result{{Status: protocol.ResultFailure, Error: "bad\x00byte", CallID: "c1"}})
		return err
	})
	pg, _ := openTestAt(t, pgtest.Shared(t).NewDatabase(t))
	_, err := Copy(ctx, src, pg, CopyOptions{})
	require.ErrorContains(t, err, "the target would differ from the source, so nothing is copied: audit: ")
	for table, n := range rowCounts(t, pg) {
		assert.Zero(t, n, table)
	}
}

// tableDigests digests every table of s.
func tableDigests(t *testing.T, s *Store) []TableCopy {
	t.Helper()
	ctx := context.Background()
	tx, err := s.rdb.BeginTx(ctx, s.dialect.snapshot())
	require.NoError(t, err)
	defer tx.Rollback()
	tables, err := tablecopy.InOrder(ctx, tablecopy.Snapshot{Src: tx}, copyQueries(s.dialect), isClusterTable)
	require.NoError(t, err)
	var out []TableCopy
	for _, tb := range tables {
		c, err := tablecopy.Digest(ctx, tablecopy.Snapshot{Src: tx}, tb)
		require.NoError(t, err)
		out = append(out, c)
	}
	return out
}

// A PostgreSQL store is backed up as the README says, with pg_dump, and
// restored with pg_restore into an empty database: a store that opens,
// holding the same rows, whose next audit entry follows the last.
func TestAPgDumpOfAStoreRestoresIntoAnEmptyDatabase(t *testing.T) {
	c := pgtest.Shared(t)
	dsn := c.NewDatabase(t)
	s, _ := openTestAt(t, dsn)
	fillFleet(t, s, 2)
	dump := filepath.Join(t.TempDir(), "edgeaip.dump")
	out, err := exec.Command(c.Bin("pg_dump"), "--format=custom", "--file="+dump, dsn).CombinedOutput()
	require.NoError(t, err, "%s", out)
	restored := c.NewDatabase(t)
	out, err = exec.Command(c.Bin("pg_restore"), "--dbname="+restored, dump).CombinedOutput()
	require.NoError(t, err, "%s", out)

	r, _ := openTestAt(t, restored)
	assert.Equal(t, tableDigests(t, s), tableDigests(t, r))
	insertCommand(t, r, "after-the-restore")
	write(t, r, func(tx *Tx) error { _, err := tx.Commands().Fail("after-the-restore", "x"); return err })
	audit, err := r.Audit().List(context.Background(), AuditFilter{Limit: 1000})
	require.NoError(t, err)
	assert.Equal(t, "after-the-restore", audit[len(audit)-1].ResponseID)
}
