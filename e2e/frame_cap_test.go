package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/server"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Five reads of 900 KB make a reply larger than the 4 MiB frame cap. The
// agent answers with as many of them as fit, fails the others naming the
// cap, and the device goes on answering: an unsendable reply once blocked
// every later result.
func TestResultsOverTheFrameCapComeBackAsFailuresAndBlockNothing(t *testing.T) {
	c := newCluster(t)
	files := t.TempDir()
	path := filepath.Join(files, "big.txt")
	const size = 900_000
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("x", size)), 0o644))
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), withMounts(sandbox.Mount{HostPath: files, GuestPath: files}))

	var reads []protocol.Command
	for range 5 {
		reads = append(reads, protocol.Command{ToolName: "read_file", Parameters: map[string]any{"path": path, "max_bytes": size}})
	}
	resp, err := c.api.Command(t.Context(), "kiosk-1", api.CommandRequest{Actions: reads, Timeout: "30s"})
	require.NoError(t, err)
	require.Len(t, resp.Results, 5)
	var failed, read int
	for _, r := range resp.Results {
		switch r.Status {
		case protocol.ResultFailure:
			failed++
			assert.Regexp(t, `^result of \d+ bytes exceeds the link's frame cap of 4194304 bytes$`, r.Error)
		case protocol.ResultSuccess:
			read++
			assert.Len(t, r.Result.(map[string]any)["content"], size)
		}
	}
	assert.Equal(t, 1, failed, "only as many fail as must: %+v", resp.Status)
	assert.Equal(t, 4, read)

	r := onlyResult(t, c.exec("kiosk-1", "echo", map[string]any{"msg": "still here"}, 10*time.Second))
	assert.Equal(t, protocol.ResultSuccess, r.Status, r.Error)
}

// A server whose frame cap is below the agent's closes the link with 1009
// on results it will not take. The agent fails them in its next link
// instead of sending them first on every link, which held up every later
// result for good.
func TestResultsTooLargeForTheServerComeBackAsFailuresAndBlockNothing(t *testing.T) {
	c := newCluster(t, func(cfg *server.Config) { cfg.Conn.MaxFrameBytes = 1 << 20 })
	files := t.TempDir()
	path := filepath.Join(files, "big.txt")
	const size = 600_000 // two make a reply under the agent's 4 MiB, over the server's 1 MiB
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("x", size)), 0o644))
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), withMounts(sandbox.Mount{HostPath: files, GuestPath: files}))

	read := protocol.Command{ToolName: "read_file", Parameters: map[string]any{"path": path, "max_bytes": size}}
	resp, err := c.api.Command(t.Context(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{read, read}, Timeout: "30s"})
	require.NoError(t, err)
	require.Len(t, resp.Results, 2)
	for _, r := range resp.Results {
		assert.Equal(t, protocol.ResultFailure, r.Status)
		assert.Regexp(t, `^results of \d+ bytes are more than the server takes in a frame \(it closed the link with 1009\)$`, r.Error)
	}

	r := onlyResult(t, c.exec("kiosk-1", "echo", map[string]any{"msg": "still here"}, 10*time.Second))
	assert.Equal(t, protocol.ResultSuccess, r.Status, r.Error)
}
