package server

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// 2000 concurrent reads once left a thousand database handles open, and
// 100 MB of memory with them, for minutes. Readers are a bounded pool now,
// and idle readers are closed.
func TestABurstOfReadsHoldsNoMoreDatabaseFilesThanThePoolNeeds(t *testing.T) {
	const readers = 4
	ts := newTestServer(t, func(c *Config) { c.Store = StoreConfig{Readers: readers, ReaderIdle: 100 * time.Millisecond} })
	ts.enroll("kiosk-1")
	resp, err := ts.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
	require.NoError(t, err)
	files := func() int { return testenv.OpenFilesIn(t, os.Getpid(), ts.dir) }
	idle := files() // the writer's

	testenv.GetAtOnce(t, ts.http.URL, ts.api.Token, []string{"/api/tasks/" + resp.SessionID}, 2000)
	// A reader's connection holds the database and its WAL open.
	after := files()
	assert.LessOrEqual(t, after, idle+2*readers, "right after the burst")
	// Idle readers are closed; SQLite may keep a closed connection's file
	// for the next one to reuse while the writer holds the database.
	require.Eventually(t, func() bool { return files() <= idle+readers }, 10*time.Second, 20*time.Millisecond, "idle readers are closed")
	t.Logf("database files: %d before the burst, %d right after, %d once idle", idle, after, files())
}
