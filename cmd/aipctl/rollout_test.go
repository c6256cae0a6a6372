package main

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A rollout file names its modules relative to itself; apply uploads them
// and says which revision it made, and a second apply of the same file
// makes none; status and history show it as a person reads them.
func TestARolloutIsAppliedFromItsFileAndShown(t *testing.T) {
	f := newFleet(t, nil)
	f.startAgent("kiosk-1", lobby, func(c *agent.Config) { c.TrustedKeys = []ed25519.PublicKey{testenv.TestKey(t)} })
	dir := t.TempDir()
	module, err := os.ReadFile(filepath.Join(testenv.SignedTools(), "signed_echo.wasm"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "echo.wasm"), module, 0o644))
	file := filepath.Join(dir, "kiosk.yaml")
	require.NoError(t, os.WriteFile(file, []byte("name: kiosk-tools\nselector: {site: lobby}\ntools: [echo.wasm]\n"), 0o644))

	out, errOut, code := f.ctl("rollout", "apply", file)
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "rollout kiosk-tools: revision 1 (new revision), 1 devices selected\n", out)
	out, _, code = f.ctl("rollout", "apply", file)
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "revision 1 (unchanged: already the current revision)")

	out, errOut, code = f.ctl("rollout", "status", "kiosk-tools", "--watch")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "rollout kiosk-tools: done, revision 1 of 1, selector site=lobby")
	assert.Regexp(t, `kiosk-1\s+1\s+done\s+true\s+1\s`, out)
	out, _, code = f.ctl("rollout", "history", "kiosk-tools")
	require.Equal(t, exitOK, code)
	assert.Regexp(t, `1\s+\S+ \S+\s+admin\s+signed_echo\s+current`, out)

	require.NoError(t, os.WriteFile(file, []byte("name: kiosk-tools\nselector: {site: lobby}\ntools: [echo.wasm]\nwave: [1]\n"), 0o644))
	_, errOut, code = f.ctl("rollout", "apply", file)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "field wave not found", "checked before anything is sent")
}
