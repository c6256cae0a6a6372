package store

import (
	"context"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The writer's statements go to the driver without database/sql, which
// converts arguments and scanned values elsewhere: what a write reads
// back in its transaction is what the readers (database/sql) read, NULLs,
// flags, integers and all, on either backend.
func TestTheWriterReadsRowsAsTheReadersDo(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	c := Command{ResponseID: "r1", DeviceID: "kiosk-1", SessionID: "s1", Actor: "operator", By: By{Identity: "ann", TokenID: "t1"},
		Step: 3, Attempt: 2, Actions: twoActions(), Tools: []ToolRef{{Namespace: "stock", SHA256: "abc"}, {}},
		Timeout: 1500 * time.Millisecond, WaitForDevice: true}
	write(t, s, func(tx *Tx) error { return tx.Commands().Insert(c) })
	same := func() {
		t.Helper()
		var inWrite Command
		write(t, s, func(tx *Tx) (err error) { inWrite, err = tx.command("r1"); return err })
		read, err := s.Commands().Get(ctx, "r1")
		require.NoError(t, err)
		assert.Equal(t, read, inWrite)
	}
	same() // pending: no results, no finish time (NULLs)
	results := []protocol.Result{{Status: protocol.ResultFailure, Error: "no", CallID: "c1"}, {Status: protocol.ResultSuccess, CallID: "c2"}}
	write(t, s, func(tx *Tx) error { _, err := tx.Commands().Fail("r1", "timed out"); return err })
	write(t, s, func(tx *Tx) error { _, err := tx.Commands().RecordResults("kiosk-1", "r1", results); return err })
	same() // done, late

	var n int
	write(t, s, func(tx *Tx) error {
		return tx.queryRow(`SELECT count(*) FROM commands WHERE response_id = ?`, "nobody").Scan(&n)
	})
	assert.Zero(t, n)
	err := s.Write(ctx, func(tx *Tx) error { _, err := tx.command("nobody"); return err })
	assert.ErrorIs(t, err, ErrNotFound, "no row is sql.ErrNoRows, as database/sql says")
}

// A statement given fewer arguments than it has placeholders fails, as
// through database/sql, rather than binding NULL for the rest.
func TestAWritersStatementWithTheWrongArgumentsFails(t *testing.T) {
	s, _ := openTest(t)
	err := s.Write(context.Background(), func(tx *Tx) error {
		_, err := tx.exec(`UPDATE devices SET wire = ? WHERE id = ?`, "json")
		return err
	})
	assert.Error(t, err)
}
