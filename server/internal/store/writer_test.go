package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A batch runs its writes without savepoints: a write that fails having
// changed rows is undone by running the batch again without it, and one
// that fails having changed nothing is simply left out. Either way the
// others stand, each once, and every write hears its own outcome.
func TestAWriteThatFailsIsUndoneAloneWithoutSavepoints(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	create := func(id string, fail error) writeReq {
		return writeReq{done: make(chan error, 1), fn: func(tx *Tx) error {
			if err := tx.Devices().Create(id, "hash-"+id, nil); err != nil {
				return err
			}
			return fail
		}}
	}
	refuse := writeReq{done: make(chan error, 1), fn: func(tx *Tx) error { return tx.Devices().Delete("nobody") }}
	taken := writeReq{done: make(chan error, 1), fn: func(tx *Tx) error { return tx.Devices().Create("d1", "another-hash", nil) }}
	batch := []writeReq{
		create("d1", nil),
		create("d2", errors.New("changed my mind after writing")),
		refuse,
		create("d3", nil),
		taken, // the first write's id: refused by its statement, which SQLite undoes alone
	}
	s.commit(batch) // as the writer would, with nothing else writing
	assert.NoError(t, <-batch[0].done)
	assert.EqualError(t, <-batch[1].done, "changed my mind after writing")
	assert.ErrorIs(t, <-batch[2].done, ErrNotFound)
	assert.NoError(t, <-batch[3].done)
	assert.ErrorIs(t, <-batch[4].done, ErrExists)
	devs, err := s.Devices().All(ctx)
	require.NoError(t, err)
	var ids []string
	for _, d := range devs {
		ids = append(ids, d.ID)
	}
	assert.Equal(t, []string{"d1", "d3"}, ids)
}

// On PostgreSQL a statement that fails aborts the whole transaction, and
// COMMIT then rolls back, saying nothing: a write that goes on after its
// statement failed (here, a refused insert it ignores) is failed and left
// out, and the batch's other writes still commit. SQLite undoes the
// statement alone, and the write stands.
func TestAWriteThatIgnoresAFailedStatementLosesNoOtherWrite(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	write(t, s, func(tx *Tx) error { return tx.Devices().Create("taken", "h0", nil) })
	create := func(id string) writeReq {
		return writeReq{done: make(chan error, 1), fn: func(tx *Tx) error { return tx.Devices().Create(id, "hash-"+id, nil) }}
	}
	ignores := writeReq{done: make(chan error, 1), fn: func(tx *Tx) error {
		tx.Devices().Create("taken", "another-hash", nil)
		return nil
	}}
	batch := []writeReq{create("d1"), ignores, create("d2")}
	s.commit(batch)
	assert.NoError(t, <-batch[0].done)
	if s.Backend() == Postgres {
		assert.ErrorContains(t, <-batch[1].done, "aborted the transaction")
	} else {
		assert.NoError(t, <-batch[1].done)
	}
	assert.NoError(t, <-batch[2].done)
	for _, id := range []string{"taken", "d1", "d2"} {
		_, err := s.Devices().Get(ctx, id)
		assert.NoError(t, err, id)
	}
}

// Write's commits are durable when they return and WriteUnsynced's are
// not waited for: SQLite's synchronous FULL or NORMAL, PostgreSQL's
// synchronous_commit as the database has it (on) or off.
func TestAWritesTransactionIsSyncedAsAsked(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	setting := func(w func(context.Context, func(*Tx) error) error) string {
		var v string
		q := "PRAGMA synchronous"
		if s.Backend() == Postgres {
			q = "SHOW synchronous_commit"
		}
		require.NoError(t, w(ctx, func(tx *Tx) error { return tx.queryRow(q).Scan(&v) }))
		return v
	}
	synced, unsynced := "2", "1" // FULL, NORMAL
	if s.Backend() == Postgres {
		synced, unsynced = "on", "off"
	}
	assert.Equal(t, synced, setting(s.Write))
	assert.Equal(t, unsynced, setting(s.WriteUnsynced))
	assert.Equal(t, unsynced, setting(s.WriteUnsynced))
	assert.Equal(t, synced, setting(s.Write))
}

// A write that need not be durable at once is committed when
// WriteUnsynced returns: every read sees it, whether it was committed
// alone or beside durable writes.
func TestAnUnsyncedWriteIsCommittedWhenItReturns(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	require.NoError(t, s.WriteUnsynced(ctx, func(tx *Tx) error { return tx.Devices().Create("lazy", "h1", nil) }))
	_, err := s.Devices().Get(ctx, "lazy")
	require.NoError(t, err)
	write(t, s, func(tx *Tx) error { return tx.Devices().Create("durable", "h2", nil) })
	require.NoError(t, s.WriteUnsynced(ctx, func(tx *Tx) error { return tx.Devices().Create("lazy-2", "h3", nil) }))
	for _, id := range []string{"durable", "lazy-2"} {
		_, err := s.Devices().Get(ctx, id)
		require.NoError(t, err, id)
	}
}

// crashEnv names the database a child process writes to before it kills
// itself (see TestMain).
const crashEnv = "EDGEAIP_STORE_CRASH_DB"

// TestMain is a crash child's (a child process the crash test starts), or
// runs the tests and stops the PostgreSQL cluster they shared, if any.
func TestMain(m *testing.M) {
	if path := os.Getenv(crashEnv); path != "" {
		writeThenCrash(path)
		return
	}
	pgtest.Main(m)
}

// writeThenCrash commits one write without an fsync and one with, then
// dies by SIGKILL, as a server killed with kill -9 does: nothing is
// closed, nothing checkpointed.
func writeThenCrash(path string) {
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx := context.Background()
	if err := s.WriteUnsynced(ctx, func(tx *Tx) error { return tx.Devices().Create("unsynced", "h1", nil) }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := s.Write(ctx, func(tx *Tx) error { return tx.Devices().Create("synced", "h2", nil) }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := s.WriteUnsynced(ctx, func(tx *Tx) error { return tx.Devices().Create("unsynced-last", "h3", nil) }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// Whatever a write returned, synced or not, survives the process dying
// at once after it: a committed write is in the WAL file, which the
// kernel keeps; only a crash of the machine can lose the unsynced one.
func TestCommittedWritesSurviveTheProcessBeingKilled(t *testing.T) {
	sqliteOnly(t, "a PostgreSQL commit is in the database server, which the store's process dying does not touch")
	path := filepath.Join(t.TempDir(), "crash.db")
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "output: %s", out)
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "output: %s", out)

	s, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	defer s.Close()
	for _, id := range []string{"unsynced", "synced", "unsynced-last"} {
		_, err := s.Devices().Get(context.Background(), id)
		assert.NoError(t, err, id)
	}
}
