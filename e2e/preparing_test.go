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
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowToPrepare makes the agent's only tool initslow, a reactor whose
// initialization takes seconds of work, with the fuel for it.
func slowToPrepare(t *testing.T) agentOption {
	dir := initslowDir(t)
	return func(cfg *agent.Config) {
		cfg.ToolDirs = []string{"slow=" + dir}
		cfg.Limits = sandbox.Limits{Fuel: initslowFuel}
		cfg.PrepareBeforeRegister = -1 // else it is ready before the device registers
	}
}

// initslowFuel is enough fuel for initslow's initialization.
const initslowFuel = 1 << 40

// initslowDir is a tool dir that holds initslow alone, with its manifest.
func initslowDir(t *testing.T) string {
	dir := t.TempDir()
	wasm, err := os.ReadFile(filepath.Join(testenv.TestdataTools(), "reactor", "initslow.wasm"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "initslow.wasm"), wasm, 0o644))
	manifest := `{"name": "initslow", "description": "initializes slowly", "tool_type": "action", "input_schema": {"type": "object"}}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "initslow.json"), []byte(manifest), 0o644))
	return dir
}

// A command arrives while the agent, just started, still prepares its
// tool, which takes far longer than the command's timeout. The agent says
// it is preparing the tool, the server holds the timeout meanwhile, and
// the command succeeds; its task's events say "preparing initslow", and
// when it was ready.
func TestACommandWhoseToolOutlastsItsTimeoutPreparingSucceeds(t *testing.T) {
	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), slowToPrepare(t))
	const timeout = 300 * time.Millisecond
	start := time.Now()
	resp := c.exec("kiosk-1", "initslow", nil, timeout)
	took := time.Since(start)

	r := onlyResult(t, resp)
	require.Equal(t, protocol.ResultSuccess, r.Status, r.Error)
	assert.Equal(t, map[string]any{"ready": true}, r.Result)
	require.Greater(t, took, 2*timeout, "the premise: preparing the tool outlasted the command's timeout")
	var said []string
	require.NoError(t, c.api.Events(context.Background(), resp.SessionID, func(e api.TaskEvent) error {
		if e.Type == api.EventPreparing {
			said = append(said, api.PreparingText(e.Preparing))
		}
		return nil
	}))
	require.NotEmpty(t, said)
	assert.Contains(t, said[0], "preparing initslow (")
	assert.Equal(t, "initslow prepared", said[len(said)-1])
}
