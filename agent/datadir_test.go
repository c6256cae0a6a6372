package agent

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The agent's data dir holds secrets (the endpoint's token, the outbox's
// results, compiled code it will run): it and everything in it are the
// owner's alone.
func TestTheAgentsDataDirIsTheOwnersAlone(t *testing.T) {
	p := newTestPeer(t)
	a := startAgent(t, serving(t, agentConfig(t, p.url())))
	p.next(t)
	c, _ := localClient(t, a)
	res, err := c.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "pause", Arguments: map[string]any{"ms": 1}}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res)

	require.NoError(t, filepath.WalkDir(a.cfg.DataDir, func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		info, err := d.Info()
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0), info.Mode().Perm()&0o077, "%s is %v", path, info.Mode())
		return nil
	}))
	assert.False(t, a.logs.Contains("open to other users"))
}

// A data dir made wider before is warned about, with the fix.
func TestAWiderAgentDataDirIsWarnedAbout(t *testing.T) {
	p := newTestPeer(t)
	cfg := agentConfig(t, p.url())
	require.NoError(t, os.Mkdir(cfg.DataDir, 0o755))
	require.NoError(t, os.Chmod(cfg.DataDir, 0o755))
	a := startAgent(t, cfg)
	p.next(t)
	assert.True(t, a.logs.Contains("chmod 700 "+cfg.DataDir), a.logs.String())
}
