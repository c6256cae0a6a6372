package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/blackhole"
	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/pgbatch"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheStoreSaysWhichDatabaseItIsOn(t *testing.T) {
	s, _ := openTestAt(t, filepath.Join(t.TempDir(), "x.db"))
	assert.Equal(t, SQLite, s.Backend())
	p, _ := openTestAt(t, pgtest.Shared(t).NewDatabase(t))
	assert.Equal(t, Postgres, p.Backend())
}

// writeLoad writes devices from several goroutines until stop, and
// returns the ids of those whose Write returned nil, and every error.
func writeLoad(s *Store, stop <-chan struct{}) (acked func() []string, errs func() []error) {
	var (
		mu    sync.Mutex
		ids   []string
		fails []error
		wg    sync.WaitGroup
		n     atomic.Int64
	)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("d%06d", n.Add(1))
				err := s.Write(context.Background(), func(tx *Tx) error { return tx.Devices().Create(id, "h-"+id, nil) })
				mu.Lock()
				if err == nil {
					ids = append(ids, id)
				} else {
					fails = append(fails, err)
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond) // as unrecorded backs off
				}
			}
		})
	}
	return func() []string { wg.Wait(); return ids }, func() []error { wg.Wait(); return fails }
}

// PostgreSQL stopped while writers write: their writes fail, as the
// database's failures (ErrUnavailable, naming PostgreSQL), until it is
// back; then the writer takes a new connection and writes go on. Every
// write that returned nil is in the store. Stopped fast (sessions are
// told "terminating connection due to administrator command") and killed
// (connections just drop, then connect is refused) alike.
func TestPostgreSQLLostFailsWritesAsUnavailableAndLosesNothingAcknowledged(t *testing.T) {
	for name, stop := range map[string]func(*pgtest.Cluster) error{"fast": (*pgtest.Cluster).Stop, "crash": (*pgtest.Cluster).Kill} {
		t.Run(name, func(t *testing.T) {
			c := pgtest.Start(t)
			s, _ := openTestAt(t, c.NewDatabase(t))
			ctx := context.Background()
			quit := make(chan struct{})
			acked, errs := writeLoad(s, quit)
			waitDevices(t, s, 50)

			require.NoError(t, stop(c))
			require.Eventually(t, func() bool { return s.WriteFailure() != nil }, 10*time.Second, 10*time.Millisecond)
			assert.Contains(t, s.WriteFailure().Error(), "PostgreSQL")
			time.Sleep(200 * time.Millisecond) // writes fail meanwhile
			require.NoError(t, c.Start())
			before := len(deviceIDs(t, s))
			waitDevices(t, s, before+50)
			close(quit)
			ids, fails := acked(), errs()

			assert.NoError(t, s.WriteFailure(), "healthy again once a write succeeds")
			assert.NotEmpty(t, fails, "writes failed while PostgreSQL was away")
			for _, err := range fails {
				require.ErrorIs(t, err, ErrUnavailable)
			}
			t.Logf("%d writes acknowledged, %d failed; the first failure: %v; the cause: %v", len(ids), len(fails), fails[0], UnavailableCause(fails[0]))
			have := map[string]bool{}
			for _, d := range deviceIDs(t, s) {
				have[d] = true
			}
			for _, id := range ids {
				require.True(t, have[id], "device %s was acknowledged and is lost", id)
			}
			_, err := s.Devices().Get(ctx, ids[0])
			assert.NoError(t, err, "the readers reconnect too")
		})
	}
}

func deviceIDs(t *testing.T, s *Store) []string {
	t.Helper()
	var ids []string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ds, err := s.Devices().All(context.Background())
		require.NoError(c, err)
		ids = ids[:0]
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
	}, 10*time.Second, 10*time.Millisecond)
	return ids
}

func waitDevices(t *testing.T, s *Store, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(deviceIDs(t, s)) >= n }, 30*time.Second, 10*time.Millisecond, "never %d devices", n)
}

// PostgreSQL's text holds neither NUL nor invalid UTF-8, which a device's
// error may hold: such bytes are kept as U+FFFD rather than the write
// refused.
func TestTextPostgreSQLCannotHoldIsKeptWithReplacementCharacters(t *testing.T) {
	s, _ := openTestAt(t, pgtest.Shared(t).NewDatabase(t))
	insertCommand(t, s, "r1")
	write(t, s, func(tx *Tx) error {
		_, err := tx.Commands().RecordResults("kiosk-1", "r1", []protocol.Result{{Status: protocol.ResultFailure, Error: "nul\x00 and \xff", CallID: "c1"}})
		return err
	})
	audit, err := s.Audit().List(context.Background(), AuditFilter{Limit: 10})
	require.NoError(t, err)
	assert.Equal(t, "nul\uFFFD and \uFFFD", audit[0].Error)
}

// Nodes that start together on a new database migrate it once.
func TestStoresOpeningANewDatabaseAtOnceMigrateItOnce(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(context.Background(), dsn, Options{})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
}

func TestPlaceholdersAreNumberedOutsideQuotes(t *testing.T) {
	assert.Equal(t, `SELECT a FROM t WHERE x = $1 AND y = '?' AND "z?" = $2`,
		pgbatch.Numbered(`SELECT a FROM t WHERE x = ? AND y = '?' AND "z?" = ?`))
	assert.Equal(t, `SELECT 1`, pgbatch.Numbered(`SELECT 1`))
}

// The SQLSTATEs of a database that cannot write now are ErrUnavailable;
// those of a statement refused for what it asks are not. A full disk
// cannot be had here on demand, as SQLite's max_page_count gives; its
// code is PostgreSQL's documented 53100.
func TestPostgreSQLErrorsOfTheDatabaseAreUnavailable(t *testing.T) {
	for code, want := range map[string]bool{
		"53100": true,  // disk_full
		"53200": true,  // out_of_memory
		"53300": true,  // too_many_connections
		"57P01": true,  // admin_shutdown
		"57P03": true,  // cannot_connect_now
		"08006": true,  // connection_failure
		"58030": true,  // io_error
		"40001": true,  // serialization_failure
		"25006": true,  // read_only_sql_transaction
		"23505": false, // unique_violation
		"23503": false, // foreign_key_violation
		"42601": false, // syntax_error
		"P0001": false, // raise_exception: the audit log's trigger
	} {
		err := fmt.Errorf("store: x: %w", &pgconn.PgError{Code: code, Message: "m", Severity: "ERROR"})
		assert.Equal(t, want, errors.Is(unavailable(err), ErrUnavailable), code)
		if want {
			assert.Equal(t, "PostgreSQL: ERROR: m (SQLSTATE "+code+")", UnavailableCause(unavailable(err)).Error())
		}
	}
}

// A database URL in a log or an error shows no password, in its user
// part or its query, and nothing of one that does not parse.
func TestRedactURLHidesPasswordsWhereverTheyAre(t *testing.T) {
	for _, dsn := range []string{
		"postgres://aip:s3cret@db:5432/edgeaip",
		"postgres://aip@db/edgeaip?password=s3cret&sslmode=require",
		"postgres://aip:s3cret@db:bad-port/edgeaip",
	} {
		got := RedactURL(dsn)
		assert.NotContains(t, got, "s3cret", dsn)
	}
	assert.Contains(t, RedactURL("postgres://aip:s3cret@db:5432/edgeaip"), "db:5432/edgeaip", "the rest stays")
}

// A write whose caller stops waiting is never committed, whether it waits
// in the queue or its statement hangs on a connection that drops every
// packet: its caller returns at once, with its context's cause; once the
// connection answers again, the batch is rolled back and run again
// without it, and the writer goes on.
func TestAWriteGivenUpWhileAStatementHangsOnTheWireIsNeverCommitted(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	link := blackhole.StartTo(t, "unix", pgtest.Socket(t, dsn))
	s, _ := openTestAt(t, pgtest.Through(t, dsn, link.Addr()))
	t.Cleanup(link.Heal) // before the store closes, which waits for its writer
	ctx := context.Background()
	create := func(id string) func(*Tx) error {
		return func(tx *Tx) error { return tx.Devices().Create(id, "h-"+id, nil) }
	}
	write(t, s, create("before"))

	hungCtx, giveUpHung := context.WithCancelCause(ctx)
	running, cut := make(chan struct{}), make(chan struct{})
	hung := make(chan error, 1)
	go func() {
		hung <- s.Write(hungCtx, func(tx *Tx) error {
			close(running)
			<-cut
			return create("hung")(tx) // its statement goes out on a cut link
		})
	}()
	<-running
	link.Cut()
	close(cut)
	queuedCtx, giveUpQueued := context.WithCancelCause(ctx)
	queued := make(chan error, 1)
	go func() { queued <- s.Write(queuedCtx, create("queued")) }()

	stopped := errors.New("the caller stopped waiting")
	giveUpHung(stopped)
	giveUpQueued(stopped)
	for _, ch := range []chan error{hung, queued} {
		select {
		case err := <-ch:
			assert.ErrorIs(t, err, stopped)
		case <-time.After(10 * time.Second):
			t.Fatal("a write given up still waits for a statement the database does not answer")
		}
	}

	link.Heal()
	write(t, s, create("after"))
	for id, want := range map[string]bool{"before": true, "hung": false, "queued": false, "after": true} {
		_, err := s.Devices().Get(ctx, id)
		assert.Equal(t, want, err == nil, "device %q recorded: %v", id, err)
	}
}
