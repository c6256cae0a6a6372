package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Item 2 of issue 43: an unknown key in the agent's config file gets a
// "did you mean", as in plans and manifests: the field of its section it
// likely misspells, or the section that has it.
func TestAnUnknownConfigKeySaysWhichFieldItLikelyMeant(t *testing.T) {
	file := filepath.Join(t.TempDir(), "agent.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`id: kiosk-1
server:
  url: ws://127.0.0.1:8700/ws
  token_fle: kiosk-1.token
tools:
  limits:
    timout: 5s
mcp_serve:
  colour: red
`), 0o644))
	out, err := exec.Command(testenv.Command(t, "aip-agent"), "--config", file).CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "%v: %s", err, out)
	for _, want := range []string{
		file + ":1: id: unknown field; did you mean device.id?",
		file + ":4: server.token_fle: unknown field; did you mean server.token_file?",
		file + ":7: tools.limits.timout: unknown field; did you mean tools.limits.timeout?",
		file + ":9: mcp_serve.colour: unknown field\n",
	} {
		assert.Contains(t, string(out), want)
	}
}
