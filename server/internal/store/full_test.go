package store

import (
	"context"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bigResults are results too big for the pages a full database has left.
func bigResults() []protocol.Result {
	return []protocol.Result{{Status: protocol.ResultSuccess, Result: strings.Repeat("r", 256<<10), CallID: "c1"}, {Status: protocol.ResultSuccess, CallID: "c2"}}
}

// A database that cannot grow (SQLITE_FULL, from PRAGMA max_page_count as
// from a full disk) fails writes with ErrUnavailable, says so until a write
// succeeds again, and counts the failures.
func TestAFullDatabaseFailsWritesAsUnavailableUntilItHasRoom(t *testing.T) {
	sqliteOnly(t, "SetMaxPages fills a SQLite file; postgres_test.go stops PostgreSQL instead")
	s, _ := openTest(t)
	ctx := context.Background()
	insertCommand(t, s, "r1")
	require.NoError(t, s.SetMaxPages(ctx, 0))
	assert.NoError(t, s.WriteFailure())

	err := s.Write(ctx, func(tx *Tx) error { _, err := tx.Commands().RecordResults("kiosk-1", "r1", bigResults()); return err })
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Contains(t, err.Error(), "database or disk is full")
	assert.EqualError(t, s.WriteFailure(), "database or disk is full (13)", "the database's own words, naming nothing the write held")
	assert.Equal(t, uint64(1), s.WriteFailures())
	c, err := s.Commands().Get(ctx, "r1")
	require.NoError(t, err)
	assert.Equal(t, CommandPending, c.Status, "nothing of the failed write stands")

	// Writes that fail for what they are, not for the database, are not
	// the database's failures.
	err = s.Write(ctx, func(tx *Tx) error { _, err := tx.Commands().RecordResults("kiosk-2", "r1", nil); return err })
	assert.ErrorIs(t, err, ErrWrongDevice)
	assert.NotErrorIs(t, err, ErrUnavailable)
	assert.Equal(t, uint64(1), s.WriteFailures())

	require.NoError(t, s.SetMaxPages(ctx, 1<<30))
	write(t, s, func(tx *Tx) error { _, err := tx.Commands().RecordResults("kiosk-1", "r1", bigResults()); return err })
	assert.NoError(t, s.WriteFailure(), "healthy again once a write succeeds")
}

// SQLite may roll back the whole transaction on SQLITE_FULL, so one write
// the database cannot take fails every write committed with it: none of
// them stands, and each says the database was unavailable.
func TestAWriteTheDatabaseCannotTakeFailsItsWholeBatch(t *testing.T) {
	sqliteOnly(t, "SetMaxPages fills a SQLite file; postgres_test.go stops PostgreSQL instead")
	s, _ := openTest(t)
	ctx := context.Background()
	ids := []string{"r1", "r2", "r3", "r4"}
	for _, id := range ids {
		insertCommand(t, s, id)
	}
	require.NoError(t, s.SetMaxPages(ctx, 0))
	batch := make([]writeReq, len(ids))
	for i, id := range ids {
		results := []protocol.Result{{Status: protocol.ResultSuccess, CallID: "c1"}}
		if id == "r2" {
			results = bigResults()
		}
		batch[i] = writeReq{done: make(chan error, 1), fn: func(tx *Tx) error {
			_, err := tx.Commands().RecordResults("kiosk-1", id, results)
			return err
		}}
	}
	s.commit(batch) // as the writer would, with nothing else writing
	for i, r := range batch {
		assert.ErrorIs(t, <-r.done, ErrUnavailable, "write %d", i)
	}
	assert.Equal(t, uint64(4), s.WriteFailures())
	for _, id := range ids {
		c, err := s.Commands().Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, CommandPending, c.Status, id)
	}
	require.NoError(t, s.SetMaxPages(ctx, 1<<30))
	write(t, s, func(tx *Tx) error { _, err := tx.Commands().RecordResults("kiosk-1", "r1", nil); return err })
}
