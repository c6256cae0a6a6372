package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/walcheckpoint"
)

// A single command, as the dispatcher records it (its session and the
// command, then the results, the audit entries and the session's end,
// in two commits), writes under 15 WAL frames, one per B-tree page it
// changes: 19.5 before sessions_owner, sessions_finished, the unnamed
// sessions' entries in sessions_task and the audit log's
// sqlite_sequence row went (server/RATIONALE.md, "Pages per command").
// A count of pages, not a time: the same on any machine.
func TestASingleCommandWritesFewPages(t *testing.T) {
	sqliteOnly(t, "WAL frames are SQLite's")
	path := filepath.Join(t.TempDir(), "pages.db")
	// No checkpoint while the test counts, the checkpointer's or the
	// writer's: the WAL only grows. Set before the first write, which
	// the writer receives after it.
	s, err := Open(context.Background(), path, Options{CheckpointDelay: time.Hour})
	require.NoError(t, err)
	defer s.Close()
	s.ckpt.HoldRestarts()
	frames := func() int64 {
		fi, err := os.Stat(path + "-wal")
		require.NoError(t, err)
		return (fi.Size() - walHeader) / walcheckpoint.FrameSize
	}
	const warm, counted = 50, 200
	var total int64
	for i := range warm + counted {
		before := frames()
		require.NoError(t, writeSingleCommand(s, i))
		if i >= warm {
			total += frames() - before
		}
	}
	perCommand := float64(total) / counted
	t.Logf("%.2f WAL frames per command", perCommand)
	assert.LessOrEqual(t, perCommand, 15.0)
}

// walHeader is the size of the WAL file's header, before its first frame.
const walHeader = 32

// The queries that an index dropped by migration 15 served search
// another: those of unfinished sessions by owner (a single node's start,
// a cluster's adoption) the index by state, for the unfinished ones;
// expiry the index by creation time. Those by name search the index of
// named sessions. None reads every session, nor every command: the
// commands a single node's start fails are read from the index of
// pending ones.
func TestQueriesOfDroppedIndexesSearchAnother(t *testing.T) {
	sqliteOnly(t, "PostgreSQL plans an empty table with a sequential scan, whatever its indexes")
	s, _ := openTest(t)
	const (
		byState    = "SEARCH sessions USING INDEX sessions_state (state=?)"
		byCreation = "SEARCH sessions USING INDEX sessions_created (created_at<?)"
		byName     = "SEARCH sessions USING INDEX sessions_task (task_name=?)"
	)
	for q, want := range map[string][]string{
		`UPDATE sessions SET state = 'failed', error = ?, finished_at = ? WHERE state IN ` + unfinished + ` AND owner_node = ''`:                    {byState},
		`UPDATE sessions SET owner_node = ?, owner_epoch = ? WHERE owner_node = ? AND owner_epoch = ? AND state IN ` + unfinished + ` RETURNING id`: {byState},
		`SELECT DISTINCT owner_node, owner_epoch FROM sessions WHERE state IN ` + unfinished:                                                        {byState},
		`DELETE FROM sessions WHERE ` + finishedBefore:                                                                                              {byCreation},
		`DELETE FROM commands WHERE session_id IN (SELECT id FROM sessions WHERE ` + finishedBefore + `)`: {
			"commands_session (session_id=?)", byCreation},
		`SELECT id FROM sessions WHERE ` + named + ` AND parent_id = '' ORDER BY created_at DESC LIMIT 1`: {byName},
		`SELECT id FROM sessions WHERE ` + named + ` ORDER BY created_at DESC, id DESC LIMIT ?`:           {byName},
		// The pending commands alone, then each one's session by its key.
		interruptedCommands: {"SCAN commands USING INDEX commands_pending", "SEARCH sessions USING INDEX sqlite_autoindex_sessions_1 (id=?)"},
	} {
		plan := queryPlan(t, s, q)
		for _, w := range want {
			assert.Contains(t, plan, w, q)
		}
		assert.NotContains(t, plan, "SCAN sessions", q)
		assert.NotRegexp(t, `SCAN commands($|;| USING INDEX commands_(session|device))`, plan, q)
	}
}

// queryPlan is SQLite's EXPLAIN QUERY PLAN of q, its lines joined by "; ".
func queryPlan(t *testing.T, s *Store, q string) string {
	t.Helper()
	args := make([]any, strings.Count(q, "?"))
	rows, err := s.rdb.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+q, args...)
	require.NoError(t, err)
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	return strings.Join(plan, "; ")
}
