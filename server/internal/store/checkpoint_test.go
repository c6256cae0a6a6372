package store

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/walcheckpoint"
)

// Under continuous writes, a command at a time as a busy server writes
// them, the WAL starts again from its beginning, reused in place, and
// its file stays under walcheckpoint.SizeLimit. Before, the checkpointer's PASSIVE
// checkpoint never caught up with the writer, the WAL never restarted,
// and its file grew by every commit's frames (48 MB after 1 500
// commands). A reader holding a snapshot meanwhile reads that snapshot,
// and the WAL, grown while the snapshot pinned it, is cut back once the
// reader is done. A count of bytes, not a time: the same on any machine.
func TestTheWALStaysSmallUnderContinuousWritesAndSnapshotsStillRead(t *testing.T) {
	sqliteOnly(t, "the WAL file is SQLite's")
	path := filepath.Join(t.TempDir(), "wal.db")
	s, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	written := 0
	// writeCommands writes n commands one after the other and returns the
	// largest the WAL file was after any of them.
	writeCommands := func(n int) (largest int64) {
		for range n {
			require.NoError(t, writeSingleCommand(s, written))
			written++
			fi, err := os.Stat(path + "-wal")
			require.NoError(t, err)
			largest = max(largest, fi.Size())
		}
		return largest
	}
	commands := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) int {
		var n int
		require.NoError(t, q.QueryRowContext(ctx, `SELECT count(*) FROM commands`).Scan(&n))
		return n
	}

	largest := writeCommands(5000)
	t.Logf("WAL file at most %d bytes across %d commands", largest, written)
	assert.LessOrEqual(t, largest, int64(walcheckpoint.SizeLimit))

	snapshot, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	require.NoError(t, err)
	before := commands(snapshot)
	require.Equal(t, written, before)
	largest = writeCommands(1000)
	t.Logf("WAL file at most %d bytes while a reader held a snapshot", largest)
	assert.Equal(t, before, commands(snapshot), "the snapshot's reader sees the writes of after it")
	var first string
	require.NoError(t, snapshot.QueryRowContext(ctx, `SELECT response_id FROM commands ORDER BY response_id LIMIT 1`).Scan(&first))
	assert.Equal(t, "0190a000-0000-7000-8000-000000000000", first)
	require.NoError(t, snapshot.Rollback())
	assert.Equal(t, written, commands(s.rdb))

	largest = writeCommands(1000)
	fi, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	t.Logf("WAL file %d bytes, at most %d over the last 1000 commands", fi.Size(), largest)
	assert.LessOrEqual(t, fi.Size(), int64(walcheckpoint.SizeLimit), "the WAL grown under the snapshot is cut back")
}
