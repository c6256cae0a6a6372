package e2e

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A burst of reads on a real aip-server once left a database handle open
// for every other read, for minutes. The readers are a pool of max(4, 2 ×
// GOMAXPROCS) connections now. BenchmarkReadBurst measures the memory.
func TestABurstOfReadsLeavesAServerProcessFewDatabaseFiles(t *testing.T) {
	bin := testenv.Command(t, "aip-server")
	data := t.TempDir()
	srv := startServerProcess(t, bin, "127.0.0.1:0", data)
	pid := srv.cmd.Process.Pid
	paths := tasksToRead(t, srv, 20)
	idle := testenv.OpenFilesIn(t, pid, data)
	pool := max(4, 2*runtime.GOMAXPROCS(0)) // the server's GOMAXPROCS is this process's
	for _, n := range []int{2000, 3000} {
		testenv.GetAtOnce(t, srv.api.BaseURL, srv.api.Token, paths, n)
		// A reader's connection holds the database and its WAL open.
		files := testenv.OpenFilesIn(t, pid, data)
		assert.LessOrEqual(t, files, idle+2*pool, "after %d reads at once", n)
		t.Logf("after %d reads at once: %d database files (%d before), %.0f MiB resident", n, files, idle, testenv.ResidentKiB(t, pid)/1024)
	}
}

// tasksToRead runs n single commands, each with 8 KiB of parameters, on a
// device that is offline (each is recorded, and fails at once), and
// returns the API paths of their tasks.
func tasksToRead(t testing.TB, srv *serverProcess, n int) []string {
	t.Helper()
	srv.enrollToken(t, "offline-1")
	params := map[string]any{"blob": strings.Repeat("x", 8<<10)}
	paths := make([]string, n)
	for i := range paths {
		resp, err := srv.api.Command(context.Background(), "offline-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo", Parameters: params}}})
		require.NoError(t, err)
		paths[i] = "/api/tasks/" + resp.SessionID
	}
	return paths
}
