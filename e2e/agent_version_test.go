package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stampedAgent builds cmd/aip-agent with make, stamped with release v,
// as make build VERSION=v does.
func stampedAgent(t testing.TB, v string) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	bin := t.TempDir()
	out, err := exec.Command("make", "-C", testenv.Root(), "--no-print-directory", "BIN="+bin, "GO="+testenv.Go(), "VERSION="+v,
		filepath.Join(bin, "aip-agent")).CombinedOutput()
	require.NoError(t, err, "make aip-agent VERSION=%s:\n%s", v, out)
	return filepath.Join(bin, "aip-agent")
}

// An agent built with make build VERSION=… registers with its version,
// which the API and aipctl devices show.
func TestAStampedAgentRegistersWithItsVersion(t *testing.T) {
	c := newCluster(t)
	p := newAgentProcess(t, agentYAML(t, "kiosk-1", c.wsURL(), c.enroll("kiosk-1"), t.TempDir(), t.TempDir()))
	p.argv[0] = stampedAgent(t, "1.4.0-e2e")
	p.start()
	c.waitOnline("kiosk-1", true)

	info := c.device("kiosk-1").Info
	require.NotNil(t, info)
	assert.Equal(t, "1.4.0-e2e", info.AgentVersion)

	cmd := exec.Command(testenv.Command(t, "aipctl"), "--server", c.http.URL, "--token-file", filepath.Join(c.data, server.AdminTokenFile), "devices")
	cmd.Env = append(os.Environ(), "AIP_TOKEN=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Regexp(t, `(?m)^kiosk-1\s+true\s+\S+ ago\s+`+regexp.QuoteMeta(info.Platform+"/"+info.Arch)+`\s+1\.4\.0-e2e\s`, string(out))
}
