package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAnAgentOfTwoServersMovesToTheOtherWhenItsServerIsKilled runs two
// real aip-server processes that know the same device, with the same
// token (the second starts on a copy of the first's data dir: single
// nodes, not a cluster), and an agent given both. Killing the one it is
// linked to moves it to the other, where a command runs.
func TestAnAgentOfTwoServersMovesToTheOtherWhenItsServerIsKilled(t *testing.T) {
	bin := testenv.Command(t, "aip-server")
	first := t.TempDir()
	srv := startServerProcess(t, bin, "127.0.0.1:0", first)
	tokenFile := srv.enroll(t, "kiosk-1")
	srv.kill(t)
	second := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.CopyFS(second, os.DirFS(first)))
	servers := []*serverProcess{startServerProcess(t, bin, srv.addr, first), startServerProcess(t, bin, "127.0.0.1:0", second)}

	runAgent(t, agent.Config{
		ID: "kiosk-1", ServerURLs: []string{servers[0].wsURL(), servers[1].wsURL()}, TokenFile: tokenFile,
		ToolDirs: []string{"fixtures=" + testenv.TestdataTools()},
		DataDir:  t.TempDir(), CompileCacheDir: sharedCompileCache(t), Logger: testLogger(),
	})
	on := -1
	require.Eventually(t, func() bool {
		for i, s := range servers {
			if s.online(t, "kiosk-1") {
				on = i
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, "the agent linked to neither server")

	servers[on].kill(t)
	other := servers[1-on]
	require.Eventually(t, func() bool { return other.online(t, "kiosk-1") }, 20*time.Second, 20*time.Millisecond,
		"the agent moved to the other server")
	resp, err := other.api.Command(context.Background(), "kiosk-1", api.CommandRequest{
		Actions: []protocol.Command{{ToolName: "echo", Parameters: map[string]any{"moved": true}}}})
	require.NoError(t, err)
	assert.True(t, resp.Succeeded(), "%+v", resp.Results)
}
