package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestThePackagedConfigLoads(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.Root(), "packaging", "agent.yaml"))
	require.NoError(t, err)
	// Temporary dirs stand for /srv/kiosk and the tools dir, which must exist.
	kiosk, tools := t.TempDir(), t.TempDir()
	path := filepath.Join(t.TempDir(), "agent.yaml")
	yaml := strings.NewReplacer("/srv/kiosk", kiosk, "/usr/lib/aip-agent/tools", tools).Replace(string(b))
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	assert.Empty(t, cfg.TokenFile, "the unit passes the token's credential path")
	assert.Equal(t, "/var/lib/aip-agent", cfg.DataDir, "the unit's state directory")
	assert.Equal(t, int64(64<<20), cfg.MemoryLimit)
}

func TestTheSystemdUnitIsHardenedAndValid(t *testing.T) {
	path := filepath.Join(testenv.Root(), "packaging", "aip-agent.service")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, line := range []string{"Restart=always", "NoNewPrivileges=yes", "ProtectSystem=strict",
		"StateDirectory=aip-agent", "ReadWritePaths=/var/lib/aip-agent", "DynamicUser=yes", "KillSignal=SIGTERM",
		"LoadCredential=device.token:/etc/edgeaip/device.token",
		"ExecStart=/usr/local/bin/aip-agent --config /etc/edgeaip/agent.yaml --token-file %d/device.token"} {
		assert.Contains(t, string(b), "\n"+line+"\n")
	}
	// An agent that updates itself runs releases from its state dir, as
	// the service's child: the unit must let it execute them there, and
	// give the supervisor and the agent time to stop in turn.
	for _, forbids := range []string{"NoExecPaths=", "KillMode=none", "MemoryDenyWriteExecute=yes"} {
		assert.NotContains(t, string(b), "\n"+forbids)
	}
	assert.Contains(t, string(b), "\nTimeoutStopSec=30s\n", "above the 20 s the supervisor gives the agent to end (its grace, its flush, a margin)")
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skipf("systemd-analyze is not installed, so the unit's syntax is not checked: %v", err)
	}
	// verify wants ExecStart's binary to exist.
	unit := filepath.Join(t.TempDir(), "aip-agent.service")
	self, err := os.Executable()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(unit, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/aip-agent", self)), 0o644))
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	assert.NoError(t, err, "systemd-analyze verify:\n%s", out)
	// verify exits 0 on a directive it ignores ("Unknown key", "Failed to
	// parse ..., ignoring"), and may warn about units of the host: each
	// line about our file is a problem.
	assert.Empty(t, linesNaming(string(out), filepath.Base(unit)), "systemd-analyze verify warns about the unit")
	if len(out) > 0 {
		t.Logf("systemd-analyze verify:\n%s", out)
	}
}

// linesNaming are the lines of out that contain name.
func linesNaming(out, name string) []string {
	var lines []string
	for line := range strings.Lines(out) {
		if strings.Contains(line, name) {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	return lines
}
