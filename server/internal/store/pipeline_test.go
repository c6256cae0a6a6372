package store

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundTrips is a proxy to a test PostgreSQL's socket that counts the
// round trips made through it: the ReadyForQuery messages its server
// sends, one at the end of each pipeline (a Sync) and each simple query.
type roundTrips struct {
	n    atomic.Int64
	addr string
}

// countRoundTrips starts a roundTrips proxy to socket, stopped when t
// ends.
func countRoundTrips(t *testing.T, socket string) *roundTrips {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	rt := &roundTrips{addr: ln.Addr().String()}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("unix", socket)
			if err != nil {
				client.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, client, server)
			mu.Unlock()
			wg.Go(func() { io.Copy(server, client); server.Close() })
			wg.Go(func() { rt.copyCounting(client, server); client.Close() })
		}
	})
	return rt
}

// copyCounting copies the server's messages (a type byte, then a length
// that counts itself) to the client, counting the ReadyForQuery ones.
func (rt *roundTrips) copyCounting(client io.Writer, server io.Reader) {
	r := bufio.NewReader(server)
	for {
		var head [5]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return
		}
		if head[0] == 'Z' {
			rt.n.Add(1)
		}
		if _, err := client.Write(head[:]); err != nil {
			return
		}
		if _, err := io.CopyN(client, r, int64(binary.BigEndian.Uint32(head[1:]))-4); err != nil {
			return
		}
	}
}

// On PostgreSQL each of a command's two writes, its record (with the
// session it makes up) and its outcome (its results, their audit entries
// and its session's end), goes out with its BEGIN and COMMIT in one
// round trip, once its statements are prepared: one round trip per
// commit, where each statement was one (issue 42: five to six each).
func TestACommandsWritesTakeOneRoundTripEachOnPostgreSQL(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	rt := countRoundTrips(t, pgtest.Socket(t, dsn))
	s, _ := openTestAt(t, pgtest.Through(t, dsn, rt.addr))
	require.NoError(t, writeSingleCommand(s, 0)) // prepares each statement, once

	for i := 1; i <= 3; i++ {
		ses, c := singleCommand(i)
		before := rt.n.Load()
		require.NoError(t, recordSingleCommand(s, ses, c))
		record := rt.n.Load() - before
		before = rt.n.Load()
		require.NoError(t, endSingleCommand(s, ses, c))
		outcome := rt.n.Load() - before
		assert.Equal(t, int64(1), record, "round trips of command %d's record", i)
		assert.Equal(t, int64(1), outcome, "round trips of command %d's outcome", i)
	}
	cmd, err := s.Commands().Get(context.Background(), "0190a000-0000-7000-8000-000000000003")
	require.NoError(t, err)
	assert.Equal(t, CommandDone, cmd.Status)
	audit, err := s.Audit().List(context.Background(), AuditFilter{Limit: 100})
	require.NoError(t, err)
	assert.Len(t, audit, 8, "two entries for each of the four commands")
}

// A write whose statement fails half-way through a pipeline, between two
// that succeed, commits nothing, and its caller hears the store's error
// (ErrExists, as without the pipeline), not PostgreSQL's: the batch runs
// again with that write's statements one by one. The writes batched
// with it commit.
func TestAWriteThatFailsHalfWayThroughAPipelineCommitsNothingAndHearsTheStoresError(t *testing.T) {
	s, _ := openTestAt(t, pgtest.Shared(t).NewDatabase(t))
	ctx := context.Background()
	ses, _ := singleCommand(0)
	write(t, s, func(tx *Tx) error { return tx.Sessions().Insert(ses) })

	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() {
			errs[i] = s.Write(ctx, func(tx *Tx) error {
				if err := tx.Devices().Create(fmt.Sprintf("before-%02d", i), fmt.Sprintf("hb%02d", i), nil); err != nil {
					return err
				}
				if i == 7 {
					if err := tx.Sessions().Insert(ses); err != nil { // taken
						return err
					}
				}
				return tx.Devices().Create(fmt.Sprintf("after-%02d", i), fmt.Sprintf("ha%02d", i), nil)
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		_, before := s.Devices().Get(ctx, fmt.Sprintf("before-%02d", i))
		_, after := s.Devices().Get(ctx, fmt.Sprintf("after-%02d", i))
		if i == 7 {
			require.ErrorIs(t, err, ErrExists)
			assert.NotErrorIs(t, err, ErrUnavailable)
			assert.ErrorIs(t, before, ErrNotFound, "the statement before the one that failed is undone")
			assert.ErrorIs(t, after, ErrNotFound)
			continue
		}
		require.NoError(t, err, "write %d", i)
		assert.NoError(t, before)
		assert.NoError(t, after)
	}
}

// A command's outcome is written taking the command to be pending, as it
// is when its results come in time. If it failed meanwhile (its timeout),
// the database refuses the batch, which runs again with the write eager:
// the write then finds the command failed and records its results as
// late, with their audit entries, once.
func TestResultsTakenToBeInTimeThatAreLateAreRecordedLateOnce(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	ses, c := singleCommand(0)
	require.NoError(t, recordSingleCommand(s, ses, c))
	write(t, s, func(tx *Tx) error { _, err := tx.Commands().Fail(c.ResponseID, "timed out"); return err })

	require.NoError(t, endSingleCommand(s, ses, c))
	got, err := s.Commands().Get(ctx, c.ResponseID)
	require.NoError(t, err)
	assert.Equal(t, CommandDone, got.Status)
	assert.True(t, got.Late)
	audit, err := s.Audit().List(ctx, AuditFilter{Limit: 100})
	require.NoError(t, err)
	require.Len(t, audit, 4, "the failure's two entries, then the late results'")
	assert.True(t, audit[2].Late)
	assert.ErrorIs(t, endSingleCommand(s, ses, c), ErrDuplicate, "and only once")
}

// PostgreSQL stopped (fast, and as a crash) while commands are recorded
// and their outcomes written, each batch in one pipeline with its COMMIT:
// every outcome acknowledged is on record once it is back, with its
// audit entries.
func TestAPostgreSQLRestartUnderPipelinesLosesNoOutcomeAcknowledged(t *testing.T) {
	for name, stop := range map[string]func(*pgtest.Cluster) error{"fast": (*pgtest.Cluster).Stop, "crash": (*pgtest.Cluster).Kill} {
		t.Run(name, func(t *testing.T) {
			c := pgtest.Start(t)
			s, _ := openTestAt(t, c.NewDatabase(t))
			var (
				mu      sync.Mutex
				acked   []Command
				failed  []error
				wg      sync.WaitGroup
				next    atomic.Int64
				written = make(chan struct{}, 1<<16)
			)
			quit := make(chan struct{})
			for range 4 {
				wg.Go(func() {
					for {
						select {
						case <-quit:
							return
						default:
						}
						ses, cmd := singleCommand(int(next.Add(1)))
						err := recordSingleCommand(s, ses, cmd)
						if err == nil {
							err = endSingleCommand(s, ses, cmd)
						}
						mu.Lock()
						if err == nil {
							acked = append(acked, cmd)
						} else {
							failed = append(failed, err)
						}
						mu.Unlock()
						if err != nil {
							time.Sleep(10 * time.Millisecond) // as unrecorded backs off
							continue
						}
						written <- struct{}{}
					}
				})
			}
			waitFor := func(n int) {
				for range n {
					<-written
				}
			}
			waitFor(50)
			require.NoError(t, stop(c))
			require.Eventually(t, func() bool { return s.WriteFailure() != nil }, 10*time.Second, 10*time.Millisecond)
			require.NoError(t, c.Start())
			for len(written) > 0 {
				<-written
			}
			waitFor(50)
			close(quit)
			wg.Wait()

			assert.NotEmpty(t, failed, "writes failed while PostgreSQL was away")
			for _, err := range failed {
				require.ErrorIs(t, err, ErrUnavailable)
			}
			t.Logf("%d outcomes acknowledged, %d writes failed", len(acked), len(failed))
			ctx := context.Background()
			audit, err := s.Audit().List(ctx, AuditFilter{Limit: 1 << 20})
			require.NoError(t, err)
			entries := map[string]int{}
			for _, e := range audit {
				entries[e.ResponseID]++
			}
			for _, cmd := range acked {
				got, err := s.Commands().Get(ctx, cmd.ResponseID)
				require.NoError(t, err, "command %s was acknowledged and is lost", cmd.ResponseID)
				assert.Equal(t, CommandDone, got.Status, "command %s", cmd.ResponseID)
				assert.Equal(t, 2, entries[cmd.ResponseID], "audit entries of command %s", cmd.ResponseID)
			}
		})
	}
}

// A write whose caller may give it up (its context can end) commits as
// any other, on either database: on PostgreSQL its batch's statements go
// out before its COMMIT, in two round trips.
func TestAWriteItsCallerMayGiveUpCommits(t *testing.T) {
	s, _ := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, s.Write(ctx, func(tx *Tx) error { return tx.Devices().Create("d1", "h1", nil) }))
	require.NoError(t, s.WriteUnsynced(ctx, func(tx *Tx) error { return tx.Devices().Create("d2", "h2", nil) }))
	for _, id := range []string{"d1", "d2"} {
		_, err := s.Devices().Get(context.Background(), id)
		assert.NoError(t, err, id)
	}
}

// countedStoreWithSession is a store on a fresh PostgreSQL database,
// whose round trips rt counts, holding one session.
func countedStoreWithSession(t *testing.T) (*Store, *roundTrips, Session) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	rt := countRoundTrips(t, pgtest.Socket(t, dsn))
	s, _ := openTestAt(t, pgtest.Through(t, dsn, rt.addr))
	ses, _ := singleCommand(0)
	write(t, s, func(tx *Tx) error { return tx.Sessions().Insert(ses) })
	return s, rt, ses
}

// A transaction of many statements (a store copied into PostgreSQL)
// goes out as it is written, in pipelines of a bounded size, not held
// whole until its COMMIT.
func TestATransactionOfManyStatementsGoesOutInBoundedPipelines(t *testing.T) {
	s, rt, ses := countedStoreWithSession(t)
	const n = 2500
	before := rt.n.Load()
	write(t, s, func(tx *Tx) error {
		for i := range n {
			if err := tx.IdempotencyKeys().Insert(IdempotencyKey{Identity: "ann", Key: fmt.Sprint(i), Fingerprint: "f"}, ses.ID); err != nil {
				return err
			}
		}
		return nil
	})
	// One to prepare the statement, one a pipeline full, one with the COMMIT.
	assert.GreaterOrEqual(t, rt.n.Load()-before, int64(1+n/maxQueued+1), "a pipeline of %d statements at most", maxQueued)
}

// Writes that each take a row to be there, and find it is not (fences of
// sessions another node adopted), cost a batch a try each, at most: not
// their number squared in round trips, which a heartbeat batched with
// them would wait for.
func TestWritesThatMissTheirRowsCostTheirBatchLinearly(t *testing.T) {
	s, rt, ses := countedStoreWithSession(t)
	const n = 50
	before := rt.n.Load()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			err := s.Write(context.Background(), func(tx *Tx) error {
				return tx.Sessions().Fence(ses.ID, Owner{Node: "gone", Epoch: 9})
			})
			assert.ErrorIs(t, err, ErrAdopted)
		})
	}
	wg.Wait()
	assert.Less(t, rt.n.Load()-before, int64(6*n), "round trips for %d misses", n)
}

// A node's heartbeat, batched with writes that fail in the pipeline (a
// statement that fails, fences that miss), is committed in that batch,
// in round trips that grow with the failures alone: batching never
// fails it, holds it for a later batch, or makes it wait on the failures
// squared. The cluster's fencing counts on it landing within its bound.
func TestAHeartbeatBatchedWithFailingWritesIsCommittedInTheBatch(t *testing.T) {
	s, rt, ses := countedStoreWithSession(t)
	var epoch int64
	write(t, s, func(tx *Tx) (err error) {
		epoch, _, err = tx.Cluster().JoinNode("node-1", 1, "", time.Minute)
		return err
	})
	var before time.Time
	row := s.readRow(context.Background(), `SELECT heartbeat_at FROM cluster_nodes WHERE node_id = 'node-1'`)
	require.NoError(t, row.Scan(&before))

	req := func(fn func(*Tx) error) writeReq { return writeReq{done: make(chan error, 1), fn: fn} }
	const misses = 20
	var batch []writeReq
	for i := range misses {
		batch = append(batch, req(func(tx *Tx) error { return tx.Sessions().Fence(ses.ID, Owner{Node: "gone", Epoch: int64(i)}) }))
	}
	batch = append(batch, req(func(tx *Tx) error { return tx.Sessions().Insert(ses) })) // fails: it exists
	heartbeat := req(func(tx *Tx) error { return tx.Cluster().Heartbeat("node-1", epoch, NodeUp) })
	batch = append(batch, heartbeat)
	start := rt.n.Load()
	s.commit(batch) // as the writer would, with nothing else writing
	require.NoError(t, <-heartbeat.done, "the heartbeat is committed in its batch")
	for i := range misses {
		assert.ErrorIs(t, <-batch[i].done, ErrAdopted)
	}
	assert.ErrorIs(t, <-batch[misses].done, ErrExists)
	assert.Less(t, rt.n.Load()-start, int64(5*misses), "round trips grow with the failures alone, not their square (%d)", misses*misses)
	var after time.Time
	row = s.readRow(context.Background(), `SELECT heartbeat_at FROM cluster_nodes WHERE node_id = 'node-1'`)
	require.NoError(t, row.Scan(&after))
	assert.True(t, after.After(before), "heartbeat_at moved: %s, then %s", before, after)
}
